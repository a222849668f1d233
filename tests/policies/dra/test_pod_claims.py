"""The DRA rules on pods against tests/fixtures/dra/nvidia-mixed-cluster.yaml: what a pod adds to its
claims (placement, allocated shared claims, DRA-served extended resources), "possibly" where capacity
can appear, and attribute checks from NVIDIA's published attributes when the cluster has no slices.

Pods are NVIDIA's quickstart demos (NVIDIA/k8s-dra-driver-gpu@22407113 demo/specs/quickstart/v1), whose
templates the cluster fixture holds.
"""

from __future__ import annotations

from typing import Any

from gpuguard.sources.configmodel import load_config
from policies import Config, evaluate
from policies.dra.facts import DraInputs, input_layer
from policies.facts import ClusterFacts
from policies.facts_build import facts_from_objects
from policies.types import Finding, Severity
from tests.support.paths import FIXTURES, load_yaml_docs

MIXED = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"
FACTS = facts_from_objects(load_yaml_docs(MIXED))


def pod(*, claims: list[dict[str, Any]], limits: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"claims": [{"name": c["name"]} for c in claims]}
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "gpu-test1", "name": "pod1"},
        "spec": {"containers": [{"name": "ctr", "image": "ubuntu:22.04", "resources": resources}],
                 "resourceClaims": claims, **spec},
    }


SINGLE_GPU = {"name": "gpu", "resourceClaimTemplateName": "single-gpu"}


def found(obj: dict[str, Any], rule: str, facts: ClusterFacts = FACTS, config: Config | None = None,
          inputs: DraInputs | None = None) -> list[Finding]:
    return [f for f in evaluate(obj, config or Config(), facts, dra_inputs=inputs).findings if f.rule == rule]


def test_extended_resources_take_dra_devices_too() -> None:
    """On the H100 node nvidia.com/gpu is served by DRA: two such GPUs plus a claim for one more need
    three free, untainted H100s; the node has two (gpu-0 is allocated, gpu-3 tainted)."""
    fits = pod(claims=[SINGLE_GPU], limits={"nvidia.com/gpu": 1}, nodeSelector={"pool": "h100"})
    assert found(fits, "gpu-dra-unsatisfiable") == []
    too_many = pod(claims=[SINGLE_GPU], limits={"nvidia.com/gpu": 2}, nodeSelector={"pool": "h100"})
    (finding,) = found(too_many, "gpu-dra-unsatisfiable")
    assert finding.severity is Severity.ERROR
    assert "with the nvidia.com/gpu that DRA serves there" in finding.message
    assert "compete for the same devices" in finding.message


def test_an_allocated_shared_claim_pins_the_pod_to_its_devices() -> None:
    """team-a/trainer-gpu holds dra-h100-0's gpu-0: a pod sharing it must run there."""
    shared = {"name": "gpu", "resourceClaimName": "trainer-gpu"}
    obj = pod(claims=[shared])
    obj["metadata"]["namespace"] = "team-a"
    assert found(obj, "gpu-dra-unsatisfiable") == []
    obj["spec"]["nodeSelector"] = {"pool": "mig"}
    (finding,) = found(obj, "gpu-dra-unsatisfiable")
    assert "already allocated on node dra-h100-0" in finding.message
    assert finding.path == "/spec/resourceClaims/0/resourceClaimName"


def test_capacity_that_can_appear_makes_it_possibly() -> None:
    """A declared node pool (config nodePools) may bring DRA devices nobody knows in advance."""
    config = load_config({"nodePools": [{"name": "h100-spot", "labels": {"pool": "a100"},
                                         "resources": {"nvidia.com/gpu": 8}}]})
    obj = pod(claims=[SINGLE_GPU], nodeSelector={"pool": "a100"})
    (finding,) = found(obj, "gpu-dra-unsatisfiable", config=config)
    assert finding.severity is Severity.WARNING and "possibly" in finding.message


