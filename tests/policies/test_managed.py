"""Managed platforms told apart by what their nodes carry, and whether each runs the
ExtendedResourceToleration admission plugin (policies.managed ``PLATFORMS``)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.facts import node_from_object
from policies.facts_build import facts_from_objects
from policies.managed import PLATFORMS, detect_platform
from tests.support.paths import FIXTURES

EKS = FIXTURES / "clusters" / "eks.yaml"


def node(name: str = "n1", labels: dict[str, str] | None = None, provider_id: str | None = None,
         gpus: int = 8, taint: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if provider_id is not None:
        spec["providerID"] = provider_id
    if taint:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec, "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": str(gpus)}}}


def gpu_pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "train", "image": "nvidia/cuda:12.2.2-base-ubuntu22.04",
                 "resources": {"limits": {"nvidia.com/gpu": 1}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [container], **spec}}


def taint_findings(obj: dict[str, Any], facts: ClusterFacts, raw_config: dict[str, Any] | None = None) -> list[str]:
    config = load_config(raw_config) if raw_config is not None else None
    return [f.message for f in evaluate(obj, config, facts).findings if f.rule == "gpu-taint-not-tolerated"]


def test_every_platform_names_its_sources_and_a_way_to_recognise_it() -> None:
    names = [p.name for p in PLATFORMS]
    assert len(names) == len(set(names))
    keys = [k for p in PLATFORMS for k in p.labels]
    assert len(keys) == len(set(keys)), "a node label names one platform"
    for p in PLATFORMS:
        assert p.ert_source and p.node_source, p.name
        assert p.labels or p.provider_schemes, p.name
    assert PLATFORMS[0].name == "OpenShift"  # OpenShift runs on every cloud: it is looked for first
    runs = {p.name: p.runs_ert for p in PLATFORMS}
    assert runs == {"OpenShift": False, "GKE": True, "AKS": True, "EKS": True, "OKE": True,
                    "DigitalOcean Kubernetes": None, "Linode Kubernetes Engine": None}


@pytest.mark.parametrize(
    ("labels", "evidence"),
    [
        ({"eks.amazonaws.com/capacityType": "ON_DEMAND", "eks.amazonaws.com/nodegroup": "gpu-p5"},
         "node label eks.amazonaws.com/nodegroup"),
        ({"eks.amazonaws.com/compute-type": "auto"}, "node label eks.amazonaws.com/compute-type"),  # EKS Auto Mode
        ({"alpha.eksctl.io/nodegroup-name": "gpu"}, "node label alpha.eksctl.io/nodegroup-name"),  # eksctl, self-managed
    ],
)
def test_eks_nodes_are_recognised_by_their_labels(labels: dict[str, str], evidence: str) -> None:
    facts = facts_from_objects([node(labels=labels, provider_id="aws:///us-east-1a/i-0abc")])
    reason = facts.extended_resource_toleration_reason or ""
    assert reason.startswith("detected: EKS runs it (" + evidence), reason
    assert taint_findings(gpu_pod(), facts) == []
    assert facts.platform_note is None


def test_an_aws_provider_id_alone_is_not_eks() -> None:
    # kops and self-managed clusters on EC2 carry aws:/// too; they run kube-apiserver's defaults.
    facts = facts_from_objects([node(provider_id="aws:///us-east-1a/i-0abc")])
    assert facts.extended_resource_toleration_reason is None
    assert facts.platform_note is None
    (message,) = taint_findings(gpu_pod(), facts)
    assert "nvidia.com/gpu=true:NoSchedule" in message


def test_oke_nodes_are_recognised_by_the_fault_domain_label_oke_adds() -> None:
    facts = facts_from_objects([node(labels={"oci.oraclecloud.com/fault-domain": "FAULT-DOMAIN-1"},
                                            provider_id="ocid1.instance.oc1.iad.abc")])
    assert "OKE runs it" in (facts.extended_resource_toleration_reason or "")
    assert taint_findings(gpu_pod(), facts) == []


def test_openshift_does_not_run_it_and_wins_over_the_cloud_it_runs_on() -> None:
    # An OpenShift cluster on AWS: the OpenShift label decides, GPU pods need their tolerations.
    labels = {"node.openshift.io/os_id": "rhcos", "eks.amazonaws.com/nodegroup": "copied"}
    facts = facts_from_objects([node(labels=labels, provider_id="aws:///us-east-1a/i-0abc")])
    assert facts.extended_resource_toleration_reason is None
    note = facts.platform_note or ""
    assert note.startswith("OpenShift detected (node label node.openshift.io/os_id): it does not run")
    assert len(taint_findings(gpu_pod(), facts)) == 1


@pytest.mark.parametrize(("provider_id", "name"), [("digitalocean://412345678", "DigitalOcean Kubernetes"),
                                                    ("linode://51234567", "Linode Kubernetes Engine")])
def test_platforms_whose_behaviour_is_unknown_are_named_but_not_assumed(provider_id: str, name: str) -> None:
    facts = facts_from_objects([node(provider_id=provider_id)])
    assert facts.extended_resource_toleration_reason is None
    scheme = provider_id.split("://")[0]
    assert facts.platform_note == (
        f"{name} detected (providerID {scheme}://): whether it runs ExtendedResourceToleration is not known, "
        "so GPU pods are judged without it; set extendedResourceToleration: true if it does")
    assert len(taint_findings(gpu_pod(), facts)) == 1
    # Saying so in the config settles it: no note, and the tolerations are taken as added.
    ev = evaluate(gpu_pod(), load_config({"extendedResourceToleration": True}), facts)
    assert ev.facts.platform_note is None
    assert not [f for f in ev.findings if f.rule == "gpu-taint-not-tolerated"]


def test_the_first_platform_any_node_shows_wins_whatever_the_node_order() -> None:
    eks = node("eks", labels={"eks.amazonaws.com/nodegroup": "g"})
    ocp = node("ocp", labels={"node.openshift.io/os_id": "rhcos"})
    for nodes in ([eks, ocp], [ocp, eks]):
        found = detect_platform(n for n in (node_from_object(o) for o in nodes) if n is not None)
        assert found is not None and found.platform.name == "OpenShift"
    assert detect_platform([]) is None


def test_the_provider_id_scheme_is_kept_on_the_node() -> None:
    parsed = node_from_object(node(provider_id="aws:///us-east-1a/i-0abc"))
    assert parsed is not None and parsed.provider == "aws"
    for odd in (None, "", "i-0abc", 42):
        obj = node()
        obj["spec"]["providerID"] = odd
        parsed = node_from_object(obj)
        assert parsed is not None and parsed.provider == ""


# --- the EKS snapshot: p5 and g5 node groups tainted nvidia.com/gpu ----------------------------

def eks_facts() -> ClusterFacts:
    return facts_from_objects(list(yaml.safe_load_all(EKS.read_text())))


def test_the_eks_snapshot_is_detected_and_gpu_pods_need_no_toleration() -> None:
    facts = eks_facts()
    assert facts.extended_resource_toleration_reason == "detected: EKS runs it (node label eks.amazonaws.com/nodegroup)"
    gpu_nodes = [n for n in facts.nodes if n.allocatable.get("nvidia.com/gpu")]
    assert len(gpu_nodes) == 4 and all(any(t.key == "nvidia.com/gpu" for t in n.taints) for n in gpu_nodes)
    assert taint_findings(gpu_pod(), facts) == []
    # Without the admission plugin (extendedResourceToleration: false) the taint is a finding again.
    (message,) = taint_findings(gpu_pod(), facts, {"extendedResourceToleration": False})
    assert "nvidia.com/gpu=true:NoSchedule" in message


def test_on_eks_a_taint_keyed_otherwise_still_needs_a_toleration() -> None:
    raw = list(yaml.safe_load_all(EKS.read_text()))
    for item in raw[0]["items"]:
        if "nvidia.com/gpu" in item["status"]["allocatable"]:
            item["spec"]["taints"].append({"key": "dedicated", "value": "training", "effect": "NoSchedule"})
    (message,) = taint_findings(gpu_pod(), facts_from_objects(raw))
    assert "dedicated=training:NoSchedule" in message and "nvidia.com/gpu=true" not in message
