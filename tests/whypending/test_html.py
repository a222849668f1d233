"""``--format html``: one self-contained file (no scripts, no external assets), text escaped, every
pod and reason present; rendered in headless Chromium, it draws a real page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpuguard.cli import main
from policies.pending import diagnose as dg
from tests.support.browser import dom, measure, screenshot
from tests.support.cluster_objects import A100, all_objects, container, node, pod, scenario
from tests.support.proc import gpuguard
from tests.whypending.support import objects, write_dump

MIG_RESOURCE = "nvidia.com/mig-1g.10gb"
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


def _mig_node(name: str, slices: int) -> dict[str, Any]:
    """An A100 under the GPU operator's mixed MIG strategy: its GPUs are advertised as MIG slices
    (nvidia.com/mig-1g.10gb), none as whole nvidia.com/gpu."""
    mig = node(name, product=A100, instance="p4de.24xlarge", capacity=None, allocatable=None, gfd_count=1)
    for field in ("capacity", "allocatable"):
        mig["status"][field][MIG_RESOURCE] = str(slices)
    return mig


def _tile_values(html: str) -> dict[str, str]:
    found = re.findall(r'<div class="value">([^<]*)</div><div class="label">([^<]*)</div>', html)
    return {label: value for value, label in found}


@pytest.mark.integration
def test_tiles_count_each_resource_apart_as_chromium_shows_them(tmp_path: Path) -> None:
    parts = scenario()
    parts["nodes"] += [_mig_node("a100-mig-1", 7), _mig_node("a100-mig-2", 7)]
    parts["pods"].append(pod("ml", "mig-user", node_name="a100-mig-1",
                             containers=[{**container("main"), "resources": {"limits": {MIG_RESOURCE: "3"}}}]))
    dump = write_dump(all_objects(parts), tmp_path / "cluster.json", "json")
    out = tmp_path / "why-pending.html"
    done = gpuguard("why-pending", "--dump", str(dump), "-A", "--format", "html", "--output", str(out))
    assert done.code == 0, done.stderr
    doc = json.loads(gpuguard("why-pending", "--dump", str(dump), "-A", "--format", "json").stdout)
    totals: dict[str, list[int]] = {}
    for p in doc["cluster"]["pools"]:
        free, allocatable = totals.setdefault(p["resource"], [0, 0])
        totals[p["resource"]] = [free + p["free"], allocatable + p["allocatable"]]
    assert set(totals) == {"nvidia.com/gpu", MIG_RESOURCE}
    tiles = _tile_values(dom(out, tmp_path / "profile"))
    # One tile per resource, named by it; slices are never added to whole GPUs.
    for resource, (free, allocatable) in totals.items():
        assert tiles[f"{resource} free / allocatable"] == f"{free} / {allocatable}"
    assert tiles[f"{MIG_RESOURCE} free / allocatable"] == "11 / 14"
    assert not any(label.startswith("GPUs free") for label in tiles)
    labels = list(tiles)
    assert labels.index("nvidia.com/gpu free / allocatable") < labels.index(f"{MIG_RESOURCE} free / allocatable")
