"""GPU Operator operands are GPU infrastructure, recognised by image and shape (policies.operands),
never by a label a tenant can copy; in a real namespace only a DaemonSet its ClusterPolicy
controls."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import evaluate
from policies.operands import controlled_by_cluster_policy, is_placeholder, operand
from policies.podspec import extract
from policies.types import Finding, Severity
from tests.support.paths import CORPUS

OPERANDS = sorted((CORPUS / "operands").glob("*.yaml"))
VALIDATOR = CORPUS / "operands" / "NVIDIA__gpu-operator__assets__state-operator-validation__0500_daemonset.yaml"
MPS = CORPUS / "operands" / "NVIDIA__gpu-operator__assets__state-mps-control-daemon__0400_daemonset.yaml"
WORKLOAD = CORPUS / "real" / "NVIDIA__gpu-operator__validator__manifests__cuda-workload-validation.yaml"
RULE = "gpu-device-access-bypass"
# What the operator fills in (deployments/gpu-operator/values.yaml v26.7.0: validator image
# nvcr.io/nvidia/gpu-operator, the device plugin's nvcr.io/nvidia/k8s-device-plugin).
VALIDATOR_IMAGE = "nvcr.io/nvidia/gpu-operator:v26.7.0"
CLUSTER_POLICY_OWNER = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy",
                        "uid": "6a0c5d2e-8f7b-4f3a-9d1e-2b4c6a8e0f13", "controller": True, "blockOwnerDeletion": True}


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def bypass(obj: dict[str, Any]) -> list[Finding]:
    return [f for f in evaluate(obj).findings if f.rule == RULE]


def rendered(path: Path, namespace: str, image: str = VALIDATOR_IMAGE, owned: bool = True) -> dict[str, Any]:
    """The operand as the operator creates it: images and namespace filled in, its ClusterPolicy
    the controller."""
    obj = load(path)
    obj["metadata"]["namespace"] = namespace
    if owned:
        obj["metadata"]["ownerReferences"] = [copy.deepcopy(CLUSTER_POLICY_OWNER)]
    spec = obj["spec"]["template"]["spec"]
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            c["image"] = image
    return obj


@pytest.mark.parametrize("path", OPERANDS, ids=lambda p: p.name.split("__")[3])
def test_every_operand_as_the_operator_ships_it_is_infrastructure(path: Path) -> None:
    found = bypass(load(path))
    assert found, "the operands are privileged: there is something to say"
    assert all(f.severity is Severity.INFO for f in found), [(f.path, f.severity) for f in found]
    assert all("operand: GPU infrastructure, which sees every GPU by design" in f.message for f in found)


def test_the_mps_control_daemon_and_the_validator_were_errors_before() -> None:
    # The two of the issue: NVIDIA_VISIBLE_DEVICES=all without a GPU request, images the operator fills in.
    for path, at in ((MPS, "/spec/template/spec/containers/0/env/1"),
                     (VALIDATOR, "/spec/template/spec/initContainers/1/env/0")):
        (env,) = [f for f in bypass(load(path)) if f.path == at]
        assert env.severity is Severity.INFO
        assert "NVIDIA_VISIBLE_DEVICES" in env.message


def test_the_validators_workload_pods_are_infrastructure_in_their_unrendered_form() -> None:
    found = bypass(load(WORKLOAD))
    assert found and all(f.severity is Severity.INFO for f in found)
    assert all("a GPU Operator validator workload pod: GPU infrastructure" in f.message for f in found)


def test_placeholders_are_the_operators_own() -> None:
    for value in ("FILLED BY THE OPERATOR", "FILLED BY OPERATOR", "FILLED_BY_THE_VALIDATOR"):
        assert is_placeholder(value)
    others: tuple[Any, ...] = ("filled by the operator", "FILLED BY ME", "", None, "nvcr.io/nvidia/gpu-operator")
    for other in others:
        assert not is_placeholder(other)


def test_an_operand_its_cluster_policy_controls_is_infrastructure_in_any_namespace() -> None:
    ds = rendered(VALIDATOR, "gpu-system")
    found = bypass(ds)
    assert found and all(f.severity is Severity.INFO for f in found)
    assert all("the GPU Operator's operator-validator operand, which its ClusterPolicy controls" in f.message
               for f in found)


def test_without_its_cluster_policy_an_operand_keeps_its_findings_and_says_what_to_declare() -> None:
    ds = rendered(VALIDATOR, "gpu-system", owned=False)
    found = bypass(ds)
    assert any(f.severity is Severity.ERROR for f in found)
    assert all("it looks like the GPU Operator's operator-validator operand, but no ClusterPolicy controls it: if "
               "the GPU Operator runs in namespace 'gpu-system', list it in infrastructureNamespaces" in f.message
               for f in found if f.severity is not Severity.INFO)
    # A controller reference to something else is no ClusterPolicy's.
    ds["metadata"]["ownerReferences"] = [{**CLUSTER_POLICY_OWNER, "apiVersion": "example.com/v1"}]
    assert any(f.severity is Severity.ERROR for f in bypass(ds))
    ds["metadata"]["ownerReferences"] = [{**CLUSTER_POLICY_OWNER, "controller": False}]
    assert any(f.severity is Severity.ERROR for f in bypass(ds))


def test_a_tenant_pod_that_copies_an_operands_labels_is_judged_as_before() -> None:
    template = load(VALIDATOR)["spec"]["template"]
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "mine", "namespace": "team-a", "labels": dict(template["metadata"]["labels"])},
           "spec": {"containers": [{"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}
    (env,) = bypass(pod)
    assert env.severity is Severity.ERROR and "operand" not in env.message
    # Its images, its node selector and even an owner reference do not make a bare Pod an operand.
    pod["spec"]["containers"][0]["image"] = VALIDATOR_IMAGE
    pod["spec"]["nodeSelector"] = {"nvidia.com/gpu.deploy.operator-validator": "true"}
    pod["metadata"]["ownerReferences"] = [copy.deepcopy(CLUSTER_POLICY_OWNER)]
    assert [f.severity for f in bypass(pod)] == [Severity.ERROR]


def test_image_and_shape_are_both_needed() -> None:
    ds = load(VALIDATOR)
    (pod,) = extract(ds)
    assert operand(ds['kind'], controlled_by_cluster_policy(ds), pod, unrendered=True) is not None
    assert operand(ds['kind'], controlled_by_cluster_policy(ds), pod, unrendered=False) is None  # the image placeholder counts only unrendered
    no_shape = copy.deepcopy(ds)
    del no_shape["spec"]["template"]["spec"]["nodeSelector"]
    assert operand(no_shape['kind'], controlled_by_cluster_policy(no_shape), extract(no_shape)[0], unrendered=True) is None
    own_image = copy.deepcopy(ds)
    own_image["spec"]["template"]["spec"]["containers"][0]["image"] = "ghcr.io/someone/tool:1"
    assert operand(own_image['kind'], controlled_by_cluster_policy(own_image), extract(own_image)[0], unrendered=True) is None
    assert any(f.severity is Severity.ERROR for f in bypass(own_image))


def test_in_an_infrastructure_namespace_everything_stays_info_as_before() -> None:
    ds = rendered(VALIDATOR, "gpu-operator", owned=False)
    assert all(f.severity is Severity.INFO for f in bypass(ds))
    assert all("namespace 'gpu-operator' holds GPU infrastructure" in f.message for f in bypass(ds))
