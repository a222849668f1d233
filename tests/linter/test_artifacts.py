"""SARIF and GitHub output name what can be annotated: Helm templates for rendered stdin, --stdin-filename."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lint import line_of, only_rules, run_lint
from tests.support.paths import FIXTURES, SARIF_SCHEMA

LINT = FIXTURES / "lint"
RENDERED = (LINT / "helm-rendered.yaml").read_text()
POD = (LINT / "pod-limit-missing.yaml").read_text()


def _sarif_results(out: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = json.loads(out)["runs"][0]["results"]
    return results


def _where(result: dict[str, Any]) -> tuple[str, int, int]:
    loc = result["locations"][0]["physicalLocation"]
    return loc["artifactLocation"]["uri"], loc["region"]["startLine"], loc["region"]["startColumn"]


def _source_line(text: str, template: str) -> int:
    return line_of(text, f"# Source: {template}")[0]


def test_sarif_of_helm_stdin_names_the_templates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsonschema  # type: ignore[import-untyped]

    config = only_rules(tmp_path, "gpu-limit-missing")
    code, out, _ = run_lint(["-", "--config", config, "--format", "sarif"], capsys, monkeypatch, RENDERED.encode())
    assert code == 1
    sarif = json.loads(out)
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    deployment, job = _sarif_results(out)
    gpu_line, gpu_col = line_of(RENDERED, "nvidia.com/gpu: 1")
    start = _source_line(RENDERED, "gpu-app/templates/deployment.yaml")
    assert _where(deployment) == ("gpu-app/templates/deployment.yaml", gpu_line - start, gpu_col)
    assert deployment["properties"]["helm"] == {
        "template": "gpu-app/templates/deployment.yaml",
        "regionIn": "rendered-document",
        "renderedFrom": "<stdin>",
        "renderedLine": gpu_line,
    }
    assert "rendered from Helm template gpu-app/templates/deployment.yaml" in deployment["message"]["text"]
    amd_line, amd_col = line_of(RENDERED, "amd.com/gpu: 1")
    start = _source_line(RENDERED, "gpu-app/templates/job.yaml")
    assert _where(job) == ("gpu-app/templates/job.yaml", amd_line - start, amd_col)
    # the region counts from the line after `# Source:`, so it lands on the finding's own line there
    doc_lines = RENDERED.splitlines()[start:]
    assert "amd.com/gpu: 1" in doc_lines[_where(job)[1] - 1]


def test_github_of_helm_stdin_annotates_the_templates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = only_rules(tmp_path, "gpu-limit-missing")
    _, out, _ = run_lint(["-", "--config", config, "--format", "github"], capsys, monkeypatch, RENDERED.encode())
    gpu_line, gpu_col = line_of(RENDERED, "nvidia.com/gpu: 1")
    relative = gpu_line - _source_line(RENDERED, "gpu-app/templates/deployment.yaml")
    first = out.splitlines()[0]
    assert first.startswith(
        f"::error file=gpu-app/templates/deployment.yaml,line={relative},col={gpu_col},title=gpu-limit-missing::"
    )
    assert f"<stdin> line {gpu_line}; the template's own line may differ" in first
    assert "file=<stdin>" not in out


def test_helm_chart_names_templates_in_the_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = tmp_path / "charts" / "my-app"
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: gpu-app\nversion: 1.0.0\n")
    monkeypatch.chdir(tmp_path)
    config = only_rules(tmp_path, "gpu-limit-missing")
    args = ["-", "--config", config, "--helm-chart", "charts/my-app"]
    _, out, _ = run_lint([*args, "--format", "sarif"], capsys, monkeypatch, RENDERED.encode())
    assert [_where(r)[0] for r in _sarif_results(out)] == [
        "charts/my-app/templates/deployment.yaml", "charts/my-app/templates/job.yaml",
    ]
    _, out, _ = run_lint([*args, "--format", "github"], capsys, monkeypatch, RENDERED.encode())
    assert out.startswith("::error file=charts/my-app/templates/deployment.yaml,")
    code, _, err = run_lint(["-", "--helm-chart", "charts/none"], capsys, monkeypatch, RENDERED.encode())
    assert code == 2 and "--helm-chart charts/none: no Chart.yaml" in err


def test_a_rendered_file_on_disk_keeps_its_own_positions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file exists in the repository: annotate it at its exact line; the template is a property."""
    monkeypatch.chdir(LINT)
    config = only_rules(tmp_path, "gpu-limit-missing")
    _, out, _ = run_lint(["helm-rendered.yaml", "--config", config, "--format", "sarif"], capsys, monkeypatch)
    first = _sarif_results(out)[0]
    assert _where(first) == ("helm-rendered.yaml", *line_of(RENDERED, "nvidia.com/gpu: 1"))
    assert first["properties"]["source"] == "gpu-app/templates/deployment.yaml"
    assert "helm" not in first["properties"]


