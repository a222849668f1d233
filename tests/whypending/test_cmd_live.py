"""``gpuguard why-pending`` against a live cluster: the real ``kubernetes`` client, in a child
process, lists the in-process fake API server over HTTP with a kubeconfig, read-only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster_objects import core_event
from tests.support.fake_apiserver import (
    ALL_RESOURCES,
    DRA_RESOURCES,
    KUEUE_RESOURCES,
    FakeApiServer,
    nodepool,
    serving,
)
from tests.support.paths import ROOT
from tests.support.proc import Run, gpuguard
from tests.support.prometheus import free_port
from tests.whypending.support import cluster, objects, pod_keys, write_dump

pytestmark = pytest.mark.integration

RESOURCE_OF = {"Node": "nodes", "Pod": "pods", "Event": "events", "PriorityClass": "priorityclasses",
               "RuntimeClass": "runtimeclasses", "NodePool": "nodepools"}
GROUP_OF = {"nodes": "", "pods": "", "events": "", "priorityclasses": "scheduling.k8s.io",
            "runtimeclasses": "node.k8s.io", "nodepools": "karpenter.sh",
            **dict.fromkeys(DRA_RESOURCES, "resource.k8s.io"), "resourcequotas": "", "jobs": "batch",
            **dict.fromkeys(KUEUE_RESOURCES, "kueue.x-k8s.io")}


def api_view(parts: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The objects as the API serves them: core/v1 shows events.k8s.io events as core Events."""
    out = dict(parts)
    pods = {p["metadata"]["name"]: p for p in parts["pods"]}
    out["events"] = [core_event(pods[e["regarding"]["name"]], e["note"], count=e["deprecatedCount"],
                                last="2026-11-30T11:50:00Z") if e["apiVersion"] == "events.k8s.io/v1" else e
                     for e in parts["events"]]
    return out


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer((*ALL_RESOURCES, *DRA_RESOURCES))  # DRA served (with no objects)
    for obj in objects(api_view(cluster())):
        state.put(RESOURCE_OF[obj["kind"]], obj)
    with serving(state):
        yield state


def kubeconfig(path: Path, port: int, namespace: str | None = None) -> Path:
    context: dict[str, Any] = {"cluster": "fake", "user": "sre"}
    if namespace:
        context["namespace"] = namespace
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "sre", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "fake", "context": context}],
        "current-context": "fake",
    }))
    return path


def why_pending(*args: str) -> Run:
    return gpuguard("why-pending", *args, timeout=120)


def test_live_cluster_reads_like_its_dump(api: FakeApiServer, tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", api.port)
    live = why_pending("--kubeconfig", str(config), "-A", "--format", "json")
    assert live.code == 0, live.stderr
    dump = write_dump(objects(api_view(cluster())), tmp_path / "cluster.json", "json")
    offline = why_pending("--dump", str(dump), "-A", "--format", "json")
    assert json.loads(live.stdout) == json.loads(offline.stdout)
    assert pod_keys(json.loads(live.stdout))[:2] == ["ml/big-train", "ml/fits-now"]
    # read-only: list requests only, the informer's filters applied by the server
    selectors = {(r, q.get("fieldSelector", [""])[0]) for r, _, q in api.list_queries}
    assert ("pods", "status.phase!=Succeeded,status.phase!=Failed") in selectors
    assert ("events", "reason=FailedScheduling") in selectors
    assert sum(api.watch_calls.values()) == 0


def test_the_contexts_namespace_is_the_default(api: FakeApiServer, tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", api.port, namespace="research")
    done = why_pending("--kubeconfig", str(config))
    assert done.code == 0, done.stderr
    assert done.stdout.startswith("gpuguard why-pending: 1 pending GPU pod in namespace research")
    assert "research/urgent: 4 nvidia.com/gpu, priority 2000, nominated to h100-c" in done.stdout
    # events are listed in that namespace only; pods everywhere (every namespace's pods hold GPUs)
    listed = {(r, ns) for r, ns, q in api.list_queries if "continue" not in q}
    assert ("events", "research") in listed and ("pods", None) in listed


def test_pods_readable_in_one_namespace_only(api: FakeApiServer, tmp_path: Path) -> None:
    api.forbidden.add("pods")
    config = kubeconfig(tmp_path / "kubeconfig", api.port)
    done = why_pending("--kubeconfig", str(config), "-n", "ml", "big-train")
    assert done.code == 0, done.stderr
    assert "pods could only be listed in namespace ml" in " ".join(done.stdout.split())
    everywhere = why_pending("--kubeconfig", str(config), "-A")
    assert everywhere.code == 2 and everywhere.stdout == ""
    assert "cannot list pods" in everywhere.stderr and "grant `list` on pods (all namespaces)" in everywhere.stderr


def test_karpenter_nodepools_are_listed_when_installed(api: FakeApiServer, tmp_path: Path) -> None:
    api.absent.discard("nodepools")
    api.put("nodepools", nodepool("gpu", ["g5"]))
    config = kubeconfig(tmp_path / "kubeconfig", api.port)
    done = why_pending("--kubeconfig", str(config), "-A", "--format", "json")
    assert done.code == 0, done.stderr
    assert "note: 1 Karpenter NodePool can add nodes" in done.stderr


def test_the_optional_rbac_grants_exactly_what_is_listed(api: FakeApiServer, tmp_path: Path) -> None:
    api.absent.discard("nodepools")
    api.absent.difference_update(KUEUE_RESOURCES)
    config = kubeconfig(tmp_path / "kubeconfig", api.port)
    assert why_pending("--kubeconfig", str(config), "-A").code == 0
    requested = {(GROUP_OF[r], r, "list") for r, _, _ in api.list_queries}
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "why-pending" / "rbac.yaml").read_text()))
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == requested


def test_unreachable_or_unconfigured_clusters_are_errors(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", free_port())
    done = why_pending("--kubeconfig", str(config), "-A")
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.startswith("gpuguard why-pending: http://127.0.0.1:") and "cannot list nodes" in done.stderr
    missing = why_pending("--kubeconfig", str(tmp_path / "nope"))
    assert missing.code == 2 and "cannot load the kubeconfig" in missing.stderr
    assert "Traceback" not in done.stderr + missing.stderr
