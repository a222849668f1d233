"""KServe's template merges (policies.kserve) and what extraction takes from them."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import evaluate
from policies.facts_build import facts_from_objects
from policies.kserve import (
    NO_VIEW,
    KServeView,
    kserve_objects,
    llm_bases,
    merge_maps,
    preset_names,
    runtime_bases,
    well_known_presets,
)
from policies.podspec import KSERVE_COMPONENT_KEYS, extract
from policies.types import Severity
from tests.support.paths import CORPUS, EXAMPLES

SHM = "gpu-shared-memory"
NIM = CORPUS / "real" / "NVIDIA__nim-deploy__kserve__nim-models__llama3-70b-instruct_4xh100_1.0.0.yaml"
NIM_RUNTIME = CORPUS / "kserve" / "NVIDIA__nim-deploy__kserve__runtimes__llama3-70b-instruct-1.0.0.yaml"
DEEPSEEK = CORPUS / "real" / (
    "kserve__kserve__docs__samples__llmisvc__dp-ep__deepseek-r1-gpu-rdma-roce__"
    "llm-inference-service-dp-ep-deepseek-r1-gpu-naive.yaml"
)


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


@pytest.mark.parametrize(("spec", "presets"), [
    ({}, ["config-llm-template"]),
    ({"worker": {}, "parallelism": {"data": 16, "dataLocal": 8}}, ["config-llm-worker-data-parallel"]),
    ({"worker": {}, "parallelism": {"dataLocal": 8}}, ["config-llm-worker-data-parallel"]),
    ({"worker": {}, "parallelism": {"pipeline": 2}}, ["config-llm-worker-pipeline-parallel"]),
    ({"worker": {}, "parallelism": {"pipeline": 2, "data": 2}}, ["config-llm-worker-data-parallel"]),  # data first
    ({"worker": {}, "parallelism": {"tensor": 8}}, []),  # a worker without data or pipeline parallelism
    ({"prefill": {}}, ["config-llm-prefill-template", "config-llm-decode-template"]),
    ({"prefill": {"worker": {}, "parallelism": {"data": 2}}, "worker": {}, "parallelism": {"data": 4}},
     ["config-llm-prefill-worker-data-parallel", "config-llm-decode-worker-data-parallel"]),
])
def test_the_presets_follow_the_deployment_pattern(spec: dict[str, Any], presets: list[str]) -> None:
    assert well_known_presets(spec) == presets


def test_every_shipped_preset_gives_main_a_memory_backed_dev_shm() -> None:
    doc = json.loads(resources.files("policies").joinpath("data", "kserve_llmisvc_presets.json").read_text())
    assert doc["source"]["repository"] == "kserve/kserve" and len(doc["source"]["commit"]) == 40
    assert set(preset_names()) == {
        "config-llm-template", "config-llm-worker-data-parallel", "config-llm-prefill-template",
        "config-llm-prefill-worker-data-parallel", "config-llm-decode-template",
        "config-llm-decode-worker-data-parallel",
    }
    for preset, entry in doc["presets"].items():
        for slot, pod in entry["slots"].items():
            (main,) = [c for c in pod["containers"] if c["name"] == "main"]
            (mount,) = [m for m in main["volumeMounts"] if m["mountPath"] == "/dev/shm"]
            (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
            assert volume["emptyDir"]["medium"] == "Memory", (preset, slot)


def test_a_config_named_like_a_preset_beside_the_service_replaces_it() -> None:
    service = {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
               "metadata": {"name": "s", "namespace": "team"},
               "spec": {"template": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}
    assert llm_bases(service, ("template",), NO_VIEW).mounts_of("main")
    own = {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceServiceConfig",
           "metadata": {"name": "kserve-config-llm-template", "namespace": "team"},
           "spec": {"template": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.10.1"}]}}}
    view = NO_VIEW.nearer(kserve_objects([own]))
    merged = llm_bases(service, ("template",), view)
    assert merged.sources == ("LLMInferenceServiceConfig kserve-config-llm-template",)
    assert merged.mounts_of("main") == ()
    (finding,) = [f for f in evaluate(service, kserve=view).findings if f.rule == SHM]
    assert finding.severity is Severity.WARNING and finding.fix
    # in another namespace it replaces nothing (KServe looks in the service's namespace, then kserve)
    elsewhere = {**own, "metadata": {"name": "kserve-config-llm-template", "namespace": "other"}}
    assert llm_bases(service, ("template",), NO_VIEW.nearer(kserve_objects([elsewhere]))).mounts_of("main")


def test_base_refs_are_merged_after_the_presets_and_decide_the_pattern() -> None:
    service = {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
               "metadata": {"name": "s", "namespace": "team"},
               "spec": {"baseRefs": [{"name": "multi-node"}], "template": {"containers": [{"name": "main"}]}}}
    ref = {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceServiceConfig",
           "metadata": {"name": "multi-node", "namespace": "team"},
           "spec": {"parallelism": {"data": 2}, "worker": {"containers": [{"name": "main"}]},
                    "template": {"nodeSelector": {"pool": "h100"}}}}
    view = NO_VIEW.nearer(kserve_objects([ref]))
    merged = llm_bases(service, ("template",), view)
    assert merged.sources == ("KServe's preset LLMInferenceServiceConfig kserve-config-llm-worker-data-parallel",
                              "LLMInferenceServiceConfig multi-node")
    assert merged.schedules  # the baseRef selects nodes: the template's scheduling is more than it says
    unseen = llm_bases(service, ("template",), NO_VIEW)
    assert unseen.unseen == ("LLMInferenceServiceConfig multi-node",)


def test_a_runtime_is_the_namespaces_then_the_clusters() -> None:
    namespaced = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
                  "metadata": {"name": "rt", "namespace": "team"}, "spec": {"containers": []}}
    cluster = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime",
               "metadata": {"name": "rt"}, "spec": {"containers": []}}
    view = NO_VIEW.nearer(kserve_objects([cluster, namespaced]))
    found = view.runtime("team", "rt")
    assert found is not None and found.label == "ServingRuntime rt"
    other = view.runtime("elsewhere", "rt")
    assert other is not None and other.label == "ClusterServingRuntime rt"
    assert view.runtime("team", "none") is None


def test_predictors_without_a_named_runtime_have_an_unseen_one() -> None:
    obj: dict[str, Any] = {"metadata": {}}
    assert runtime_bases(obj, {"containers": []}, NO_VIEW, KSERVE_COMPONENT_KEYS) is None
    sklearn = runtime_bases(obj, {"sklearn": {}}, NO_VIEW, KSERVE_COMPONENT_KEYS)
    assert sklearn is not None and sklearn.unseen == ("the ServingRuntime KServe selects for model format sklearn",)
    model = runtime_bases(obj, {"model": {"modelFormat": {"name": "vllm"}}}, NO_VIEW, KSERVE_COMPONENT_KEYS)
    assert model is not None and model.unseen == ("the ServingRuntime KServe selects for model format vllm",)


def test_merge_maps_lets_the_override_win_and_merges_maps() -> None:
    base = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
    assert merge_maps(base, {"name": "dshm", "emptyDir": {"sizeLimit": "4Gi"}}) == {
        "name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}}


def test_the_llm_inference_service_sample_gets_the_presets_dev_shm() -> None:
    doc = _load(DEEPSEEK)
    templates = extract(doc)
    assert [t.spec_pointer for t in templates] == ["/spec/template", "/spec/worker"]
    for t in templates:
        assert t.merged_from == ("KServe's preset LLMInferenceServiceConfig kserve-config-llm-worker-data-parallel",)
        (main,) = t.containers
        assert [m["mountPath"] for _, m in main.shared_mounts if m["mountPath"] == "/dev/shm"] == ["/dev/shm"]
    assert [f for f in evaluate(doc).findings if f.rule == SHM] == []


def test_an_inference_service_takes_its_runtime_from_the_input_or_the_cluster() -> None:
    isvc, runtime = _load(NIM), _load(NIM_RUNTIME)
    (alone,) = [f for f in evaluate(isvc).findings if f.rule == SHM]
    assert alone.severity is Severity.INFO and alone.fix == ()
    assert "ClusterServingRuntime nvidia-nim-llama3-70b-instruct-1.0.0, which gpuguard does not see" in alone.message
    view = KServeView((kserve_objects([runtime]),))
    assert [f for f in evaluate(isvc, kserve=view).findings if f.rule == SHM] == []
    snapshot = [*yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()), runtime]
    facts = facts_from_objects(snapshot)
    assert facts.kserve is not None
    assert [f for f in evaluate(isvc, None, facts).findings if f.rule == SHM] == []


def test_the_memo_tells_templates_apart_by_what_kserve_merges_under_them() -> None:
    # One snapshot, one config: the same InferenceService judged with and without its runtime in the
    # input gets each answer afresh (the merge is part of the template's memo key).
    isvc, runtime = _load(NIM), _load(NIM_RUNTIME)
    facts = facts_from_objects(list(yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text())))
    from policies.config import Config

    config = Config()
    with_runtime = KServeView((kserve_objects([runtime]),))
    assert [f for f in evaluate(isvc, config, facts, kserve=with_runtime).findings if f.rule == SHM] == []
    assert [f.severity for f in evaluate(isvc, config, facts).findings if f.rule == SHM] == [Severity.INFO]
    assert [f for f in evaluate(isvc, config, facts, kserve=with_runtime).findings if f.rule == SHM] == []


def test_a_runtime_that_selects_nodes_makes_the_predictors_scheduling_unknown() -> None:
    isvc, runtime = _load(NIM), _load(NIM_RUNTIME)
    runtime["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    view = KServeView((kserve_objects([runtime]),))
    (predictor,) = extract(isvc, kserve=view)
    assert not predictor.scheduling_known
    (plain,) = extract(isvc)
    assert plain.scheduling_known
