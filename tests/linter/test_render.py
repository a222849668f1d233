"""`gpuguard lint` renders Helm charts and kustomizations with the real tools, and never drops input.

The CLI runs in a subprocess; helm and kubectl come from `.ci/get-tools` (tests.support.tools).
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES, ROOT
from tests.support.tools import tool

pytestmark = pytest.mark.integration
GPUGUARD = [sys.executable, "-m", "gpuguard.cli", "lint"]
CHART = FIXTURES / "helm" / "gpuapp"


def _env(*tools: Path, path: str | None = None) -> dict[str, str]:
    search = os.pathsep.join([*(str(t.parent) for t in tools), path if path is not None else "/usr/bin:/bin"])
    return {**os.environ, "PATH": search, "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}


def lint(args: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUGUARD, *args], cwd=cwd, env=env, input=None if stdin is None else stdin.decode(),
                          capture_output=True, text=True, timeout=300, check=False,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository as people keep them: a chart (with a vendored subchart), a kustomize base and
    overlay, plain manifests, and files that are no manifests."""
    shutil.copytree(CHART, tmp_path / "charts" / "gpuapp")
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [job.yaml]\n")
    (tmp_path / "base" / "job.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: train}\nspec:\n  template:\n    spec:\n"
        "      restartPolicy: Never\n      containers:\n        - name: main\n"
        "          image: registry.example.com/train:1\n"
        "          resources: {limits: {nvidia.com/gpu: 1, memory: 8Gi}}\n"
    )
    (tmp_path / "overlays" / "prod").mkdir(parents=True)
    (tmp_path / "overlays" / "prod" / "kustomization.yaml").write_text(
        "resources: [../../base]\npatches:\n  - target: {kind: Job, name: train}\n    patch: |-\n"
        "      - op: replace\n        path: /spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu\n"
        "        value: 1.5\n"
    )
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n"
        "      image: registry.example.com/app:1\n      resources: {limits: {nvidia.com/gpu: 1, memory: 1Gi}}\n"
    )
    (tmp_path / "README.md").write_text("# not a manifest\n")
    return tmp_path


def _findings(out: str) -> list[dict[str, object]]:
    findings: list[dict[str, object]] = json.loads(out)["findings"]
    return findings


def test_a_repository_with_a_chart_a_kustomization_and_manifests(repo: Path) -> None:
    """Issue: `gpuguard lint .` gave one "unrendered template" input error per template (exit 2)."""
    helm, kubectl = tool("helm"), tool("kubectl")
    proc = lint([".", "--format", "json"], repo, _env(helm, kubectl))
    assert proc.returncode == 1, proc.stderr  # findings, not input errors
    report = json.loads(proc.stdout)
    assert report["errors"] == [] and report["summary"]["input_errors"] == 0
    by_file = {(f["file"], f["rule"]) for f in report["findings"]}
    # The chart once (its raw templates never), the base and the overlay each rendered, the pod as it is.
    assert ("charts/gpuapp", "gpu-limit-missing") in by_file
    assert ("overlays/prod", "gpu-whole-number") in by_file  # the overlay's patch was applied
    assert not any(f.startswith("charts/gpuapp/") for f, _ in by_file)
    files = {f for f, _ in by_file}
    assert files <= {"charts/gpuapp", "base", "overlays/prod", "manifests/pod.yaml"}
    assert report["summary"]["files"] == 4


def test_chart_findings_land_on_the_template_in_every_format(repo: Path) -> None:
    helm = tool("helm")
    sarif = repo / "out.sarif"
    proc = lint(["charts/gpuapp", "--sarif", str(sarif)], repo, _env(helm))
    assert proc.returncode == 1, proc.stderr
    # The trainer's request is `nvidia.com/gpu: {{ .Values.gpus }}`: a templated line, so the
    # position is the rendered document's, and the report says so.
    assert "charts/gpuapp/templates/trainer.yaml:" in proc.stdout
    assert "of the document rendered from Helm template gpuapp/templates/trainer.yaml" in proc.stdout
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(sarif.read_text())["runs"][0]["results"]}
    assert uris and all(u.startswith("charts/gpuapp/") and (repo / u).is_file() for u in uris), uris
    github = lint(["charts/gpuapp", "--format", "github"], repo, _env(helm))
    assert "file=charts/gpuapp/templates/trainer.yaml" in github.stdout


