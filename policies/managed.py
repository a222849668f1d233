"""What node labels tell about the cluster around them: managed-platform admission behaviour, and
GPU nodes whose device plugin has not registered its resources yet.

**ExtendedResourceToleration.**  The admission plugin (kubernetes/kubernetes
plugin/pkg/admission/extendedresourcetoleration/admission.go) adds ``{key: <name>, operator:
Exists, effect: NoSchedule}`` to a Pod for every extended resource in the ``requests`` of its
containers and init containers.  kube-apiserver does not enable it by default, but two managed
platforms do, and their nodes say which platform runs them:

* GKE — "GKE will automatically apply corresponding tolerations to Pods requesting GPUs by
  running the ExtendedResourceToleration admission controller" (GKE documentation, quoted in
  kserve/kserve docs/samples/accelerators/README.md).  GKE labels every node with its node pool,
  ``cloud.google.com/gke-nodepool`` (seen on GKE node templates in
  cloudpilot-ai/karpenter-provider-gcp pkg/providers/instance/instance_test.go).
* AKS — the AKS FAQ lists ExtendedResourceToleration among the admission controllers AKS runs
  and says the list cannot be modified (MicrosoftDocs/azure-aks-docs articles/aks/faq.md, "What
  Kubernetes admission controllers does AKS support?").  AKS nodes carry
  ``kubernetes.azure.com/cluster`` (Azure/karpenter-provider-azure pkg/apis/v1beta1/labels.go
  ``AKSLabelCluster``).

EKS does not run it (its GPU nodes are not tainted automatically either: domain-facts C.3), so
nothing is detected there; ``extendedResourceToleration: true|false`` in the config overrides
detection either way.

**Pending GPUs.**  Between a GPU node joining and its device plugin registering, the node
advertises no GPU resource, so a pod that will fit it in a minute looks unschedulable.  Two labels
mark a GPU node before that: the GPU Operator's ``nvidia.com/gpu.present=true`` (NVIDIA/gpu-operator
controllers/state_manager.go; ``nvidia.com/gpu.deploy.device-plugin=false`` means the operator will
not run the device plugin there) and GKE's ``cloud.google.com/gke-accelerator``, which GKE puts on
its GPU node pools (cloudpilot-ai/karpenter-provider-gcp pkg/apis/v1alpha1/labels.go
``LabelGKEAccelerator``).  Such a node that advertises no ``nvidia.com/*`` resource at all may
offer ``nvidia.com/gpu`` in a count nobody knows yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policies.facts import NodeFacts

# (node label, platform) pairs whose presence shows the platform runs ExtendedResourceToleration.
ERT_PLATFORM_LABELS: tuple[tuple[str, str], ...] = (
    ("cloud.google.com/gke-nodepool", "GKE"),
    ("kubernetes.azure.com/cluster", "AKS"),
)

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
NVIDIA_GPU = "nvidia.com/gpu"


def detect_extended_resource_toleration(nodes: Iterable[NodeFacts]) -> str | None:
    """Why the cluster is known to run ExtendedResourceToleration, or None."""
    for node in nodes:
        for label, platform in ERT_PLATFORM_LABELS:
            if label in node.labels:
                return f"detected: {platform} runs it (node label {label})"
    return None


def pending_gpu_resources(labels: Mapping[str, str], allocatable: Mapping[str, Fraction]) -> tuple[frozenset[str], str]:
    """(GPU resources a GPU node will advertise once its device plugin registers, why) — or nothing."""
    if any(name.startswith("nvidia.com/") and q > 0 for name, q in allocatable.items()):
        return frozenset(), ""
    starting = "but no GPU advertised yet: device plugin starting?"
    if labels.get(GPU_PRESENT_LABEL) == "true" and labels.get(DEVICE_PLUGIN_DEPLOY_LABEL) != "false":
        return frozenset({NVIDIA_GPU}), f"{GPU_PRESENT_LABEL}=true {starting}"
    if labels.get(GKE_ACCELERATOR_LABEL):
        return frozenset({NVIDIA_GPU}), f"{GKE_ACCELERATOR_LABEL} set {starting}"
    return frozenset(), ""