def test_stdin_filename_names_plain_stdin_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = only_rules(tmp_path, "gpu-limit-missing")
    line, col = line_of(POD, "nvidia.com/gpu: 1")
    args = ["--stdin-filename", "k8s/trainer.yaml", "--config", config]
    _, out, _ = run_lint([*args, "--format", "sarif"], capsys, monkeypatch, POD.encode())  # no path: stdin
    assert [_where(r) for r in _sarif_results(out)] == [("k8s/trainer.yaml", line, col)]
    _, out, _ = run_lint(["-", *args, "--format", "github"], capsys, monkeypatch, POD.encode())
    assert out.startswith(f"::error file=k8s/trainer.yaml,line={line},col={col},title=gpu-limit-missing::")
    _, out, _ = run_lint(["-", *args, "--format", "json"], capsys, monkeypatch, POD.encode())
    assert json.loads(out)["findings"][0]["file"] == "k8s/trainer.yaml"
    _, out, _ = run_lint(["-", *args], capsys, monkeypatch, POD.encode())
    assert out.startswith(f"k8s/trainer.yaml:{line}:{col} error gpu-limit-missing")


def test_stdin_filename_needs_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_lint([str(LINT / "pod-good.yaml"), "--stdin-filename", "x.yaml"], capsys, monkeypatch)
    assert code == 2 and out == ""
    assert "--stdin-filename names stdin: add - to the paths" in err


def test_documents_without_source_after_helm_ones_keep_the_stdin_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = RENDERED + "---\n" + POD
    config = only_rules(tmp_path, "gpu-limit-missing")
    args = ["-", "--stdin-filename", "all.yaml", "--config", config, "--format", "github"]
    _, out, _ = run_lint(args, capsys, monkeypatch, stream.encode())
    files = [line.split(",", 1)[0] for line in out.splitlines() if line.startswith("::error")]
    assert files == [
        "::error file=gpu-app/templates/deployment.yaml",
        "::error file=gpu-app/templates/job.yaml",
        "::error file=all.yaml",
    ]
    pod_line = len(RENDERED.splitlines()) + 1 + line_of(POD, "nvidia.com/gpu: 1")[0]
    assert f"file=all.yaml,line={pod_line}," in out


def test_input_errors_in_a_rendered_template_point_at_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsonschema

    broken = RENDERED.replace("  name: release-gpu-app-check\n", "  name: a\n  name: b\n")
    code, out, _ = run_lint(["-", "--format", "sarif"], capsys, monkeypatch, broken.encode())
    assert code == 2
    sarif = json.loads(out)
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    (note,) = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    dup_line = line_of(broken, "  name: b")[0]
    start = _source_line(broken, "gpu-app/templates/job.yaml")
    location = note["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "gpu-app/templates/job.yaml"
    assert location["region"] == {"startLine": dup_line - start}
    assert note["properties"]["helm"]["renderedLine"] == dup_line
    assert "duplicate key 'name'" in note["message"]["text"]
    _, out, _ = run_lint(["-", "--format", "github"], capsys, monkeypatch, broken.encode())
    assert f"::error file=gpu-app/templates/job.yaml,line={dup_line - start},title=gpuguard input error::" in out
