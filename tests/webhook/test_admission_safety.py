"""Admission that never breaks a cluster: UPDATE/DELETE semantics, infrastructure, mutation scope,
warn enforcement and the ignore annotation, decided in process on real review shapes."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.config import Config
from tests.support.admission import fixture_object, review, running, terminating
from webhook import admission

POD = "pod-gpu-request-without-limit.json"
DEPLOYMENT = "deployment-gpu-request-without-limit.json"
LIMIT_MISSING = "[gpu-limit-missing]"


def decide(
    rev: dict[str, Any], facts: ClusterFacts, config: Config | None = None, mutating: bool = False
) -> admission.Verdict:
    req = admission.parse_review(orjson.dumps(rev))
    fn = admission.mutate if mutating else admission.validate
    return fn(req, config or load_config({"mutate": ["gpu-limit-missing"]}), facts, evaluate)


def bad_pod() -> dict[str, Any]:
    return fixture_object(POD)


def bad_deployment() -> dict[str, Any]:
    return fixture_object(DEPLOYMENT)


def test_create_of_a_bad_pod_is_denied(example_facts: ClusterFacts) -> None:
    verdict = decide(review("CREATE", bad_pod()), example_facts)
    assert not verdict.allowed and LIMIT_MISSING in verdict.message


def test_label_only_update_of_a_violating_object_is_allowed(example_facts: ClusterFacts) -> None:
    for old in (running(bad_pod()), bad_deployment()):
        new = copy.deepcopy(old)
        new["metadata"].setdefault("labels", {})["team"] = "vision"
        new["metadata"]["annotations"] = {"owner": "alice"}
        verdict = decide(review("UPDATE", new, old), example_facts)
        assert verdict.allowed and verdict.skipped == "metadata or status update"
        assert not verdict.warnings


def test_status_update_is_allowed(example_facts: ClusterFacts) -> None:
    old = running(bad_pod())
    new = copy.deepcopy(old)
    new["status"]["phase"] = "Succeeded"
    assert decide(review("UPDATE", new, old, user="kubelet"), example_facts).allowed
    assert decide(review("UPDATE", new, old, subresource="status", user="kubelet"), example_facts).allowed


def test_job_controller_removing_its_finalizer_from_a_terminating_pod(example_facts: ClusterFacts) -> None:
    old = terminating(running(bad_pod()), ["batch.kubernetes.io/job-tracking"])
    new = terminating(running(bad_pod()), [])
    for mutating in (False, True):
        verdict = decide(review("UPDATE", new, old, user="job-controller"), example_facts, mutating=mutating)
        assert verdict.allowed and verdict.patch is None


def test_garbage_collector_removing_foreground_deletion(example_facts: ClusterFacts) -> None:
    old = terminating(bad_deployment(), ["foregroundDeletion"])
    new = terminating(bad_deployment(), [])
    new["spec"]["replicas"] = 0  # a spec change on the way out does not matter either
    verdict = decide(review("UPDATE", new, old, user="generic-garbage-collector"), example_facts)
    assert verdict.allowed and verdict.skipped == "deletion in progress"


def test_update_with_only_pre_existing_findings_is_allowed_with_warnings(example_facts: ClusterFacts) -> None:
    old = bad_deployment()
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/tritonserver:24.08-py3"
    verdict = decide(review("UPDATE", new, old), example_facts)
    assert verdict.allowed
    assert any(w.startswith("pre-existing gpu-limit-missing") for w in verdict.warnings)


def test_update_that_introduces_a_finding_is_denied_for_that_finding_only(example_facts: ClusterFacts) -> None:
    old = bad_deployment()
    new = copy.deepcopy(old)
    sidecar = copy.deepcopy(new["spec"]["template"]["spec"]["containers"][0])
    sidecar["name"] = "sidecar"
    sidecar["resources"] = {"requests": {"example.com/fpga": "1"}}
    new["spec"]["template"]["spec"]["containers"].append(sidecar)
    verdict = decide(review("UPDATE", new, old), example_facts)
    assert not verdict.allowed
    assert "1 GPU policy violation" in verdict.message and "containers[1]" in verdict.message
    assert any(w.startswith("pre-existing gpu-limit-missing") for w in verdict.warnings)


def test_reordering_containers_does_not_make_a_finding_new(example_facts: ClusterFacts) -> None:
    old = bad_deployment()
    helper = {"name": "helper", "image": "busybox:1.36", "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}
    old["spec"]["template"]["spec"]["containers"].append(helper)
    new = copy.deepcopy(old)
    containers = new["spec"]["template"]["spec"]["containers"]
    containers.reverse()
    verdict = decide(review("UPDATE", new, old), example_facts)
    assert verdict.allowed, verdict.message


def test_delete_is_allowed_and_never_evaluated(example_facts: ClusterFacts) -> None:
    calls: list[Any] = []

    def counting(obj: dict[str, Any], config: Config, facts: ClusterFacts) -> Any:
        calls.append(obj)
        return evaluate(obj, config, facts)

    req = admission.parse_review(orjson.dumps(review("DELETE", None, running(bad_pod()))))
    assert admission.validate(req, load_config(None), example_facts, counting).allowed
    assert admission.mutate(req, load_config({"mutate": ["gpu-limit-missing"]}), example_facts, counting).allowed
    assert calls == []


def test_mutate_patches_creates_of_pods_only_by_default(example_facts: ClusterFacts) -> None:
    pod = decide(review("CREATE", bad_pod()), example_facts, mutating=True)
    assert pod.patch
    deployment = decide(review("CREATE", bad_deployment()), example_facts, mutating=True)
    assert deployment.patch is None and "mutateTemplates" in deployment.skipped
    opted_in = load_config({"mutate": ["gpu-limit-missing"], "mutateTemplates": True})
    assert decide(review("CREATE", bad_deployment()), example_facts, opted_in, mutating=True).patch


def test_mutate_never_patches_updates(example_facts: ClusterFacts) -> None:
    """Pod specs and Job templates are immutable: a patch would fail the user's own update."""
    old = running(bad_pod())
    new = copy.deepcopy(old)
    new["spec"]["activeDeadlineSeconds"] = 3600  # one of the few mutable pod spec fields
    opted_in = load_config({"mutate": ["gpu-limit-missing", "gpu-shared-memory"], "mutateTemplates": True})
    assert decide(review("UPDATE", new, old), example_facts, opted_in, mutating=True).patch is None
    deployment = bad_deployment()
    assert decide(review("UPDATE", deployment, deployment), example_facts, opted_in, mutating=True).patch is None


