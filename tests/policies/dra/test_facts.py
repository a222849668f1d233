"""DRA facts: what a snapshot says about DRA, how a pod's claims resolve (input first, then the cluster),
and DRA-served extended resources as node capacity (KEP-5004).

Clusters: tests/fixtures/dra/nvidia-mixed-cluster.yaml (device plugin and DRA side by side) and
nvidia-cluster.yaml (DRA only); see their headers for sources.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest

from policies import Config, evaluate
from policies.dra.capacity import served_classes, with_dra_capacity
from policies.dra.facts import DraInputs, DraView, dra_facts_from_objects, input_layer
from policies.effective_facts import effective_facts
from policies.facts_build import facts_from_objects
from tests.support.paths import FIXTURES, load_yaml_docs

MIXED = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"
DRA_ONLY = FIXTURES / "dra" / "nvidia-cluster.yaml"


def items(path: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for doc in load_yaml_docs(path):
        out.extend(doc.get("items") or [doc])
    return out


def kinds(path: Any, *wanted: str) -> list[dict[str, Any]]:
    return [o for o in items(path) if o["kind"] in wanted]


def template(namespace: str, name: str, request: str, cls: str = "gpu.nvidia.com") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": meta,
            "spec": {"spec": {"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": cls}}]}}}}


def test_a_snapshot_without_dra_objects_has_no_dra_facts() -> None:
    assert facts_from_objects(kinds(MIXED, "Node")).dra is None
    only_templates = dra_facts_from_objects(kinds(MIXED, "ResourceClaimTemplate"))
    assert only_templates is not None and not only_templates.classes_known  # no class is known to be missing
    full = facts_from_objects(items(MIXED)).dra
    assert full is not None and full.classes_known and full.has_devices


def test_claims_resolve_nearest_first_then_in_the_cluster() -> None:
    cluster = dra_facts_from_objects(items(MIXED))
    own = input_layer([template("gpu-test1", "single-gpu", "mine")])
    run = input_layer([template("gpu-test1", "single-gpu", "theirs"), template("", "loose", "any")])
    view = DraView(cluster, DraInputs((own, run)))
    found = view.template("gpu-test1", "single-gpu")
    assert found is not None and found.origin == "input" and found.spec_owner.spec.requests[0].name == "mine"
    assert DraView(cluster, DraInputs((run,))).template("gpu-test1", "single-gpu").spec_owner.spec.requests[0].name == (  # type: ignore[union-attr]
        "theirs"
    )
    in_cluster = DraView(cluster).template("gpu-test1", "single-gpu")
    assert in_cluster is not None and in_cluster.origin == "cluster"
    # an input object without a namespace is applied to the pod's; the cluster's must match exactly
    assert view.template("anywhere", "loose") is not None
    assert DraView(cluster).template("elsewhere", "single-gpu") is None
    # a pod checked without a namespace finds a cluster template whose name is unique...
    assert DraView(cluster).template("", "mig-devices") is not None
    # ...but not one two namespaces hold (gpu-test1/single-gpu and gpu-test-vfio/single-gpu)
    assert DraView(cluster).template("", "single-gpu") is None


def test_input_slices_are_not_facts_and_classes_from_the_input_exist() -> None:
    slices = kinds(MIXED, "ResourceSlice")
    layer = input_layer([*slices, *kinds(MIXED, "DeviceClass")])
    assert layer.objects.slices == () and len(layer.objects.classes) == 2
    view = DraView(None, DraInputs((layer,)))
    assert view.device_class("mig.nvidia.com") is not None
    assert not view.classes_known  # no cluster: a class absent here may exist there
    assert view.inventory is None


def test_selector_answers_are_kept_only_while_devices_and_classes_stay_the_same() -> None:
    objects = items(MIXED)
    first = dra_facts_from_objects(objects)
    assert first is not None
    first.match_cache[(("x",), None)] = True  # type: ignore[index]
    same = copy.copy(first)  # a new snapshot over the very same parsed devices and classes
    same.__dict__.pop("match_cache", None)
    same.reuse_matches(first)
    assert same.match_cache is first.match_cache
    changed = dra_facts_from_objects(objects)  # parsed again: new device objects
    assert changed is not None
    changed.reuse_matches(first)
    assert changed.match_cache is not first.match_cache


def test_dra_served_extended_resources_are_capacity_where_no_device_plugin_serves_them() -> None:
    facts = effective_facts(facts_from_objects(items(MIXED)), Config())
    nodes = {n.name: n for n in facts.nodes}
    # device plugin only: untouched
    assert nodes["dp-a100-0"].allocatable["nvidia.com/gpu"] == Fraction(8) and nodes["dp-a100-0"].dra_served == ()
    # DRA only: the class's four GPUs (allocated or tainted ones included, as allocatable counts all)
    assert nodes["dra-h100-0"].allocatable["nvidia.com/gpu"] == Fraction(4)
    assert ("nvidia.com/gpu", "gpu.nvidia.com") in nodes["dra-h100-0"].dra_served
    # every class serves its implicit name (deviceclass.resource.kubernetes.io/<class>)
    assert nodes["dra-mig-0"].allocatable["deviceclass.resource.kubernetes.io/mig.nvidia.com"] == Fraction(4)
    assert "nvidia.com/gpu" not in nodes["dra-mig-0"].allocatable
    # both: the device plugin serves it (KEP-5004 Filter), and the node is recorded as a conflict
    assert nodes["mixed-l4-0"].allocatable["nvidia.com/gpu"] == Fraction(1)
    assert nodes["mixed-l4-0"].dra_conflicts == (("nvidia.com/gpu", "DeviceClass gpu.nvidia.com (extendedResourceName)"),)
    # applied once: effective facts of effective facts add nothing more
    again = effective_facts(facts, Config())
    assert {n.name: n.allocatable for n in again.nodes} == {n.name: n.allocatable for n in facts.nodes}
    assert with_dra_capacity(facts) is facts


def test_without_extended_resource_name_the_driver_still_conflicts_with_the_device_plugin() -> None:
    objects = items(MIXED)
    for obj in objects:
        if obj["kind"] == "DeviceClass":
            obj["spec"].pop("extendedResourceName", None)
    facts = effective_facts(facts_from_objects(objects), Config())
    nodes = {n.name: n for n in facts.nodes}
    assert "nvidia.com/gpu" not in nodes["dra-h100-0"].allocatable
    # NVIDIA's chart: its GPU kubelet plugin "cannot be deployed alongside the standard GPU device plugin"
    assert nodes["mixed-l4-0"].dra_conflicts == (("nvidia.com/gpu", "DRA driver gpu.nvidia.com"),)


def test_the_newest_class_serves_a_shared_extended_resource_name() -> None:
    objects = items(DRA_ONLY)
    newer = copy.deepcopy(next(o for o in objects if o["kind"] == "DeviceClass" and o["metadata"]["name"] == "mig.nvidia.com"))
    newer["metadata"] = {"name": "all-mig.nvidia.com", "creationTimestamp": "2026-02-01T00:00:00Z"}
    newer["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    dra = facts_from_objects([*objects, newer]).dra
    assert dra is not None
    assert served_classes(dra.inventory)["nvidia.com/gpu"].name == "all-mig.nvidia.com"


@pytest.mark.parametrize("with_class", [True, False])
def test_a_plain_gpu_limit_in_a_dra_only_cluster(with_class: bool) -> None:
    """NVIDIA demo/specs/extended-resources/gpu-full.yaml on nvidia-cluster.yaml, which has no device
    plugin: served by DRA, nvidia.com/gpu is known; without extendedResourceName it is not."""
    objects = items(DRA_ONLY)
    if not with_class:
        for obj in objects:
            if obj["kind"] == "DeviceClass":
                obj["spec"].pop("extendedResourceName", None)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-full-pod"}, "spec": {"containers": [
        {"name": "cuda-container", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
         "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "1Gi"}}}]}}
    rules = {f.rule for f in evaluate(pod, Config(), facts_from_objects(objects)).findings}
    assert ("gpu-resource-unknown" in rules) is (not with_class)
