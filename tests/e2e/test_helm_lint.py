"""`helm template … | gpuguard lint -` with a real Helm binary and the gpuguard command.

The chart (tests/fixtures/helm/gpuapp) has a subchart and templates whose directives change the
line count (`{{- include … | nindent }}`, `{{- if }}`), so both kinds of region are exercised:
one that equals the template's own line and one that only matches the rendered document.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import FIXTURES, ROOT, SARIF_SCHEMA
from tests.support.tools import tool

CHART = FIXTURES / "helm" / "gpuapp"
GPUGUARD = Path(sys.executable).parent / "gpuguard"

pytestmark = pytest.mark.integration


def _render() -> str:
    helm = tool("helm")
    lint = subprocess.run([str(helm), "lint", str(CHART)], capture_output=True, text=True, timeout=120)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    done = subprocess.run(
        [str(helm), "template", "rel", str(CHART)], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def _lint(rendered: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GPUGUARD), "lint", "-", *args], input=rendered, capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def _source_lines(rendered: str) -> dict[str, int]:
    """Template → 1-based line of its `# Source:` comment in the rendered stream."""
    return {
        line.split(":", 1)[1].strip(): i
        for i, line in enumerate(rendered.splitlines(), start=1)
        if line.startswith("# Source:")
    }


def test_sarif_names_the_templates_helm_rendered() -> None:
    import jsonschema  # type: ignore[import-untyped]

    rendered = _render()
    sources = _source_lines(rendered)
    assert set(sources) == {
        "gpuapp/templates/service.yaml", "gpuapp/templates/trainer.yaml", "gpuapp/charts/worker/templates/worker.yaml",
    }
    proc = _lint(rendered, "--format", "sarif")
    assert proc.returncode == 1, proc.stderr
    sarif = json.loads(proc.stdout)
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    results: list[dict[str, Any]] = sarif["runs"][0]["results"]
    lines = rendered.splitlines()
    by_rule = {}
    for r in results:
        loc = r["locations"][0]["physicalLocation"]
        uri, region = loc["artifactLocation"]["uri"], loc["region"]
        helm = r["properties"]["helm"]
        assert uri == helm["template"] and uri in sources  # as Helm prints it, never "stdin"
        # the region is inside the rendered document: its line counted from the `# Source:` line
        assert helm["renderedLine"] == sources[uri] + region["startLine"]
        by_rule[r["ruleId"]] = (uri, region["startLine"], helm["renderedLine"])
    uri, line, rendered_line = by_rule["gpu-limit-missing"]
    assert uri == "gpuapp/templates/trainer.yaml"
    assert lines[rendered_line - 1].strip() == "nvidia.com/gpu: 1"
    # nindent expanded the labels above it, so the template's own line is elsewhere: the message says so
    template_lines = (CHART / "templates" / "trainer.yaml").read_text().splitlines()
    assert "nvidia.com/gpu" not in template_lines[line - 1]
    uri, line, _ = by_rule["gpu-request-limit-mismatch"]
    assert uri == "gpuapp/charts/worker/templates/worker.yaml"
    worker = (CHART / "charts" / "worker" / "templates" / "worker.yaml").read_text().splitlines()
    assert worker[line - 1].strip() == "nvidia.com/gpu: {{ .Values.gpus }}"  # no directive above: same line


def test_github_annotations_with_the_chart_directory() -> None:
    rendered = _render()
    chart = CHART.relative_to(ROOT).as_posix()
    proc = _lint(rendered, "--format", "github", "--helm-chart", chart)
    assert proc.returncode == 1, proc.stderr
    files = {
        line.split("file=", 1)[1].split(",", 1)[0] for line in proc.stdout.splitlines() if line.startswith("::error")
    }
    assert files == {f"{chart}/templates/trainer.yaml", f"{chart}/charts/worker/templates/worker.yaml"}
    assert all((ROOT / f).is_file() for f in files)  # annotations attach to real files of the repository
    assert "<stdin>" not in "".join(line.split("::", 2)[1] for line in proc.stdout.splitlines() if line.startswith("::"))


def test_fixed_values_render_a_clean_chart() -> None:
    helm = tool("helm")
    done = subprocess.run(
        [str(helm), "template", "rel", str(CHART), "--set", "gpuLimit=true", "--set", "worker.gpuLimit=2"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    proc = _lint(done.stdout, "--format", "github", "--fail-on", "error")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "::error" not in proc.stdout
