"""Precision on the public corpus: every finding per file is pinned (rule, severity, pointer), so
noise cannot creep back and a lost true finding shows up at once.

Five runs are pinned in tests/fixtures/corpus-expected.json:

* ``default`` — ``gpuguard lint`` on the 144 real manifests with no cluster and no config: at most
  about one warning per three files;
* ``sample`` — the same with ``--cluster sample``;
* ``gke`` — the 23 Google samples against a GKE-shaped snapshot (tests/fixtures/clusters/gke.yaml)
  with the node pools they ask for declared in tests/fixtures/clusters/gke-pools.yaml: GKE runs
  ExtendedResourceToleration, so none of them may be a gpu-taint-not-tolerated error;
* ``eks`` — the 144 real manifests against an EKS-shaped snapshot (tests/fixtures/clusters/eks.yaml:
  p5.48xlarge and g5.12xlarge managed node groups tainted nvidia.com/gpu=true:NoSchedule).  EKS
  runs ExtendedResourceToleration too: no GPU pod may be a gpu-taint-not-tolerated error;
* ``added`` — the folders kept apart from ``real/`` (tests/corpus/argo: Argo Workflows with
  workflow-level DRA claims; tests/corpus/operands: the GPU Operator's operand DaemonSets) with the
  sample cluster: none of them is an error or a warning.

Input errors (unrendered placeholders) are pinned with their lines.  After a deliberate change,
review the difference and rewrite the pins:

    .venv/bin/python -m tests.linter.test_corpus_precision --update
"""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from gpuguard.cli import main as gpuguard
from tests.support.paths import CORPUS, FIXTURES

REAL = CORPUS / "real"
PINS = FIXTURES / "corpus-expected.json"
GKE = FIXTURES / "clusters" / "gke.yaml"
GKE_POOLS = FIXTURES / "clusters" / "gke-pools.yaml"
EKS = FIXTURES / "clusters" / "eks.yaml"
ADDED = (CORPUS / "argo", CORPUS / "operands")
GOOGLE = "GoogleCloudPlatform__"

pytestmark = pytest.mark.slow


def _lint(args: list[str]) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = gpuguard(["lint", *args, "--format", "json"])
    assert code in (0, 1, 2)
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


def _runs() -> dict[str, list[str]]:
    google = sorted(str(p) for p in REAL.iterdir() if p.name.startswith(GOOGLE))
    return {
        "default": [str(REAL)],
        "sample": [str(REAL), "--cluster", "sample"],
        "gke": [*google, "--cluster", str(GKE), "--config", str(GKE_POOLS)],
        "eks": [str(REAL), "--cluster", str(EKS)],
        "added": [*(str(d) for d in ADDED), "--cluster", "sample"],
    }


def _pinned_view(report: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, list[list[str]]] = {}
    for f in report["findings"]:
        findings.setdefault(Path(f["file"]).name, []).append([f["rule"], f["severity"], f["path"]])
    errors: dict[str, list[list[Any]]] = {}
    for e in report["errors"]:
        errors.setdefault(Path(e["file"]).name, []).append([e["line"], e["message"].split(":", 1)[0]])
    return {
        "findings": {name: sorted(rows) for name, rows in sorted(findings.items())},
        "input_errors": {name: sorted(rows) for name, rows in sorted(errors.items())},
        "by_severity": report["summary"]["by_severity"],
        "files": report["summary"]["files"],
    }


def current() -> dict[str, Any]:
    return {name: _pinned_view(_lint(args)) for name, args in _runs().items()}


@pytest.fixture(scope="module")
def now() -> dict[str, Any]:
    return current()


@pytest.fixture(scope="module")
def pins() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PINS.read_text())
    return data


@pytest.mark.parametrize("run", ["default", "sample", "gke", "eks", "added"])
def test_findings_per_file_are_exactly_the_pinned_ones(run: str, now: dict[str, Any], pins: dict[str, Any]) -> None:
    assert now[run] == pins[run], f"{run}: findings changed; review, then run: python -m tests.linter.test_corpus_precision --update"


def test_default_run_warns_at_most_once_per_three_files(now: dict[str, Any]) -> None:
    run = now["default"]
    assert run["files"] == 144
    assert run["by_severity"]["warning"] <= run["files"] / 3
    # Hygiene is info; nothing is a warning merely for lacking a memory limit or CPU pinning.
    rules = Counter(row[0] for rows in run["findings"].values() for row in rows if row[1] == "warning")
    assert not {"gpu-memory-limit-missing", "gpu-topology-alignment"} & set(rules)


def test_gke_samples_need_no_toleration_of_their_own(now: dict[str, Any]) -> None:
    run = now["gke"]
    assert run["files"] == 23
    rules = {row[0] for rows in run["findings"].values() for row in rows}
    assert "gpu-taint-not-tolerated" not in rules
    assert not {"gpu-node-selector-mismatch", "gpu-resource-unknown", "gpu-unschedulable"} & rules


def test_eks_gpu_node_groups_tainted_nvidia_gpu_deny_no_gpu_pod(now: dict[str, Any]) -> None:
    run = now["eks"]
    assert run["files"] == 144
    rules = {row[0] for rows in run["findings"].values() for row in rows}
    assert "gpu-taint-not-tolerated" not in rules


def test_argo_workflows_and_gpu_operator_operands_are_neither_errors_nor_warnings(now: dict[str, Any]) -> None:
    run = now["added"]
    assert run["files"] == sum(len(list(d.glob("*.yaml"))) for d in ADDED) == 10
    assert run["by_severity"]["error"] == run["by_severity"]["warning"] == 0
    assert run["by_severity"]["info"] > 0  # the operands are privileged: said, as info


def test_placeholders_are_input_errors_with_lines(now: dict[str, Any]) -> None:
    errors = now["default"]["input_errors"]
    assert errors == {
        f"{GOOGLE}kubernetes-engine-samples__ai-ml__verl-on-gke__ray-cluster-standard.yaml": [
            [102, "unrendered placeholder ${GPU_TYPE} where a node selector belongs (spec.workerGroupSpecs[0].template.spec.nodeSelector[cloud.google.com/gke-accelerator])"],
        ],
        f"{GOOGLE}kubernetes-engine-samples__autoscaling__custom-compute-classes__reservations__deployment-gpu.yaml": [
            [39, "unrendered placeholder ${ACCELERATOR_QUANTITY} where a quantity belongs (spec.template.spec.containers[0].resources.requests[nvidia.com/gpu])"],
            [43, "unrendered placeholder ${ACCELERATOR_QUANTITY} where a quantity belongs (spec.template.spec.containers[0].resources.limits[nvidia.com/gpu])"],
        ],
    }


if __name__ == "__main__" and "--update" in sys.argv:
    PINS.write_text(json.dumps(current(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS}")