def test_dry_run_update_gets_the_same_answer(example_facts: ClusterFacts) -> None:
    old = bad_deployment()
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["example.com/fpga"] = "1"
    wet = decide(review("UPDATE", new, old), example_facts)
    dry = decide(review("UPDATE", new, old, dry_run=True), example_facts)
    assert (wet.allowed, wet.message, wet.warnings) == (dry.allowed, dry.message, dry.warnings)
    assert not wet.allowed


def test_ephemeral_debug_container_asking_the_runtime_for_gpus_is_denied(example_facts: ClusterFacts) -> None:
    old = running(fixture_object("pod-gpu-with-limit.json"))
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [{
        "name": "debugger-x7k2q", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}], "stdin": True, "tty": True,
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }]
    verdict = decide(review("UPDATE", new, old, subresource="ephemeralcontainers"), example_facts)
    assert not verdict.allowed and "[gpu-device-access-bypass]" in verdict.message


def test_enforcement_warn_admits_what_would_be_denied(example_facts: ClusterFacts) -> None:
    verdict = decide(review("CREATE", bad_pod()), example_facts, load_config({"enforcement": "warn"}))
    assert verdict.allowed
    assert [f.rule for f in verdict.would_deny] == ["gpu-limit-missing"]
    assert verdict.warnings[0].startswith("would deny: gpu-limit-missing")