def test_a_claim_from_the_input_that_fits_nowhere_is_reported_once() -> None:
    """gpu-cel-nomatch (NVIDIA tests/bats/specs) in the same input: the template gets the finding, not the pod."""
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"namespace": "gpu-test1", "name": "rct-cel-nomatch"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "NONEXISTENT-GPU-XYZ"'}}],
        }}]}}},
    }
    inputs = DraInputs((input_layer([template]),))
    obj = pod(claims=[{"name": "gpu", "resourceClaimTemplateName": "rct-cel-nomatch"}])
    assert found(obj, "gpu-dra-unsatisfiable", inputs=inputs) == []
    (on_template,) = found(template, "gpu-dra-unsatisfiable", inputs=inputs)
    assert on_template.path == "/spec/spec/devices/requests/0/exactly/selectors/0/cel/expression"


def test_without_slices_attributes_are_judged_by_the_drivers_list_as_warnings() -> None:
    """gpu-test6's `index` (NVIDIA demo/specs/quickstart/v1/gpu-test6.yaml) with no cluster facts at all."""
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"namespace": "gpu-test6", "name": "a100"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].index == 0 && "
                                                 "device.attributes['example.com'].anything == 1"}}],
        }}]}}},
    }
    (finding,) = found(template, "gpu-dra-selector", facts=ClusterFacts.empty())
    assert finding.severity is Severity.WARNING
    assert "gpu.nvidia.com/index" in finding.message and "v25.8.0" in finding.message
    # another domain is not NVIDIA's to judge: example.com/anything is not reported
    assert "example.com" not in finding.message


def test_mixed_nodes_are_reported_only_where_the_claims_can_land() -> None:
    """gpu-test4's MIG claim can only be allocated on the DRA-only MIG node: no mixed-allocation warning."""
    mig = pod(claims=[{"name": "mig-devices", "resourceClaimTemplateName": "mig-devices"}])
    mig["metadata"]["namespace"] = "gpu-test4"
    assert found(mig, "gpu-dra-mixed-allocation") == []
    (finding,) = found(pod(claims=[SINGLE_GPU]), "gpu-dra-mixed-allocation")
    # the node's problem is said once for the cluster; the pod hears what it means for it, as an info
    assert "mixed-l4-0" in finding.message and finding.severity is Severity.INFO
    assert "every node it may land on" not in finding.message


def test_an_input_class_redefining_the_serving_class_is_part_of_the_memo_key() -> None:
    """The CUDA rule reads a DRA-served node's driver off the devices of the class that serves
    nvidia.com/gpu, and an input's DeviceClass of that name replaces the cluster's.  A pod without
    claims judged first without the input's classes, then with them (one config, one snapshot),
    must get each answer afresh: the memo once kept the first."""
    def cuda_pod() -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml", "name": "p"},
                "spec": {"nodeSelector": {"pool": "h100"}, "containers": [{
                    "name": "ctr", "image": "nvidia/cuda:13.0.2-runtime-ubuntu22.04",
                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}

    selects_nothing = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
                       "spec": {"selectors": [{"cel": {"expression": "device.driver == 'none.example.com'"}}],
                                "extendedResourceName": "nvidia.com/gpu"}}
    inputs = DraInputs((input_layer([selects_nothing]),))
    config = Config()
    facts = facts_from_objects(load_yaml_docs(MIXED))
    (finding,) = found(cuda_pod(), "gpu-cuda-driver-mismatch", facts, config)  # driver 570 on the H100s
    assert "needs CUDA 13.0.2" in finding.message
    # the input's class selects no device: the H100s' driver is unknown, so nothing is held against the pod
    assert found(cuda_pod(), "gpu-cuda-driver-mismatch", facts, config, inputs) == []
    assert found(cuda_pod(), "gpu-cuda-driver-mismatch", facts_from_objects(load_yaml_docs(MIXED)), config,
                 inputs) == []
