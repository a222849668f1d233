"""``gpuguard audit`` and ``--cluster-after`` judge whole jobs: gangs, namespace quotas and Kueue queues.

Dumps: the gang rule's fixture cluster (12 eight-GPU H100 nodes, tests/fixtures/rules/
gpu-gang-unschedulable/cluster.yaml) today, and a planned cluster with four of them drained.  A
PyTorchJob of 10 × 8 GPUs runs there today and cannot after: the change is introduced, and the notes
say the planned cluster cannot run it as a whole any more.  Live: the in-process API server serves
the same jobs, a ResourceQuota and Kueue's queues (Kueue's TAS example, tests/corpus/queues), which
the live audit lists for the whole-job rules.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.cli import main as gpuguard
from tests.gpuguard.test_schemas import validator
from tests.support.fake_apiserver import ALL_RESOURCES, KUEUE_RESOURCES, FakeApiServer, serving
from tests.support.kubeconfig import write_kubeconfig
from tests.support.paths import CORPUS, FIXTURES, load_yaml_docs

GANGS = FIXTURES / "rules" / "gpu-gang-unschedulable"
TAS = CORPUS / "queues" / "kubernetes-sigs__kueue__site__static__examples__tas__sample-gpu-queues.yaml"
DRAINED = ("h100-8", "h100-9", "h100-10", "h100-11")


def cluster_items() -> list[dict[str, Any]]:
    (doc,) = load_yaml_docs(GANGS / "cluster.yaml")
    items: list[dict[str, Any]] = doc["items"]
    return items


def pytorch_job(name: str, workers: int, namespace: str = "ml", queue: str | None = None) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                         "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if queue:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta,
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                             "Worker": {"replicas": workers - 1, "template": copy.deepcopy(template)}}}}


QUOTA: dict[str, Any] = {"apiVersion": "v1", "kind": "ResourceQuota",
                         "metadata": {"name": "gpus", "namespace": "team-q"},
                         "spec": {"hard": {"requests.nvidia.com/gpu": "16"}},
                         "status": {"hard": {"requests.nvidia.com/gpu": "16"}, "used": {"requests.nvidia.com/gpu": "8"}}}


def write_list(path: Path, items: list[dict[str, Any]]) -> str:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


@pytest.fixture
def change(tmp_path: Path) -> list[str]:
    jobs = write_list(tmp_path / "jobs.yaml", [pytorch_job("ten", 10), pytorch_job("four", 4),
                                              pytorch_job("quota", 3, namespace="team-q")])
    today = write_list(tmp_path / "today.yaml", [*cluster_items(), QUOTA])
    planned = write_list(tmp_path / "planned.yaml",
                         [o for o in cluster_items() if o["metadata"]["name"] not in DRAINED])
    return [jobs, "--cluster", today, "--cluster-after", planned]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = gpuguard(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_planned_cluster_that_cannot_run_a_job_as_a_whole_says_so(change: list[str],
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*change, "--format", "json"], capsys)
    assert code == 1, err  # an error introduced
    report = json.loads(out)
    assert not list(validator("audit-report").iter_errors(report))
    whole = {(f["name"], f["change"]) for f in report["findings"]
             if f["rule"] in ("gpu-gang-unschedulable", "gpu-quota-exceeded")}
    # 10 pods of 8 GPUs on 12 nodes today, 8 after; 4 pods fit both; the quota is not part of the plan
    assert whole == {("ten", "introduced"), ("quota", "unchanged")}
    notes = report["summary"]["notes"]
    assert notes[0].startswith("the planned cluster cannot run ml/PyTorchJob/ten as a whole any more "
                               "(gpu-gang-unschedulable: 10 pods × 8 nvidia.com/gpu must run together")
    assert not any("team-q/PyTorchJob/quota" in n or "ml/PyTorchJob/four" in n for n in notes)
    assert any(n.startswith("the planned cluster (") and "holds no ResourceQuotas: today's are judged with it" in n
               for n in notes)


def test_the_text_report_says_it_too(change: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(change, capsys)
    assert code == 1
    assert "note: the planned cluster cannot run ml/PyTorchJob/ten as a whole any more" in out
    introduced = out.split("INTRODUCED", 1)[1].split("RESOLVED", 1)[0]
    assert "error gpu-gang-unschedulable ml/PyTorchJob/ten" in introduced


def test_a_planned_quota_is_judged_as_planned(change: list[str], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    lowered = copy.deepcopy(QUOTA)
    lowered["spec"]["hard"]["requests.nvidia.com/gpu"] = "4"  # less than one pod's 8
    planned = write_list(tmp_path / "planned-quota.yaml", [*cluster_items(), lowered])
    code, out, _ = run([change[0], "--cluster", change[2], "--cluster-after", planned, "--format", "json"], capsys)
    assert code == 1
    report = json.loads(out)
    quota = [f for f in report["findings"] if f["rule"] == "gpu-quota-exceeded"]
    # today the gang's 24 GPUs pass 16; planned, no pod is created at all: another finding, introduced
    assert sorted((f["change"], f["severity"]) for f in quota) == [("introduced", "error"), ("introduced", "error"),
                                                                    ("resolved", "error")]
    assert any("team-q/PyTorchJob/quota as a whole any more (gpu-quota-exceeded" in n
               for n in report["summary"]["notes"])
    assert not any("holds no ResourceQuotas" in n for n in report["summary"]["notes"])


# --- live ------------------------------------------------------------------------------------------
RESOURCE_OF = {"Node": "nodes", "NodePool": "nodepools", "PyTorchJob": "pytorchjobs", "ResourceQuota": "resourcequotas",
               "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}


def live_state() -> FakeApiServer:
    state = FakeApiServer(ALL_RESOURCES)
    state.absent.difference_update({"pytorchjobs", "nodepools", *KUEUE_RESOURCES})
    kueue = [d for d in load_yaml_docs(TAS) if d["kind"] in RESOURCE_OF]
    for doc in kueue:
        if doc["kind"] == "ResourceFlavor":
            doc["spec"]["nodeLabels"] = {"pool": "h100"}  # the fixture cluster's H100 nodes
    jobs = [pytorch_job("quota", 3, namespace="team-q"), pytorch_job("queued", 3, namespace="default",
                                                                     queue="tas-user-queue")]
    for obj in [*cluster_items(), QUOTA, *kueue, *jobs]:
        state.put(RESOURCE_OF[obj["kind"]], obj)
    return state


def test_a_live_audit_lists_quotas_and_queues_for_the_whole_job_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = live_state()
    with serving(state):
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, f"http://127.0.0.1:{state.port}")
        code, out, err = run(["--kubeconfig", str(kubeconfig), "--format", "json"], capsys)
    assert code == 1, err
    report = json.loads(out)
    found = {(f["name"], f["rule"]) for f in report["findings"]
             if f["rule"] in ("gpu-quota-exceeded", "gpu-queue-unadmittable")}
    assert found == {("quota", "gpu-quota-exceeded"), ("queued", "gpu-queue-unadmittable")}
    quota = next(f for f in report["findings"] if f["rule"] == "gpu-quota-exceeded")
    assert "ResourceQuota team-q/gpus allows requests.nvidia.com/gpu: 16 in the namespace, 8 in use now" in (
        quota["message"])
    listed = {r for r, _, q in state.list_queries if "continue" not in q}
    assert {"resourcequotas", "localqueues", "clusterqueues", "resourceflavors", "cohorts"} <= listed


def test_a_kueue_list_refused_drops_the_queues_with_a_note(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    state = live_state()
    state.forbidden.add("localqueues")
    with serving(state):
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, f"http://127.0.0.1:{state.port}")
        code, out, err = run(["--kubeconfig", str(kubeconfig), "--format", "json"], capsys)
    assert code == 1, err  # the quota's finding is an error; a list refused is a note, not an input error
    report = json.loads(out)
    assert not any(f["rule"] == "gpu-queue-unadmittable" for f in report["findings"])  # not misjudged
    assert any(f["rule"] == "gpu-quota-exceeded" for f in report["findings"])
    assert "the kueue.x-k8s.io queues are judged without any of them (one list failed)" in report["summary"]["notes"]
    assert any(n.startswith("localqueues.kueue.x-k8s.io not listed") for n in report["summary"]["notes"])
