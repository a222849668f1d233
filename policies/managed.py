"""What node labels tell about the cluster around them: managed-platform admission behaviour, and
GPU nodes whose device plugin has not registered its resources yet.

**ExtendedResourceToleration.**  The admission plugin (kubernetes/kubernetes
plugin/pkg/admission/extendedresourcetoleration/admission.go) adds ``{key: <name>, operator:
Exists, effect: NoSchedule}`` to a Pod for every extended resource in the ``requests`` of its
containers and init containers.  kube-apiserver does not enable it by default; whether a managed
platform does is a fact of that platform, taken from its own documentation or source (``PLATFORMS``
below, one row per platform with both sources: what enables it, and what its nodes carry):

* **runs it** — GKE, AKS, EKS and OKE: GPU pods need no toleration of their own for taints keyed by
  the resources they request;
* **does not** — OpenShift: its kube-apiserver's plugin list leaves it out, so GPU pods there need
  their tolerations;
* **not known** — DigitalOcean and Linode: no page of theirs says; it is not assumed, and the lint
  summary says so (set ``extendedResourceToleration: true`` where it runs).

A platform is recognised by what its nodes carry: a label only the platform (or its node tooling)
puts on nodes, or the scheme of ``spec.providerID`` where only the platform's own cloud controller
sets it.  A providerID alone does not tell a managed platform from a self-managed cluster on the
same cloud (``aws://`` is on every node the AWS cloud provider runs, EKS or kops): EKS is recognised
by its labels only.  The first platform (in ``PLATFORMS`` order) that any node shows wins;
OpenShift comes first, as OpenShift clusters run on every cloud.  ``extendedResourceToleration:
true|false`` in the config overrides detection either way.

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
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policies.facts import NodeFacts


@dataclass(frozen=True, slots=True)
class Platform:
    """A managed Kubernetes platform: whether it runs ExtendedResourceToleration and how its nodes
    show it.  ``runs_ert`` is True (it runs the plugin), False (it does not) or None (not known)."""

    name: str
    runs_ert: bool | None
    ert_source: str  # where the platform says which admission plugins it runs
    labels: tuple[str, ...] = ()  # node label keys that only this platform puts on its nodes
    provider_schemes: tuple[str, ...] = ()  # spec.providerID schemes ("digitalocean" for digitalocean://…)
    node_source: str = ""  # where the labels or the providerID scheme come from


PLATFORMS: tuple[Platform, ...] = (
    Platform(
        "OpenShift", False,
        # The operator's kube-apiserver config lists its admission plugins (no
        # ExtendedResourceToleration): openshift/cluster-kube-apiserver-operator
        # bindata/assets/config/defaultconfig.yaml ``enable-admission-plugins``; openshift/kubernetes
        # openshift-kube-apiserver/admission/admissionenablement/register.go
        # ``additionalDefaultOnPlugins`` does not turn it on either.
        "openshift/cluster-kube-apiserver-operator bindata/assets/config/defaultconfig.yaml",
        labels=("node.openshift.io/os_id",),
        # The Machine Config Operator's kubelet unit: --node-labels=…,node.openshift.io/os_id=${ID}
        # (openshift/machine-config-operator templates/*/01-*-kubelet/_base/units/kubelet.service.yaml).
        node_source="openshift/machine-config-operator kubelet.service template",
    ),
    Platform(
        "GKE", True,
        # "GKE will automatically apply corresponding tolerations to Pods requesting GPUs by running
        # the ExtendedResourceToleration admission controller" (GKE documentation, quoted in
        # kserve/kserve docs/samples/accelerators/README.md).
        "GKE GPU documentation (quoted in kserve/kserve docs/samples/accelerators/README.md)",
        labels=("cloud.google.com/gke-nodepool",),
        # On every GKE node (seen on GKE node templates in cloudpilot-ai/karpenter-provider-gcp
        # pkg/providers/instance/instance_test.go).
        node_source="cloudpilot-ai/karpenter-provider-gcp pkg/providers/instance/instance_test.go",
    ),
    Platform(
        "AKS", True,
        # "What Kubernetes admission controllers does AKS support?" lists ExtendedResourceToleration
        # and says the list cannot be modified (MicrosoftDocs/azure-aks-docs articles/aks/faq.md).
        "MicrosoftDocs/azure-aks-docs articles/aks/faq.md",
        labels=("kubernetes.azure.com/cluster",),
        node_source="Azure/karpenter-provider-azure pkg/apis/v1beta1/labels.go AKSLabelCluster",
    ),
    Platform(
        "EKS", True,
        # "The following admission controllers are enabled for all <version> platform versions:
        # NodeRestriction, ExtendedResourceToleration, …" for every current Kubernetes version
        # (awsdocs/amazon-eks-user-guide latest/ug/clusters/platform-versions.adoc); announced for
        # 1.19 in aws/containers-roadmap#739.
        "awsdocs/amazon-eks-user-guide latest/ug/clusters/platform-versions.adoc",
        labels=(
            # "Amazon EKS adds Kubernetes labels to managed node group instances … prefixed with
            # eks.amazonaws.com", among them eks.amazonaws.com/capacityType (latest/ug/nodes/
            # managed-node-groups.adoc); eks.amazonaws.com/nodegroup names the group
            # (kubernetes/autoscaler cluster-autoscaler/processors/nodegroupset/aws_nodegroups.go).
            "eks.amazonaws.com/nodegroup",
            "eks.amazonaws.com/capacityType",
            # "EKS Auto Mode nodes have set the value of the label eks.amazonaws.com/compute-type to
            # auto" (latest/ug/automode/associate-workload.adoc).
            "eks.amazonaws.com/compute-type",
            # "a label used by eksctl to identify node group names" (aws_nodegroups.go above):
            # eksctl's self-managed node groups, which carry no eks.amazonaws.com label.
            "alpha.eksctl.io/nodegroup-name",
        ),
        node_source="awsdocs/amazon-eks-user-guide latest/ug/nodes/managed-node-groups.adoc",
    ),
    Platform(
        "OKE", True,
        # "Supported Admission Controllers": ExtendedResourceToleration "Yes" in every listed version
        # (docs.oracle.com/en-us/iaas/Content/ContEng/Reference/contengadmissioncontrollers.htm).
        "docs.oracle.com/en-us/iaas/Content/ContEng/Reference/contengadmissioncontrollers.htm",
        # "Kubernetes Engine automatically adds the oci.oraclecloud.com/fault-domain label to each
        # worker node" (…/ContEng/Reference/contengsupportedlabelsusecases.htm).  Oracle's cloud
        # controller manager sets it on self-managed clusters on OCI too: set
        # extendedResourceToleration: false there.
        labels=("oci.oraclecloud.com/fault-domain",),
        node_source="docs.oracle.com/en-us/iaas/Content/ContEng/Reference/contengsupportedlabelsusecases.htm",
    ),
    Platform(
        "DigitalOcean Kubernetes", None,
        "no DigitalOcean page lists the admission plugins DOKS runs",
        # The DigitalOcean cloud controller's providerID, digitalocean://<droplet id>
        # (kubernetes/autoscaler cluster-autoscaler/cloudprovider/digitalocean/
        # digitalocean_cloud_provider.go doProviderIDPrefix).
        provider_schemes=("digitalocean",),
        node_source="kubernetes/autoscaler cluster-autoscaler/cloudprovider/digitalocean",
    ),
    Platform(
        "Linode Kubernetes Engine", None,
        "no Akamai/Linode page lists the admission plugins LKE runs",
        # linode/linode-cloud-controller-manager cloud/linode/common.go providerIDPrefix "linode://"
        # (as copied into kubernetes/autoscaler cluster-autoscaler/cloudprovider/linode).
        provider_schemes=("linode",),
        node_source="linode/linode-cloud-controller-manager cloud/linode/common.go",
    ),
)

_BY_LABEL: dict[str, Platform] = {key: p for p in PLATFORMS for key in p.labels}
_BY_SCHEME: dict[str, Platform] = {scheme: p for p in PLATFORMS for scheme in p.provider_schemes}
_ORDER: dict[str, int] = {p.name: i for i, p in enumerate(PLATFORMS)}
# Labels in the order they are named (platform first, then the platform's own order): the evidence
# given is the first label of the first platform, whatever the order of a node's labels.
_LABEL_RANK: dict[str, int] = {key: i for i, key in enumerate(k for p in PLATFORMS for k in p.labels)}


@dataclass(frozen=True, slots=True)
class Detected:
    """A platform and what showed it (``node label …`` or ``providerID …://``)."""

    platform: Platform
    evidence: str

    def ert_reason(self) -> str | None:
        """Why ExtendedResourceToleration is assumed (the lint summary's wording), or None."""
        if self.platform.runs_ert:
            return f"detected: {self.platform.name} runs it ({self.evidence})"
        return None

    def note(self) -> str | None:
        """What to say where the platform is not taken to run it (None where it is)."""
        p = self.platform
        if p.runs_ert:
            return None
        if p.runs_ert is False:
            return (f"{p.name} detected ({self.evidence}): it does not run ExtendedResourceToleration, so GPU "
                    "pods need tolerations of their own for GPU taints")
        return (f"{p.name} detected ({self.evidence}): whether it runs ExtendedResourceToleration is not known, "
                "so GPU pods are judged without it; set extendedResourceToleration: true if it does")


def _node_platform(node: NodeFacts) -> Detected | None:
    keys = node.labels.keys() & _BY_LABEL.keys()
    if keys:
        key = min(keys, key=_LABEL_RANK.__getitem__)
        return Detected(_BY_LABEL[key], f"node label {key}")
    if node.provider in _BY_SCHEME:
        return Detected(_BY_SCHEME[node.provider], f"providerID {node.provider}://")
    return None


def detect_platform(nodes: Iterable[NodeFacts]) -> Detected | None:
    """The managed platform the nodes show (the first in ``PLATFORMS`` order), or None."""
    best: Detected | None = None
    for node in nodes:
        found = _node_platform(node)
        if found is not None and (best is None or _ORDER[found.platform.name] < _ORDER[best.platform.name]):
            best = found
            if _ORDER[best.platform.name] == 0:
                break
    return best


def detect_extended_resource_toleration(nodes: Iterable[NodeFacts]) -> str | None:
    """Why the cluster is known to run ExtendedResourceToleration, or None."""
    found = detect_platform(nodes)
    return found.ert_reason() if found is not None else None


GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
NVIDIA_GPU = "nvidia.com/gpu"


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