def test_a_line_the_template_holds_verbatim_is_placed_on_the_template_line(tmp_path: Path) -> None:
    helm = tool("helm")
    chart = tmp_path / "plain"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: plain\nversion: 1.0.0\n")
    template = (
        "{{- if true }}\n"  # a directive line before: the rendered document is one line shorter
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  containers:\n"
        "    - name: c\n      image: busybox\n      resources:\n        requests: {nvidia.com/gpu-typo: 1}\n"
        "{{- end }}\n"
    )
    (chart / "templates" / "pod.yaml").write_text(template)
    proc = lint(["plain", "--format", "json"], tmp_path, _env(helm))
    [place] = {(f["rule"], f["line"]) for f in _findings(proc.stdout) if f["rule"] == "gpu-limit-missing"}
    text = lint(["plain"], tmp_path, _env(helm)).stdout
    # `requests: {nvidia.com/gpu-typo: 1}` occurs once in the template: its own line 11, sure.
    assert "plain/templates/pod.yaml:11:" in text and "may differ" not in text, text
    assert place[1] != 11  # the rendered stream's line is another


def test_values_set_release_and_namespace_reach_helm(repo: Path) -> None:
    helm = tool("helm")
    values = repo / "gpu-limit.yaml"
    values.write_text("gpuLimit: true\n")
    base = lint(["charts/gpuapp", "--format", "json"], repo, _env(helm))
    fixed = lint(["charts/gpuapp", "--format", "json", "--helm-values", "gpu-limit.yaml"], repo, _env(helm))
    assert "gpu-limit-missing" in {f["rule"] for f in _findings(base.stdout)}
    assert "gpu-limit-missing" not in {f["rule"] for f in _findings(fixed.stdout)}
    (repo / "charts" / "gpuapp" / "templates" / "probe.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-probe\n"
        "  namespace: {{ .Release.Namespace }}\nspec:\n  containers:\n    - name: c\n      image: busybox\n"
        "      resources: {limits: {nvidia.com/gpu: 0.5}}\n"
    )
    named = lint(["charts/gpuapp", "--format", "json", "--helm-release", "prod", "--namespace", "ml",
                  "--helm-set", "gpuLimit=true"], repo, _env(helm))
    found = _findings(named.stdout)
    assert "gpu-limit-missing" not in {f["rule"] for f in found}
    assert {f["name"] for f in found} <= {"prod-trainer", "prod-worker", "prod-probe"}
    assert {(f["name"], f["namespace"]) for f in found if f["name"] == "prod-probe"} == {("prod-probe", "ml")}


def test_a_file_inside_a_chart_renders_the_chart(repo: Path) -> None:
    """What pre-commit passes: a changed template or values file."""
    helm = tool("helm")
    proc = lint(["charts/gpuapp/templates/trainer.yaml", "charts/gpuapp/values.yaml", "--format", "json"],
                repo, _env(helm))
    report = json.loads(proc.stdout)
    assert report["errors"] == [] and report["summary"]["files"] == 1, proc.stdout


def test_missing_dependencies_name_helm_dependency_build(repo: Path) -> None:
    helm = tool("helm")
    shutil.rmtree(repo / "charts" / "gpuapp" / "charts")
    proc = lint(["charts/gpuapp"], repo, _env(helm))
    assert proc.returncode == 2
    assert "charts/gpuapp/Chart.yaml: input error: helm template failed:" in proc.stdout
    assert "helm dependency build charts/gpuapp" in proc.stdout


