"""The live audit with the real ``kubernetes`` client against the in-process API server: discovery,
paginated lists of every workload kind and a CRD kind, read-only, and the same verdicts as the dump."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpuguard.audit.auditor import Auditor
from gpuguard.audit.dumps import DumpReader
from gpuguard.audit.live import audit_cluster, audit_workloads, list_facts, workload_resources
from gpuguard.audit.model import AuditResult
from gpuguard.kube.discovery import Discovery, RestClient
from gpuguard.sources.configmodel import load_config
from gpuguard.sources.snapshot import load_cluster_facts
from tests.support.fake_apiserver import ALL_RESOURCES, FakeApiServer, api_client, serving
from tests.support.paths import FIXTURES

pytestmark = pytest.mark.integration

AUDIT = FIXTURES / "audit"
BEFORE = load_cluster_facts(str(AUDIT / "cluster-before.yaml"))
RESOURCE_OF = {"Deployment": "deployments", "ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
               "DaemonSet": "daemonsets", "Job": "jobs", "CronJob": "cronjobs", "PyTorchJob": "pytorchjobs",
               "Pod": "pods", "Node": "nodes", "RuntimeClass": "runtimeclasses"}


def objects(name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load((AUDIT / name).read_text())["items"]
    return items


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer(ALL_RESOURCES)
    state.absent.discard("pytorchjobs")  # the Kubeflow training operator's CRD is installed
    for obj in objects("workloads.yaml") + objects("cluster-before.yaml"):
        state.put(RESOURCE_OF[obj["kind"]], obj)
    with serving(state):
        yield state


def live_audit(api: FakeApiServer, page_size: int = 2) -> AuditResult:
    with api_client(api) as c:
        rest = RestClient(c)
        auditor = Auditor(load_config(None), BEFORE)
        audit_workloads(rest, Discovery(rest), auditor, page_size=page_size)
    return auditor.finish()


def dump_audit() -> AuditResult:
    auditor = Auditor(load_config(None), BEFORE)
    DumpReader(auditor).read([str(AUDIT / "workloads.yaml")])
    return auditor.finish()


def verdicts(result: AuditResult) -> list[tuple[str, str, str, str]]:
    return sorted((f.finding.rule, str(f.severity), f.ref.qualified(), f.finding.path) for f in result.findings)


def test_a_live_cluster_gets_the_verdicts_of_its_dump(api: FakeApiServer) -> None:
    live, dumped = live_audit(api), dump_audit()
    assert live.errors == [] and live.notes == []
    assert verdicts(live) == verdicts(dumped)
    assert {(f.ref.uid, f.origin.file) for f in live.findings} == {(f.ref.uid, None) for f in dumped.findings}
    assert (live.counts.objects, live.counts.gpu_workloads, live.counts.exempt) == (8, 7, 1)
    # the terminal pod never leaves the server (field selector); the rest are reported through owners
    assert live.counts.terminal_pods == 0 and live.counts.through_owners == 11
    selectors = {(r, q.get("fieldSelector", [""])[0]) for r, _, q in api.list_queries if "continue" not in q}
    assert ("pods", "status.phase!=Succeeded,status.phase!=Failed") in selectors
    # every kind paginated: 10 non-terminal pods and 3 Deployments in pages of 2
    assert api.page_calls["pods"] == 5 and api.page_calls["deployments"] == 2
    assert all(not r.startswith(("POST", "PUT")) for r, _, _ in api.writes)  # read-only


def test_only_installed_kinds_are_listed(api: FakeApiServer) -> None:
    with api_client(api) as c:
        found = {(r.group, r.resource) for _, r in workload_resources(Discovery(RestClient(c)), load_config(None))}
    assert ("kubeflow.org", "pytorchjobs") in found and ("apps", "deployments") in found
    assert ("ray.io", "rayclusters") not in found and ("karpenter.sh", "nodepools") not in found
    assert found == {("", "pods"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"),
                     ("apps", "daemonsets"), ("batch", "jobs"), ("batch", "cronjobs"), ("kubeflow.org", "pytorchjobs")}
    assert sum(api.list_calls.values()) == 0  # discovery only: nothing listed yet


def test_without_the_crd_its_pods_are_judged_themselves(api: FakeApiServer) -> None:
    api.absent.add("pytorchjobs")
    result = live_audit(api)
    assert api.list_calls["pytorchjobs"] == 0  # discovery said it is not served: never listed
    assert all(f.ref.kind != "PyTorchJob" for f in result.findings)
    pods = {r.name for r in result.gpu_objects if r.kind == "Pod"}
    assert pods == {"scratch", "llama-ft-master-0", "llama-ft-worker-0"}


def test_a_kind_the_identity_may_not_list_is_an_input_error(api: FakeApiServer) -> None:
    api.forbidden.add("statefulsets")
    result = live_audit(api)
    (error,) = result.errors
    assert error.file == "/apis/apps/v1/statefulsets"
    assert "forbidden" in error.message and "grant `list` on statefulsets in API group 'apps'" in error.message
    assert result.exit_code() == 2
    assert "jupyter-0" in {r.name for r in result.gpu_objects}  # its owner unread, the pod is judged itself


def test_an_expired_continue_token_restarts_the_list_and_nothing_counts_twice(api: FakeApiServer) -> None:
    api.expire_continue["pods"] = 1
    result = live_audit(api, page_size=3)
    assert result.errors == [] and verdicts(result) == verdicts(dump_audit())
    assert result.counts.duplicates == 3  # the first page came twice


def test_facts_come_from_the_same_cluster(api: FakeApiServer) -> None:
    with api_client(api) as c:
        rest = RestClient(c)
        listed = list_facts(rest, Discovery(rest), page_size=3)
    assert listed.notes == []
    assert sorted(n.name for n in listed.facts.nodes) == sorted(n.name for n in BEFORE.nodes)
    assert len(listed.facts.groups) == len(BEFORE.groups) and set(listed.facts.runtime_classes) == {"nvidia"}
    assert len(listed.nodes) == 8 and "images" not in listed.nodes[0].get("status", {})  # pruned


def test_the_webhooks_audit_bounds_findings_per_namespace(api: FakeApiServer) -> None:
    with api_client(api) as c:
        result = audit_cluster(c, load_config(None), BEFORE, limit_per_namespace=1)
    assert result.truncated == {"research": 2}
    assert [str(f.severity) for f in result.findings if f.ref.namespace == "research"] == ["error"]
