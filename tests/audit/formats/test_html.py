"""The audit's HTML report: the page an SRE attaches to a change ticket, drawn by headless Chromium."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from audit.formats.html import render_page
from gpuguard.audit.auditor import Auditor
from gpuguard.audit.dumps import DumpReader
from gpuguard.audit.model import AuditResult
from gpuguard.cli import main as gpuguard
from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from tests.support.browser import ink, render
from tests.support.paths import FIXTURES

AUDIT = FIXTURES / "audit"
WHEN = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def audit(after: bool) -> AuditResult:
    auditor = Auditor(Config(), load_cluster_facts(str(AUDIT / "cluster-before.yaml")),
                      load_cluster_facts(str(AUDIT / "cluster-after.yaml")) if after else None, matrix=True,
                      cluster="cluster-before.yaml", cluster_after="cluster-after.yaml" if after else None)
    DumpReader(auditor).read([str(AUDIT / "workloads.yaml")])
    return auditor.finish()


def test_the_change_comes_first_then_totals_namespaces_and_the_matrix() -> None:
    page = render_page(audit(True), WHEN)
    order = [page.index(f'id="{anchor}"') for anchor in ("change", "totals", "namespaces", "matrix")]
    assert order == sorted(order)
    change = page[page.index('id="change"'):page.index('id="totals"')]
    assert change.index("Introduced by the change") < change.index("Resolved by the change")
    assert "1 finding unchanged by the change" in change
    assert "Node groups the planned cluster no longer has: Tesla-T4 (3 nodes" in change
    assert "generated 2026-11-30 12:00 UTC" in page
    matrix = page[page.index('id="matrix"'):]
    assert matrix.count("<tr>") == 1 + 8  # header, one row per GPU pod template
    assert "was: fits" in matrix and "CUDA: minor-version" in matrix and "new node group" not in matrix
    assert not re.search(r"""(src|href)\s*=|<script|<link|url\(""", page, re.IGNORECASE)


def test_without_a_change_there_is_no_diff_section() -> None:
    page = render_page(audit(False), WHEN)
    assert 'id="change"' not in page and "planned change" not in page
    assert 'id="matrix"' in page and "was:" not in page


def test_long_tables_are_cut_with_a_pointer_to_the_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.formats import html

    monkeypatch.setattr(html, "MAX_NAMESPACE_ROWS", 1)
    page = render_page(audit(False), WHEN)
    research = page[page.index("<h3>research"):page.index('id="matrix"')]
    assert research.count("<tr>") == 2 and "… and 2 more, less severe" in research
    assert "gpu-resource-unknown" in research  # the error is the row kept


@pytest.mark.integration
def test_chromium_renders_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "audit.html"
    code = gpuguard(["audit", str(AUDIT / "workloads.yaml"), "--cluster", str(AUDIT / "cluster-before.yaml"),
                     "--cluster-after", str(AUDIT / "cluster-after.yaml"), "--format", "html", "--output", str(report)])
    assert code == 1 and "wrote" in capsys.readouterr().err
    png = tmp_path / "audit.png"
    render(report, png)
    drawn = ink(png)
    assert drawn.size == (1280, 2000)
    # a real page: a fifth of the pixels or more carry text, borders, tiles and badges in many colours
    assert drawn.share > 0.05 and drawn.colours > 50, drawn