def test_warn_namespaces_match_by_pattern(example_facts: ClusterFacts) -> None:
    config = load_config({"warnNamespaces": ["team-*", "ml"]})
    pod = bad_pod()
    assert decide(review("CREATE", pod), example_facts, config).allowed
    other = copy.deepcopy(pod)
    other["metadata"]["namespace"] = "prod"
    assert not decide(review("CREATE", other), example_facts, config).allowed
    team = copy.deepcopy(pod)
    team["metadata"]["namespace"] = "team-vision"
    assert decide(review("CREATE", team), example_facts, config).allowed


def test_ignore_annotation_use_is_a_warning_and_unknown_rules_are_named(example_facts: ClusterFacts) -> None:
    pod = bad_pod()
    pod["metadata"]["annotations"] = {"gpuguard.io/ignore": "gpu-limit-missing, gpu-limt-missing"}
    verdict = decide(review("CREATE", pod), example_facts)
    assert verdict.allowed
    # One message per fact: what it skips (rule ids only), and the names that are no rule, with the nearest.
    assert "gpuguard.io/ignore skips gpu-limit-missing at metadata" in verdict.warnings
    assert ("gpuguard.io/ignore names no rule: gpu-limt-missing (did you mean gpu-limit-missing?) at metadata"
            in verdict.warnings)
    [use] = verdict.ignore_uses
    assert use.honoured and use.unknown == ("gpu-limt-missing",)


