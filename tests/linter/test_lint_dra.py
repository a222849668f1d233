"""``gpuguard lint`` on DRA manifests: claims and templates are linted like pod templates, a pod's claims
resolve to the templates of the same file, then of the other files of the run, then of the cluster
snapshot (``--cluster`` with DeviceClasses and ResourceSlices).

Manifests are NVIDIA's demos (NVIDIA/k8s-dra-driver-gpu@22407113, the shared corpus) and the
Kubernetes docs' examples; the cluster is tests/fixtures/dra/nvidia-mixed-cluster.yaml.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lint import line_of, run_lint
from tests.support.paths import CORPUS, FIXTURES
from tests.support.proc import gpuguard

MIXED = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"
DEMOS = CORPUS / "real"
GPU_TEST4 = DEMOS / "NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__gpu-test4.yaml"


def lint_json(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    _, out, _ = run_lint([*argv, "--format", "json"], capsys, monkeypatch)
    report: dict[str, Any] = json.loads(out)
    return report


def rules_at(report: dict[str, Any], rule: str) -> list[tuple[str, int, str]]:
    return sorted((Path(f["file"]).name, f["line"], f["path"]) for f in report["findings"] if f["rule"] == rule)


def test_a_mistyped_request_is_found_through_the_template_in_the_same_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = GPU_TEST4.read_text().replace("request: mig-2g-10gb\n", "request: mig-2g-10gb-0\n")
    path = tmp_path / "gpu-test4.yaml"
    path.write_text(text)
    report = lint_json([str(path)], capsys, monkeypatch)
    line, _ = line_of(text, "request: mig-2g-10gb-0")
    assert rules_at(report, "gpu-dra-request-reference") == [
        ("gpu-test4.yaml", line, "/spec/template/spec/containers/2/resources/claims/0/request")
    ]
    # without cluster facts the rules that need them are skipped, and the summary says so
    assert {"gpu-dra-device-class", "gpu-dra-unsatisfiable"} <= set(report["summary"]["skipped_rules"])
    clean = lint_json([str(GPU_TEST4)], capsys, monkeypatch)
    assert rules_at(clean, "gpu-dra-request-reference") == []


def test_templates_of_other_files_of_the_run_resolve_but_the_same_file_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = GPU_TEST4.read_text()
    template, _, rest = text.partition("\n---\napiVersion: apps/v1")
    (tmp_path / "template.yaml").write_text(template)
    (tmp_path / "deployment.yaml").write_text(
        "apiVersion: apps/v1" + rest.replace("request: mig-3g-20gb\n", "request: mig-3g-40gb\n")
    )
    report = lint_json([str(tmp_path)], capsys, monkeypatch)
    assert [r[0] for r in rules_at(report, "gpu-dra-request-reference")] == ["deployment.yaml"]

    # a file carrying its own template of that name is judged against its own
    own = template.replace("name: mig-3g-20gb\n", "name: mig-3g-40gb\n")
    (tmp_path / "deployment.yaml").write_text(
        own + "\n---\napiVersion: apps/v1" + rest.replace("request: mig-3g-20gb\n", "request: mig-3g-40gb\n")
    )
    report = lint_json([str(tmp_path)], capsys, monkeypatch)
    assert rules_at(report, "gpu-dra-request-reference") == []


def test_against_a_dra_snapshot(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    imex = DEMOS / "NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__imex-test1.yaml"
    gpu_test6 = DEMOS / "NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__gpu-test6.yaml"
    report = lint_json([str(imex), str(gpu_test6), "--cluster", str(MIXED)], capsys, monkeypatch)
    imex_text = imex.read_text()
    lines = [line_of(imex_text, "deviceClassName: imex.nvidia.com", after)[0] for after in (0, 30, 43, 56)]
    assert [r[1] for r in rules_at(report, "gpu-dra-device-class")] == lines
    (selector,) = [f for f in report["findings"] if f["rule"] == "gpu-dra-selector"]
    assert selector["severity"] == "error" and "gpu.nvidia.com/index" in selector["message"]
    assert selector["line"] == line_of(gpu_test6.read_text(), "expression: |")[0]
    (unsatisfiable,) = [f for f in report["findings"] if f["rule"] == "gpu-dra-unsatisfiable"]
    assert Path(unsatisfiable["file"]).name == gpu_test6.name
    # this cluster's DRA GPUs are H100s and an L4: the a100 test fails before `index` is read
    assert "selector #0" in unsatisfiable["message"] and "matches none of them" in unsatisfiable["message"]
    assert report["summary"]["skipped_rules"] == []


def test_an_extended_resource_served_by_dra_is_known_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVIDIA demo/specs/extended-resources/gpu-full.yaml's pod pinned to the DRA-only H100 pool: no
    gpu-resource-unknown, no gpu-unschedulable; the CUDA rule reads the driver off the devices."""
    pod = tmp_path / "gpu-full.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: gpu-full-pod}\nspec:\n  nodeSelector: {pool: h100}\n"
        "  containers:\n  - name: cuda-container\n    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0\n"
        "    resources: {limits: {nvidia.com/gpu: 1, memory: 1Gi}}\n"
    )
    report = lint_json([str(pod), "--cluster", str(MIXED)], capsys, monkeypatch)
    assert report["findings"] == []
    pod.write_text(pod.read_text().replace("vectoradd-cuda12.5.0", "vectoradd-cuda13.0.1"))
    report = lint_json([str(pod), "--cluster", str(MIXED)], capsys, monkeypatch)
    (cuda,) = report["findings"]
    # driver 570.124.6 (from the H100s' driverVersion attribute) runs CUDA 13 only through forward compatibility
    assert cuda["rule"] == "gpu-cuda-driver-mismatch" and "forward compatibility" in cuda["message"]
    assert "dra-h100-0" in cuda["message"] and "570.124.06" in cuda["message"]


def test_a_stream_is_read_once_and_resolves_its_own_and_the_runs_templates(tmp_path: Path) -> None:
    """/dev/stdin can be read only once: its pods resolve to its own templates and those of the
    regular files of the run, and it is linted (not drained by the collection of templates)."""
    text = GPU_TEST4.read_text()
    template, _, rest = text.partition("\n---\napiVersion: apps/v1")
    mistyped = "apiVersion: apps/v1" + rest.replace("request: mig-3g-20gb\n", "request: mig-3g-40gb\n")
    (tmp_path / "template.yaml").write_text(template)
    for stdin, files in (((template + "\n---\n" + mistyped), []), (mistyped, [str(tmp_path / "template.yaml")])):
        result = gpuguard("lint", "/dev/stdin", *files, "--format", "json", stdin=stdin.encode())
        assert "Traceback" not in result.stderr, result.stderr
        report = json.loads(result.stdout)
        assert report["errors"] == []
        assert [(f["file"], f["path"]) for f in report["findings"] if f["rule"] == "gpu-dra-request-reference"] == [
            ("/dev/stdin", "/spec/template/spec/containers/3/resources/claims/0/request")]