def test_without_the_tool_the_error_prints_the_command_to_pipe(repo: Path) -> None:
    proc = lint(["charts/gpuapp", "base"], repo, _env(path=""))
    assert proc.returncode == 2
    assert ("helm is not on PATH (--helm PATH names it); render it yourself: "
            "helm template release-name charts/gpuapp | gpuguard lint - --helm-chart charts/gpuapp") in proc.stdout
    assert "render it yourself: kubectl kustomize base | gpuguard lint -" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_a_template_error_is_an_input_error_with_helms_reason(repo: Path) -> None:
    helm = tool("helm")
    (repo / "charts" / "gpuapp" / "templates" / "broken.yaml").write_text("kind: {{ .Values.nope.deeper }}\n")
    proc = lint(["charts/gpuapp"], repo, _env(helm))
    assert proc.returncode == 2 and "helm template failed:" in proc.stdout and "nil pointer" in proc.stdout


def test_fixes_are_not_written_into_rendered_output(repo: Path) -> None:
    helm = tool("helm")
    before = (repo / "charts" / "gpuapp" / "templates" / "trainer.yaml").read_text()
    proc = lint(["charts/gpuapp", "--fix"], repo, _env(helm))
    assert "is rendered, not edited; change its templates" in proc.stdout
    assert (repo / "charts" / "gpuapp" / "templates" / "trainer.yaml").read_text() == before


# --- input is never dropped ------------------------------------------------------------------


POD = (b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n"
       b"      image: busybox\n      resources: {limits: {nvidia.com/gpu: 0.5}}\n")


def test_piped_stdin_is_linted_without_a_dash(tmp_path: Path) -> None:
    """Issue: `gpuguard lint < pod.yaml` ignored stdin and linted the working directory."""
    (tmp_path / "other.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    proc = lint(["--format", "json"], tmp_path, _env(), stdin=POD)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and {f["file"] for f in report["findings"]} == {"<stdin>"}


def test_a_terminal_on_stdin_lints_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_bytes(POD)
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run([*GPUGUARD, "--format", "json"], cwd=tmp_path, env=_env(), stdin=secondary,
                              capture_output=True, text=True, timeout=120, check=False)
    finally:
        os.close(secondary)
        os.close(primary)
    assert {f["file"] for f in _findings(proc.stdout)} == {"pod.yaml"}, proc.stderr


def test_no_objects_is_said_and_can_fail_the_run(tmp_path: Path) -> None:
    """Issue: a run that finds no Kubernetes object exited 0 silently (values.yaml, an empty dir)."""
    (tmp_path / "values.yaml").write_text("gpus: 2\n")
    quiet = lint(["values.yaml", "--format", "json"], tmp_path, _env())
    assert quiet.returncode == 0 and "note: no Kubernetes objects found in values.yaml" in quiet.stderr
    strict = lint(["values.yaml", "--fail-if-no-objects"], tmp_path, _env())
    assert strict.returncode == 2 and "note: no Kubernetes objects found in values.yaml" in strict.stdout


def test_enable_and_disable_rules_for_one_run(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_bytes(POD)
    (tmp_path / ".gpuguard.yaml").write_text("rules:\n  gpu-memory-limit-missing: {severity: off}\n")
    plain = {f["rule"] for f in _findings(lint(["pod.yaml", "--format", "json"], tmp_path, _env()).stdout)}
    tuned = lint(["pod.yaml", "--format", "json", "--disable", "gpu-whole-number",
                  "--enable", "gpu-memory-limit-missing"], tmp_path, _env())
    assert "gpu-whole-number" in plain and "gpu-memory-limit-missing" not in plain
    assert {f["rule"] for f in _findings(tuned.stdout)} == plain - {"gpu-whole-number"} | {"gpu-memory-limit-missing"}
    typo = lint(["pod.yaml", "--disable", "gpu-whole-numbr"], tmp_path, _env())
    assert typo.returncode == 2 and "did you mean gpu-whole-number?" in typo.stderr