def _bypass_pod() -> dict[str, Any]:
    pod = bad_pod()
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    pod["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    return pod


@pytest.mark.parametrize("names", ["all", "gpu-device-access-bypass", "gpu-device-access-bypass,gpu-limit-missing"])
def test_the_ignore_annotation_never_skips_the_allocation_guard_unless_the_config_lists_it(
    example_facts: ClusterFacts, names: str
) -> None:
    """Issue: with allowIgnoreAnnotation true, `gpuguard.io/ignore: all` skipped every rule, device
    access included, for anyone who may create pods."""
    pod = _bypass_pod()
    pod["metadata"]["annotations"] = {"gpuguard.io/ignore": names}
    honouring = load_config({"allowIgnoreAnnotation": True})
    verdict = decide(review("CREATE", pod), example_facts, honouring)
    assert not verdict.allowed and "[gpu-device-access-bypass]" in verdict.message
    assert ("gpuguard.io/ignore cannot skip gpu-device-access-bypass (allowIgnoreRules) at metadata"
            in verdict.warnings)
    listed = load_config({"allowIgnoreAnnotation": True, "allowIgnoreRules": ["gpu-device-access-bypass"]})
    assert decide(review("CREATE", pod), example_facts, listed).allowed


def test_the_shipped_policy_refuses_the_ignore_annotation(example_facts: ClusterFacts) -> None:
    from tests.support.paths import ROOT

    shipped = load_config(yaml.safe_load((ROOT / "deploy" / "gpuguard-config.yaml").read_text()))
    pod = _bypass_pod()
    pod["metadata"]["annotations"] = {"gpuguard.io/ignore": "all"}
    verdict = decide(review("CREATE", pod), example_facts, shipped)
    assert any(w.startswith("gpuguard.io/ignore not honoured here") for w in verdict.warnings)
    assert verdict.would_deny  # enforcement: warn in the shipped policy


@pytest.mark.parametrize(
    ("setting", "honoured"), [(False, False), (["ml"], True), (["research"], False), (True, True)]
)
def test_allow_ignore_annotation(example_facts: ClusterFacts, setting: Any, honoured: bool) -> None:
    pod = bad_pod()
    pod["metadata"]["annotations"] = {"gpuguard.io/ignore": "all"}
    verdict = decide(review("CREATE", pod), example_facts, load_config({"allowIgnoreAnnotation": setting}))
    assert verdict.allowed is honoured
    expected = "gpuguard.io/ignore skips all" if honoured else "gpuguard.io/ignore not honoured here"
    assert any(w.startswith(expected) for w in verdict.warnings)


def test_only_namespaces_no_tenant_can_create_are_exempt_by_name(example_facts: ClusterFacts) -> None:
    for namespace in ("kube-system", "gpuguard"):
        pod = bad_pod()
        pod["metadata"]["namespace"] = namespace
        assert decide(review("CREATE", pod), example_facts).allowed, namespace
    # A tenant-created namespace named like GPU infrastructure is judged like any other.
    for namespace in ("gpu-operator", "nvidia-gpu-operator", "nvidia-device-plugin", "nvidia-dra-driver-gpu"):
        pod = bad_pod()
        pod["metadata"]["namespace"] = namespace
        assert not decide(review("CREATE", pod), example_facts).allowed, namespace
    # A config that lists its own namespaces replaces the default.
    pod = bad_pod()
    pod["metadata"]["namespace"] = "x"
    assert decide(review("CREATE", pod), example_facts, load_config({"exemptNamespaces": ["x"]})).allowed


def test_a_pod_bound_to_a_node_is_judged_against_that_node(example_facts: ClusterFacts) -> None:
    pod = fixture_object("pod-gpu-with-limit.json")
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8"
    pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "8"
    pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    assert decide(review("CREATE", pod), example_facts).allowed  # some 8-GPU node exists
    pod["spec"]["nodeName"] = "t4-pool-1"  # created bound to a 1-GPU node: no scheduler, no other node
    verdict = decide(review("CREATE", pod), example_facts)
    assert not verdict.allowed and "[gpu-exceeds-node-capacity]" in verdict.message
    pod["spec"]["nodeName"] = "no-such-node"  # unknown to the facts: facts rules cannot judge it, and it says so
    verdict = decide(review("CREATE", pod), example_facts)
    assert verdict.allowed
    (warning,) = (w for w in verdict.warnings if w.startswith("gpu-unschedulable"))
    assert warning.startswith(
        "gpu-unschedulable: the pod is bound to node 'no-such-node', which the cluster facts do not list; "
    )
    assert len(warning) <= admission.WARNING_LIMIT


def _h100_deployment() -> dict[str, Any]:
    """A Deployment that is fine on day 1: it selects the H100 pool and tolerates its taints."""
    deployment = bad_deployment()
    spec = deployment["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"pool": "h100"}
    spec["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
    ]
    resources = spec["containers"][0]["resources"]
    resources["limits"] = {**resources.get("limits", {}), "nvidia.com/gpu": "8"}
    resources["requests"]["nvidia.com/gpu"] = "8"
    return deployment


def _day2(facts: ClusterFacts) -> ClusterFacts:
    """The H100 pool is drained and removed; the A100 pool's driver is rolled back to R470."""
    nodes = []
    for node in facts.nodes:
        if node.labels.get("pool") == "h100":
            continue
        if node.labels.get("pool") == "a100":
            labels = dict(node.labels)
            labels.update({
                "nvidia.com/cuda.driver-version.full": "470.256.02", "nvidia.com/cuda.driver-version.major": "470",
                "nvidia.com/cuda.driver-version.minor": "256", "nvidia.com/cuda.driver-version.revision": "02",
                "nvidia.com/cuda.driver.major": "470", "nvidia.com/cuda.driver.minor": "256",
                "nvidia.com/cuda.driver.rev": "02",
            })
            node = type(node)(node.name, labels, node.taints, node.allocatable, node.unschedulable)
        nodes.append(node)
    return ClusterFacts(nodes=tuple(nodes), runtime_classes=facts.runtime_classes, source="day 2")


def test_day_two_existing_objects_are_never_denied(example_facts: ClusterFacts) -> None:
    """After the facts change, relabelling, scaling, deleting and finalizer removal of objects
    created on day 1 are all admitted, although those objects now have error-level findings."""
    deployment = _h100_deployment()
    assert decide(review("CREATE", deployment), example_facts).allowed
    pod = running(fixture_object("pod-gpu-with-limit.json"), node="a100-pool-1")
    pod["spec"]["containers"][0]["image"] = "nvidia/cuda:13.0.2-base-ubuntu22.04"  # forward compat on R535
    assert decide(review("CREATE", pod), example_facts).allowed

    day2 = _day2(example_facts)
    assert evaluate(deployment, load_config(None), day2).blocking()  # the pool it selects is gone
    assert evaluate(pod, load_config(None), day2).blocking()  # its CUDA needs a newer driver now

    relabelled = copy.deepcopy(deployment)
    relabelled["metadata"].setdefault("labels", {})["tier"] = "gold"
    scaled = copy.deepcopy(deployment)
    scaled["spec"]["replicas"] = 3
    pod_relabelled = copy.deepcopy(pod)
    pod_relabelled["metadata"].setdefault("labels", {})["checked"] = "yes"
    steps = [
        review("UPDATE", relabelled, deployment),
        review("UPDATE", scaled, deployment),
        review("UPDATE", pod_relabelled, pod),
        review("UPDATE", terminating(scaled, ["foregroundDeletion"]), scaled),
        review("UPDATE", terminating(scaled, []), terminating(scaled, ["foregroundDeletion"]),
               user="generic-garbage-collector"),
        review("DELETE", None, scaled),
        review("UPDATE", terminating(pod, []), terminating(pod, ["batch.kubernetes.io/job-tracking"]),
               user="job-controller"),
        review("DELETE", None, pod),
    ]
    config = load_config({"mutate": ["gpu-limit-missing", "gpu-taint-not-tolerated"], "mutateTemplates": True})
    for step in steps:
        for mutating in (False, True):
            verdict = decide(step, day2, config, mutating=mutating)
            request = step["request"]
            assert verdict.allowed, (request["operation"], request["kind"]["kind"], verdict.message)
            assert verdict.patch is None


VALIDATOR_ASSET = "NVIDIA__gpu-operator__assets__state-operator-validation__0500_daemonset.yaml"
CLUSTER_POLICY = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy",
                  "uid": "6a0c5d2e-8f7b-4f3a-9d1e-2b4c6a8e0f13", "controller": True, "blockOwnerDeletion": True}


def _validator_daemonset(namespace: str, owned: bool) -> dict[str, Any]:
    from tests.support.paths import CORPUS

    ds: dict[str, Any] = yaml.safe_load((CORPUS / "operands" / VALIDATOR_ASSET).read_text())
    ds["metadata"]["namespace"] = namespace
    if owned:
        ds["metadata"]["ownerReferences"] = [dict(CLUSTER_POLICY)]
    spec = ds["spec"]["template"]["spec"]
    for c in [*spec["initContainers"], *spec["containers"]]:
        c["image"] = "nvcr.io/nvidia/gpu-operator:v26.7.0"
    return ds


def test_a_gpu_operator_operand_is_admitted_only_when_its_cluster_policy_controls_it(
    example_facts: ClusterFacts,
) -> None:
    # The operator's own DaemonSet, in a namespace the config does not list: admitted.
    config = load_config({})
    assert decide(review("CREATE", _validator_daemonset("gpu-system", owned=True)), example_facts, config).allowed
    # The same without its ClusterPolicy: a copy any tenant could make; denied as before, saying why.
    verdict = decide(review("CREATE", _validator_daemonset("team-a", owned=False)), example_facts, config)
    assert not verdict.allowed
    assert "it looks like the GPU Operator's operator-validator operand, but no ClusterPolicy controls it" in (
        verdict.message)
    # A tenant Pod that copies the operand's labels, image, node selector and owner reference is no operand.
    template = _validator_daemonset("team-a", owned=True)["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "copy", "namespace": "team-a", "labels": template["metadata"]["labels"],
                        "ownerReferences": [dict(CLUSTER_POLICY)]},
           "spec": {**template["spec"]}}
    verdict = decide(review("CREATE", pod), example_facts, config)
    assert not verdict.allowed and "[gpu-device-access-bypass]" in verdict.message
