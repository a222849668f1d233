"""``--format html``: one self-contained file (no scripts, no external assets), text escaped, every
pod and reason present; rendered in headless Chromium, it draws a real page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuguard.cli import main
from policies.pending import diagnose as dg
from tests.support.browser import measure, screenshot
from tests.support.cluster_objects import all_objects, container, pod, scenario
from tests.whypending.support import objects, write_dump

HOSTILE = '<img src=x onerror="alert(1)"> & <script>alert(2)</script>'


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("html")
    dump = write_dump(objects(), base / "cluster.json", "json")
    out = base / "why-pending.html"
    assert main(["why-pending", "--dump", str(dump), "-A", "--format", "html", "--output", str(out)]) == 0
    return out


def test_self_contained(report: Path) -> None:
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    lowered = html.lower()
    for needle in ("<script", "<link", "<iframe", " src=", "url(", "@import"):
        assert needle not in lowered, needle
    hrefs = re.findall(r'href="([^"]*)"', html)
    ids = set(re.findall(r' id="([^"]*)"', html))
    assert hrefs and all(h.startswith("#") and h[1:] in ids for h in hrefs)


def test_every_pod_and_reason_is_there(report: Path) -> None:
    html = report.read_text()
    for key in ("ml/big-train", "ml/fits-now", "ml/gated", "ml/medium", "research/urgent", "serving/l4-infer"):
        assert f"<h2>{key}</h2>" in html
    for kind in (dg.GATED, dg.STATIC, dg.SCHEDULER, dg.INSUFFICIENT, dg.FRAGMENTATION, dg.UNHEALTHY,
                 dg.PLUGIN_DOWN, dg.PREEMPTIBLE):
        assert f">{kind}</span>" in html, kind
    assert "<h2>GPU pools</h2>" in html and "NVIDIA-H100-80GB-HBM3 (p5.48xlarge)" in html
    # the static badge takes the finding's own severity
    assert '<span class="badge warning">static</span>' in html


def test_event_text_is_escaped(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    parts = scenario()
    message = f"0/10 nodes are available: 10 {HOSTILE}."
    parts["pods"].append(pod("ml", "hostile", containers=[container("main", 1)], scheduled_message=message))
    dump = write_dump(all_objects(parts), tmp_path / "c.json", "json")
    assert main(["why-pending", "--dump", str(dump), "-n", "ml", "hostile", "--format", "html"]) == 0
    html = capsys.readouterr().out
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &lt;script&gt;" in html


@pytest.mark.integration
def test_chromium_draws_the_report(report: Path, tmp_path: Path) -> None:
    png = screenshot(report, tmp_path / "report.png", tmp_path / "profile")
    drawn = measure(png, {"header": (0x1D, 0x23, 0x30), "error": (0xB4, 0x23, 0x18), "warning": (0x9A, 0x5B, 0x00)})
    assert drawn.size == (1280, 2000)
    assert drawn.ink > 0.05, drawn  # a blank or unstyled page is nearly all one colour
    assert drawn.colours > 50, drawn  # anti-aliased text, badges and tiles
    assert drawn.has == {"header": True, "error": True, "warning": True}, drawn
