"""why-pending for whole jobs: the ``gang`` reason of a pending pod (a deadlock named as such), and the
top-level ``workloads`` of jobs without pods, with their ``queue`` and ``quota`` reasons, in text, JSON
(against the shipped schema) and HTML (drawn in headless Chromium); from examples/pending-gangs-dump.yaml
(and the README's command for it) and from a live cluster, which lists the same objects.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.gpuguard.test_schemas import validator
from tests.support.browser import dom, measure, screenshot
from tests.support.fake_apiserver import ALL_RESOURCES, KUEUE_RESOURCES, FakeApiServer, serving
from tests.support.inprocess import gpuguard_here
from tests.support.paths import ROOT
from tests.support.proc import Run
from tests.whypending.test_cmd_live import kubeconfig

EXAMPLE = ROOT / "examples" / "pending-gangs-dump.yaml"
RESOURCE_OF = {"Node": "nodes", "Pod": "pods", "Event": "events", "ResourceQuota": "resourcequotas", "Job": "jobs",
               "Workload": "workloads", "LocalQueue": "localqueues", "ClusterQueue": "clusterqueues",
               "ResourceFlavor": "resourceflavors"}


def readme_command() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    (line,) = [line for line in readme.splitlines()
               if line.startswith("gpuguard why-pending") and "examples/pending-gangs-dump.yaml" in line]
    argv = shlex.split(line.split("#", 1)[0])
    assert argv[0] == "gpuguard"
    return argv[1:]


def run(*argv: str) -> Run:
    done = gpuguard_here(*argv)
    assert done.code == 0, done.stderr
    return done


def as_json(*argv: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(run(*argv, "--format", "json").stdout)
    assert not list(validator("why-pending-report").iter_errors(doc))
    return doc


def reasons_of(doc: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    out = {f"{p['namespace']}/{p['name']}": {r["kind"]: r for r in p["reasons"]} for p in doc["pods"]}
    out.update({f"{w['namespace']}/{w['kind']}/{w['name']}": {r["kind"]: r for r in w["reasons"]}
                for w in doc["workloads"]})
    return out


def test_the_readme_command_names_the_deadlock_the_queue_and_the_quota() -> None:
    text = " ".join(run(*readme_command()).stdout.split())
    assert text.startswith("gpuguard why-pending: 5 pending GPU pods in all namespaces; 2 workloads held by Kueue, "
                           "1 workload whose pods a quota refuses")
    assert ("gang deadlock: gang PyTorchJob alpha (training.kubeflow.org/job-name=alpha): 2 of 4 pods run, holding "
            "16 nvidia.com/gpu on 2 nodes (h100-0, h100-1)") in text
    assert "gang JobSet beta (jobset.sigs.k8s.io/jobset-name=beta) is partially placed too (2 of 4 run)" in text
    assert ("gang LeaderWorkerSet vllm group 0 (leaderworkerset.sigs.k8s.io/name=vllm,"
            "leaderworkerset.sigs.k8s.io/group-index=0): 1 of 2 pods runs, holding 4 nvidia.com/gpu on 1 node "
            "(l4-0)") in text
    assert "ml/Job/train-queued: no pods yet queue waits in Kueue: LocalQueue ml/team-a → ClusterQueue team-a" in text
    assert ("- cohort ml-cohort has 16 nvidia.com/gpu idle in flavor default-flavor but only 0 of it is borrowable by "
            "ClusterQueue team-a (team-b (lendingLimit 0)): idle quota it cannot use") in text
    assert ("- Workload job-train-queued-5d2f1: QuotaReserved=False (WaitingForQuota): couldn't assign flavors to pod "
            "set main: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 16 more needed") in text
    assert "ml/Job/smoke-test: no pods yet queue waits in Kueue: LocalQueue ml/team-x does not exist" in text
    assert ("eval/Job/eval-sweep: no pods yet quota the Job controller cannot create its pods: ResourceQuota "
            "eval/gpus refuses them") in text


def test_json_has_the_workloads_and_the_gang_reasons() -> None:
    doc = as_json(*readme_command())
    found = reasons_of(doc)
    assert [f"{w['namespace']}/{w['kind']}/{w['name']}" for w in doc["workloads"]] == [
        "eval/Job/eval-sweep", "ml/Job/smoke-test", "ml/Job/train-queued"]
    deadlock = found["ml/alpha-worker-2"]["gang"]
    assert deadlock["message"].startswith("deadlock: ")
    assert deadlock["pods"] == ["research/beta-workers-0-0-x7k20", "research/beta-workers-1-0-x7k21"]
    assert deadlock["nodes"][:2] == ["h100-2", "h100-3"]
    assert not found["ml/vllm-0-1"]["gang"]["message"].startswith("deadlock")
    assert set(found["eval/Job/eval-sweep"]) == {"quota"} and set(found["ml/Job/train-queued"]) == {"queue"}


def test_named_pods_leave_the_workloads_out_and_a_namespace_keeps_its_own() -> None:
    assert as_json("why-pending", "ml/alpha-worker-2", "--dump", str(EXAMPLE))["workloads"] == []
    doc = as_json("why-pending", "-n", "eval", "--dump", str(EXAMPLE))
    assert [w["name"] for w in doc["workloads"]] == ["eval-sweep"] and doc["pods"] == []
    text = " ".join(run("why-pending", "-n", "eval", "--dump", str(EXAMPLE)).stdout.split())
    assert text.startswith("gpuguard why-pending: no pending GPU pods in namespace eval (-A for all namespaces); "
                           "1 workload whose pods a quota refuses")


def test_quiet_prints_the_workloads_too() -> None:
    out = run("why-pending", "-n", "eval", "--dump", str(EXAMPLE), "--quiet").stdout
    assert out.startswith("eval/Job/eval-sweep: no pods yet\n  quota ")


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whole-jobs") / "why-pending.html"
    run(*readme_command(), "--format", "html", "--output", str(out))
    return out


def test_html_has_a_section_per_workload_and_the_gang_badges(html: Path) -> None:
    text = html.read_text()
    for key in ("eval/Job/eval-sweep", "ml/Job/smoke-test", "ml/Job/train-queued"):
        assert f"<h2>{key}</h2>" in text
        assert f'href="#workload-{key.replace("/", "-")}"' in text
    assert '<span class="badge error">gang</span>' in text  # a deadlock
    assert '<span class="badge warning">gang</span>' in text  # a gang that waits
    assert '<span class="badge warning">queue</span>' in text and '<span class="badge error">quota</span>' in text
    assert "workloads without pods (queued, over quota)" in text


@pytest.mark.integration
def test_chromium_draws_the_workloads(html: Path, tmp_path: Path) -> None:
    parsed = dom(html, tmp_path / "dom-profile")
    assert "idle quota it cannot use" in parsed and "exceeded quota" not in parsed  # said in gpuguard's words
    assert parsed.count('class="badge error">gang<') == 4  # the four pods of the two deadlocked gangs
    png = screenshot(html, tmp_path / "report.png", tmp_path / "profile")
    drawn = measure(png, {"header": (0x1D, 0x23, 0x30), "error": (0xB4, 0x23, 0x18), "warning": (0x9A, 0x5B, 0x00)})
    assert drawn.ink > 0.05 and drawn.has == {"header": True, "error": True, "warning": True}, drawn


# --- live ------------------------------------------------------------------------------------------
@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer(ALL_RESOURCES)
    state.absent.difference_update(KUEUE_RESOURCES)
    for item in yaml.safe_load(EXAMPLE.read_text())["items"]:
        state.put(RESOURCE_OF[item["kind"]], item)
    with serving(state):
        yield state


@pytest.mark.integration
def test_a_live_cluster_gives_what_its_dump_gives(api: FakeApiServer, tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", api.port)
    live = as_json("why-pending", "--kubeconfig", str(config), "-A")
    dumped = as_json("why-pending", "--dump", str(EXAMPLE), "-A")
    assert live == dumped
    queries = {(r, q.get("fieldSelector", [""])[0], q.get("labelSelector", [""])[0]) for r, _, q in api.list_queries}
    assert {("events", "reason=FailedCreate", ""), ("events", "reason=FailedCreatePod", ""),
            ("jobs", "", "kueue.x-k8s.io/queue-name"), ("resourcequotas", "", ""), ("workloads", "", "")} <= queries


@pytest.mark.integration
def test_without_kueue_the_suspended_job_says_its_queue_cannot_be_followed(api: FakeApiServer,
                                                                           tmp_path: Path) -> None:
    api.absent.update(KUEUE_RESOURCES)
    config = kubeconfig(tmp_path / "kubeconfig", api.port)
    found = reasons_of(as_json("why-pending", "--kubeconfig", str(config), "-n", "ml"))
    assert "the input holds no Kueue objects" in found["ml/Job/train-queued"]["queue"]["message"]
