"""Objects are reported through their topmost audited controller, and only through one gpuguard reads."""

from __future__ import annotations

from typing import Any

from gpuguard.audit.auditor import object_ref
from gpuguard.audit.ownership import Ownership, controller_link


def obj(api_version: str, kind: str, name: str, uid: str, owner: dict[str, Any] | None = None,
        controller: bool = True, labels: dict[str, str] | None = None, namespace: str = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": controller}]
    if labels:
        meta["labels"] = labels
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def add(graph: Ownership, o: dict[str, Any], readable: bool = True) -> str:
    ref = object_ref(o)
    graph.add(ref, controller_link(o, ref.namespace), readable)
    return ref.key


def test_pods_of_a_deployment_are_reported_through_the_deployment() -> None:
    graph = Ownership()
    deploy = obj("apps/v1", "Deployment", "web", "d1")
    rs = obj("apps/v1", "ReplicaSet", "web-7c9f", "r1", deploy)
    pod = obj("v1", "Pod", "web-7c9f-x", "p1", rs)
    for o in (deploy, rs, pod):
        add(graph, o)
    assert graph.owner("p1") == "d1" and graph.owner("r1") == "d1" and graph.owner("d1") is None


def test_an_owner_read_after_its_pods_still_groups_them() -> None:
    graph = Ownership()
    job = obj("kubeflow.org/v1", "PyTorchJob", "ft", "j1")
    pod = obj("v1", "Pod", "ft-master-0", "p1", job)
    add(graph, pod)
    assert graph.owner("p1") is None
    add(graph, job)
    assert graph.owner("p1") == "j1"


def test_owners_gpuguard_cannot_read_do_not_hide_their_pods() -> None:
    graph = Ownership()
    custom = obj("example.com/v1", "Trainer", "t", "c1")
    pod = obj("v1", "Pod", "t-0", "p1", custom)
    add(graph, custom, readable=False)
    add(graph, pod)
    assert graph.owner("p1") is None


def test_only_the_controller_reference_counts() -> None:
    graph = Ownership()
    deploy = obj("apps/v1", "Deployment", "web", "d1")
    pod = obj("v1", "Pod", "p", "p1", deploy, controller=False)
    add(graph, deploy)
    add(graph, pod)
    assert controller_link(pod, "ml") is None and graph.owner("p1") is None


def test_a_missing_replicaset_is_matched_by_the_deployment_naming_convention() -> None:
    graph = Ownership()
    deploy = obj("apps/v1", "Deployment", "web", "d1")
    rs = obj("apps/v1", "ReplicaSet", "web-5d8b7f9c4", "r-not-in-the-dump", deploy)
    pod = obj("v1", "Pod", "web-5d8b7f9c4-abcde", "p1", rs, labels={"pod-template-hash": "5d8b7f9c4"})
    other = obj("v1", "Pod", "x", "p2", obj("apps/v1", "ReplicaSet", "webapp-5d8b7f9c4", "r2", deploy),
                labels={"pod-template-hash": "5d8b7f9c4"})
    elsewhere = obj("v1", "Pod", "web-5d8b7f9c4-zz", "p3", rs, labels={"pod-template-hash": "5d8b7f9c4"},
                    namespace="other")
    add(graph, deploy)
    for pod_obj in (pod, other, elsewhere):
        add(graph, pod_obj)
    assert graph.owner("p1") == "d1"
    assert graph.owner("p2") is None  # webapp-… is not web's ReplicaSet
    assert graph.owner("p3") is None  # owners live in the pod's namespace


def test_objects_without_uids_are_matched_by_name_and_cycles_end() -> None:
    graph = Ownership()
    a = obj("apps/v1", "Deployment", "a", "")
    b = obj("apps/v1", "ReplicaSet", "b", "", a)
    b["metadata"]["ownerReferences"][0]["uid"] = ""
    add(graph, a)
    add(graph, b)
    assert graph.owner("apps/v1/ReplicaSet/ml/b") == "apps/v1/Deployment/ml/a"
    x = obj("apps/v1", "ReplicaSet", "x", "x1", {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                 "metadata": {"name": "y", "uid": "y1"}})
    y = obj("apps/v1", "ReplicaSet", "y", "y1", x)
    add(graph, x)
    add(graph, y)
    assert graph.owner("x1") == "y1" and graph.owner("y1") == "x1"  # a cycle ends instead of looping
