"""An Argo Workflows template is judged as the pod the controller builds from it (policies.argo):
templateDefaults merged in, the workflow's resourceClaims, scheduling fields, podResources and
podMetadata where the template sets none, and findings and fixes where the value is written."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import yaml

from gpuguard.sources.snapshot import sample_text
from policies import ClusterFacts, evaluate
from policies.argo import merge, with_defaults
from policies.facts_build import facts_from_objects
from policies.podspec import extract
from tests.support.paths import CORPUS

ARGO = CORPUS / "argo"
CLAIMS = ARGO / "argoproj__argo-workflows__examples__resource-claims.yaml"
OVERRIDE = ARGO / "argoproj__argo-workflows__examples__resource-claims-template-override.yaml"
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def load(path: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def gpu_workflow(**spec: Any) -> dict[str, Any]:
    # The sample cluster's A100 pool is tainted nvidia.com/gpu=present:NoSchedule.
    template = {"name": "train", "nodeSelector": {"pool": "a100"},
                "container": {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                              "resources": {"limits": {"nvidia.com/gpu": 1}}}}
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"generateName": "train-"},
            "spec": {"entrypoint": "train", "templates": [template], **spec}}


def findings(obj: dict[str, Any], rule: str, facts: ClusterFacts | None = None) -> list[tuple[str, str]]:
    return [(f.path, f.message) for f in evaluate(obj, None, facts).findings if f.rule == rule]


def sample() -> ClusterFacts:
    return facts_from_objects(list(yaml.safe_load_all(sample_text())))


# --- resourceClaims: workflowpod.go, "the template level replacing the workflow level" -------------

def test_the_workflows_resource_claims_reach_every_template_that_declares_none() -> None:
    wf = load(CLAIMS)
    (pod,) = extract(wf)
    assert pod.spec["resourceClaims"] == wf["spec"]["resourceClaims"]
    assert pod.spec_origins == (("resourceClaims", "/spec/resourceClaims"),)
    assert findings(wf, "gpu-dra-claim-reference") == []


def test_a_templates_own_claims_replace_the_workflows() -> None:
    wf = load(OVERRIDE)
    default, other = extract(wf)
    assert default.spec["resourceClaims"] == wf["spec"]["resourceClaims"]
    assert other.spec["resourceClaims"] == wf["spec"]["templates"][2]["resourceClaims"]
    assert findings(wf, "gpu-dra-claim-reference") == []
    # The template's list replaces the workflow's outright: a claim named only there is undeclared.
    wf["spec"]["templates"][2]["container"]["resources"]["claims"].append({"name": "shared"})
    ((path, message),) = findings(wf, "gpu-dra-claim-reference")
    assert path == "/spec/templates/2/container/resources/claims/1/name"
    assert "(declared: accelerator)" in message
    # An empty list of its own inherits the workflow's (Argo's TestPodResourceClaims).
    wf = load(OVERRIDE)
    wf["spec"]["templates"][2]["resourceClaims"] = []
    assert extract(wf)[1].spec["resourceClaims"] == wf["spec"]["resourceClaims"]


def test_a_finding_on_an_inherited_claim_lands_where_the_claim_is_written() -> None:
    wf = load(CLAIMS)
    del wf["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    ((path, message),) = findings(wf, "gpu-dra-claim-reference")
    assert path == "/spec/resourceClaims/0"
    assert "sets neither resourceClaimName nor resourceClaimTemplateName" in message


def test_without_any_declaration_the_claim_is_undeclared() -> None:
    wf = load(CLAIMS)
    del wf["spec"]["resourceClaims"]
    ((path, message),) = findings(wf, "gpu-dra-claim-reference")
    assert path == "/spec/templates/0/container/resources/claims/0/name" and "(declared: none)" in message


def test_a_pod_spec_patch_may_declare_the_claims() -> None:
    wf = load(CLAIMS)
    del wf["spec"]["resourceClaims"]
    wf["spec"]["podSpecPatch"] = '{"resourceClaims": [{"name": "accelerator", "resourceClaimTemplateName": "t"}]}'
    assert findings(wf, "gpu-dra-claim-reference") == []
    (pod,) = extract(wf)
    assert pod.spec_patched and not pod.scheduling_known


# --- scheduling: addSchedulingConstraints ----------------------------------------------------------

def test_the_workflows_tolerations_count_for_a_gpu_template() -> None:
    facts = sample()
    bare = gpu_workflow()
    assert findings(bare, "gpu-taint-not-tolerated", facts)
    tolerated = gpu_workflow(tolerations=copy.deepcopy(TOLERATE_GPU))
    assert findings(tolerated, "gpu-taint-not-tolerated", facts) == []
    # A template's own tolerations replace the workflow's.
    own = gpu_workflow(tolerations=copy.deepcopy(TOLERATE_GPU))
    own["spec"]["templates"][0]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    assert findings(own, "gpu-taint-not-tolerated", facts)


def test_the_toleration_fix_goes_where_the_pods_tolerations_are_written() -> None:
    facts = sample()
    wf = gpu_workflow(tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}])
    ops = evaluate(wf, None, facts).patch(["gpu-taint-not-tolerated"])
    assert ops and all(op.path.startswith("/spec/tolerations/") for op in ops)
    fixed = jsonpatch.apply_patch(wf, [{"op": o.op, "path": o.path, "value": o.value} for o in ops])
    assert "tolerations" not in fixed["spec"]["templates"][0]
    assert findings(fixed, "gpu-taint-not-tolerated", facts) == []
    # Without tolerations anywhere the fix adds them to the template.
    ops = evaluate(gpu_workflow(), None, facts).patch(["gpu-taint-not-tolerated"])
    assert ops and all(op.path.startswith("/spec/templates/0/tolerations") for op in ops)


def test_the_workflows_node_selector_counts() -> None:
    facts = sample()
    wf = gpu_workflow(tolerations=copy.deepcopy(TOLERATE_GPU), nodeSelector={"pool": "no-such-pool"})
    del wf["spec"]["templates"][0]["nodeSelector"]
    ((path, _),) = findings(wf, "gpu-node-selector-mismatch", facts)
    assert path.startswith("/spec/nodeSelector")


# --- templateDefaults: a strategic merge under the template ---------------------------------------

def test_template_defaults_are_merged_under_the_template() -> None:
    defaults: dict[str, Any] = {
        "nodeSelector": {"pool": "gpu", "zone": "a"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "container": {"resources": {"limits": {"nvidia.com/gpu": 1, "memory": "8Gi"}},
                      "env": [{"name": "A", "value": "1"}]},
        "script": {"image": "never-used"},  # another template type's defaults are dropped
    }
    template: dict[str, Any] = {"name": "t", "nodeSelector": {"zone": "b"},
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "container": {"image": "cuda", "resources": {"limits": {"memory": "16Gi"}},
                              "env": [{"name": "B", "value": "2"}]}}
    merged = with_defaults(template, defaults)
    assert merged["nodeSelector"] == {"pool": "gpu", "zone": "b"}
    assert [t["key"] for t in merged["tolerations"]] == ["nvidia.com/gpu", "dedicated"]  # merged by key
    assert merged["container"]["resources"]["limits"] == {"nvidia.com/gpu": 1, "memory": "16Gi"}
    assert [e["name"] for e in merged["container"]["env"]] == ["A", "B"]  # merged by name
    assert "script" not in merged
    assert template["container"]["resources"]["limits"] == {"memory": "16Gi"}  # the input is left alone


def test_lists_without_a_merge_key_are_replaced() -> None:
    assert merge({"args": ["a", "b"]}, {"args": ["c"]}, {}) == {"args": ["c"]}
    assert merge({"args": ["a"]}, {"args": []}, {}) == {"args": ["a"]}  # empty: left out (omitempty)


def test_a_gpu_from_template_defaults_is_judged_with_the_template() -> None:
    wf = gpu_workflow(templateDefaults={"container": {"resources": {"limits": {"nvidia.com/gpu": "0.5"}}}})
    del wf["spec"]["templates"][0]["container"]["resources"]
    ((_, message),) = findings(wf, "gpu-whole-number")
    assert "0.5" in message


# --- podResources and podMetadata -----------------------------------------------------------------

def test_the_workflows_pod_resources_are_the_pods() -> None:
    wf = gpu_workflow(podResources={"limits": {"nvidia.com/gpu": 1}})
    (pod,) = extract(wf)
    assert pod.spec["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert "podResources" not in pod.spec
    paths = [p for p, _ in findings(wf, "gpu-whole-number")]
    assert paths and all(p.startswith("/spec/podResources") for p in paths)


def test_pod_metadata_annotations_reach_the_pod() -> None:
    facts = sample()
    wf = gpu_workflow(podMetadata={"annotations": {"gpuguard.io/ignore": "gpu-taint-not-tolerated"}})
    assert findings(wf, "gpu-taint-not-tolerated", facts) == []
    (pod,) = extract(wf)
    assert pod.annotations == {"gpuguard.io/ignore": "gpu-taint-not-tolerated"}
    wf["spec"]["templates"][0]["metadata"] = {"annotations": {"team": "ml"}}
    assert extract(wf)[0].annotations == {"gpuguard.io/ignore": "gpu-taint-not-tolerated", "team": "ml"}


def test_a_cron_workflow_reads_its_workflow_spec() -> None:
    wf = load(CLAIMS)
    cron = {"apiVersion": "argoproj.io/v1alpha1", "kind": "CronWorkflow", "metadata": {"name": "c"},
            "spec": {"schedules": ["0 * * * *"], "workflowSpec": wf["spec"]}}
    (pod,) = extract(cron)
    assert pod.spec_origins == (("resourceClaims", "/spec/workflowSpec/resourceClaims"),)
    assert findings(cron, "gpu-dra-claim-reference") == []


def test_a_problem_of_a_value_several_templates_inherit_is_said_once() -> None:
    wf = load(OVERRIDE)
    del wf["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    del wf["spec"]["templates"][2]["resourceClaims"]  # both templates now inherit the broken claim
    assert [p for p, _ in findings(wf, "gpu-dra-claim-reference")] == ["/spec/resourceClaims/0"]
