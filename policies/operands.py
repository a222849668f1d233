"""The GPU Operator's operands, told from ordinary pods by their images and their shape.

The GPU Operator (NVIDIA/gpu-operator v26.7.0) renders each operand from ``assets/state-*/``
and ``assets/gpu-feature-discovery/`` — the validator, the device plugin and its MPS control
daemon, GFD, DCGM and its exporter, the container toolkit, the driver, the MIG and vGPU
managers… — as a DaemonSet whose pod template selects the nodes its state manager labels for that
operand, ``nodeSelector: {nvidia.com/gpu.deploy.<operand>: "true"}`` (controllers/state_manager.go
``gpuStateLabels``), and makes its ClusterPolicy the DaemonSet's controller
(controllers/object_controls.go ``controllerutil.SetControllerReference``; ``nvidia.com/v1``
``ClusterPolicy``).  The validator's own workload pods (validator/manifests, created by
cmd/nvidia-validator with the validator's service account ``nvidia-operator-validator``) check
the driver and the device plugin.  Operands run privileged and see every GPU by design.

An object is an operand when **both** hold:

* **image**: every container's image is one of NVIDIA's GPU infrastructure images
  (policies.signals ``is_infrastructure_image``) — or, in the operator's unrendered assets (their
  namespace is the placeholder ``FILLED BY THE OPERATOR``), the image placeholder;
* **shape**: its pods select nodes by an ``nvidia.com/gpu.deploy.*`` label set to ``"true"``, or it
  is a validator workload Pod (a Pod of the service account ``nvidia-operator-validator``).

Labels prove nothing (``app: nvidia-operator-validator`` is one line to copy), and neither do
images or node selectors in an ordinary namespace: anyone may pull NVIDIA's images and run their
own command in them.  So where an object names a real namespace, only a DaemonSet that the
GPU Operator's ClusterPolicy controls is taken as an operand (``owned``).  A copied owner
reference names a ClusterPolicy UID that does not exist, and the garbage collector deletes a
dependent whose owners are all absent (kubernetes.io "Garbage Collection", owners and
dependents); the Pods such a DaemonSet creates are owned by the DaemonSet, not by a ClusterPolicy,
and are judged as before.  Everything else keeps its findings (policies.rules.
gpu_device_access_bypass says what it resembles and how to declare the operator's namespace).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from policies.podspec import PodTemplate
from policies.shapes import as_dict, as_list
from policies.signals import is_infrastructure_image

DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
VALIDATOR_SERVICE_ACCOUNT = "nvidia-operator-validator"
VALIDATOR_WORKLOAD = "validator workload"
OWNER_API_GROUP = "nvidia.com"
OWNER_KIND = "ClusterPolicy"
# The placeholders of the operator's assets and the validator's manifests ("FILLED BY THE
# OPERATOR", "FILLED BY OPERATOR", "FILLED_BY_THE_VALIDATOR"), which the operator replaces.
_PLACEHOLDER = re.compile(r"^FILLED[ _]BY[ _](THE[ _])?(OPERATOR|VALIDATOR)$")


def is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and _PLACEHOLDER.match(value) is not None


@dataclass(frozen=True, slots=True)
class Operand:
    """What makes a pod template an operand: which one (``component``) and whether the GPU
    Operator's ClusterPolicy controls the object."""

    component: str  # the nvidia.com/gpu.deploy.<component> it is deployed by, or "validator workload"
    owned: bool

    @property
    def what(self) -> str:
        if self.component == VALIDATOR_WORKLOAD:
            return "a GPU Operator validator workload pod"
        return f"the GPU Operator's {self.component} operand"


def _component(kind: Any, pod: PodTemplate) -> str | None:
    selector = as_dict(pod.spec.get("nodeSelector"))
    for key, value in selector.items():
        if isinstance(key, str) and key.startswith(DEPLOY_LABEL_PREFIX) and value == "true":
            return key.removeprefix(DEPLOY_LABEL_PREFIX)
    if kind == "Pod" and pod.spec.get("serviceAccountName") == VALIDATOR_SERVICE_ACCOUNT:
        return VALIDATOR_WORKLOAD
    return None


def controlled_by_cluster_policy(obj: dict[str, Any]) -> bool:
    """Whether the object's controller is a GPU Operator ClusterPolicy (nvidia.com/*)."""
    for ref in as_list(as_dict(obj.get("metadata")).get("ownerReferences")):
        ref = as_dict(ref)
        api_version = ref.get("apiVersion")
        if (ref.get("controller") is True and ref.get("kind") == OWNER_KIND and isinstance(api_version, str)
                and api_version.partition("/")[0] == OWNER_API_GROUP):
            return True
    return False


def operand(kind: Any, owned_by_policy: bool, pod: PodTemplate, unrendered: bool) -> Operand | None:
    """The operand ``pod`` (a template of an object of ``kind``, controlled by a ClusterPolicy when
    ``owned_by_policy``: controlled_by_cluster_policy) is, or None.  ``unrendered``: the object's
    namespace is absent or a placeholder (a chart's or the operator's own manifests), where the
    operator's image placeholder counts as its image."""
    if pod.shape != "template":
        return None
    images = [c.container.get("image") for c in pod.containers]
    if not images or not all(is_infrastructure_image(i) or (unrendered and is_placeholder(i)) for i in images):
        return None
    component = _component(kind, pod)
    if component is None:
        return None
    owned = kind == "DaemonSet" and owned_by_policy
    return Operand(component, owned)


def identity(obj: dict[str, Any]) -> tuple[Any, ...]:
    """What of the object beyond its pod templates ``operand`` reads (for memo keys)."""
    return obj.get("kind"), controlled_by_cluster_policy(obj)
