"""The kinds whose pods are not plain pod templates: Argo Workflows templates (containers next to
pod-level fields, inherited scheduling), KubeRay's own /dev/shm, Knative, Notebooks, Rollouts —
and that GPU pods in them get findings rather than silence."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from gpuguard.sources.snapshot import load_cluster_facts
from policies import ClusterFacts, evaluate
from policies.config import Config
from policies.podspec import extract
from policies.types import Severity
from tests.support.paths import FIXTURES

PODSPEC = FIXTURES / "podspec"
GPU = {"limits": {"nvidia.com/gpu": "2"}}


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((PODSPEC / name).read_text())
    return data


def rules_of(obj: dict[str, Any]) -> list[str]:
    return sorted(f.rule for f in evaluate(obj).findings)


def test_argo_template_containers_and_pod_fields() -> None:
    wf = load("workflow.yaml")
    script, container = extract(wf)
    assert [c.path for c in script.containers] == [("script",)]
    assert [c.path for c in container.containers] == [("container",)]
    assert script.shape == "argo" and script.runtime_expressions
    assert script.metadata_pointer == "/spec/templates/1/metadata"
    assert script.scheduling_known


def test_argo_container_set_shares_its_volume_mounts() -> None:
    (t,) = extract(load("workflow-containerset.yaml"))
    assert [c.path for c in t.containers] == [("containerSet", "containers", 0), ("containerSet", "containers", 1)]
    assert all(c.shared_mounts == ((("containerSet", "volumeMounts", 0), {"mountPath": "/workspace",
                                                                          "name": "workspace"}),)
               for c in t.containers)


def test_argo_templates_inherit_the_workflows_scheduling_and_volumes() -> None:
    # workflowpod.go addSchedulingConstraints: the workflow's tolerations apply to a template that
    # sets none; its own replace them; a podSpecPatch may change anything.
    wf = load("workflow.yaml")
    wf["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    wf["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    script, _ = extract(wf)
    assert script.scheduling_known
    assert script.spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert script.spec_origins == (("tolerations", "/spec/tolerations"),)
    assert script.inherited_volumes == ({"name": "dshm", "emptyDir": {"medium": "Memory"}},)
    assert "tolerations" not in wf["spec"]["templates"][1]  # the object itself is left as it is
    wf["spec"]["templates"][1]["tolerations"] = [{"key": "x", "operator": "Exists"}]
    own = extract(wf)[0]
    assert own.spec["tolerations"] == [{"key": "x", "operator": "Exists"}] and own.spec_origins == ()
    wf["spec"]["podSpecPatch"] = '{"containers": [{"name": "main"}]}'
    patched = extract(wf)[0]
    assert not patched.scheduling_known and patched.spec_patched


def test_a_steps_template_that_sets_scheduling_makes_it_unknown_for_the_templates_it_may_call() -> None:
    wf = load("workflow.yaml")
    steps = next(t for t in wf["spec"]["templates"] if "steps" in t)
    steps["nodeSelector"] = {"pool": "gpu"}
    script, container = extract(wf)
    assert not script.scheduling_known and not container.scheduling_known
    wf["spec"]["templates"][1]["nodeSelector"] = {"pool": "cpu"}  # its own wins over the boundary's
    assert extract(wf)[0].scheduling_known


def gpu_workflow() -> dict[str, Any]:
    wf = load("workflow-containerset.yaml")
    for c in wf["spec"]["templates"][0]["containerSet"]["containers"]:
        c["resources"] = copy.deepcopy(GPU)
    return wf


def test_gpu_workflow_is_judged_not_silent() -> None:
    wf = gpu_workflow()
    assert evaluate(wf).gpu_related
    assert "gpu-shared-memory" in rules_of(wf)
    # A memory-backed /dev/shm shared by the containerSet satisfies every container.
    template = wf["spec"]["templates"][0]
    template["volumes"].append({"name": "dshm", "emptyDir": {"medium": "Memory"}})
    template["containerSet"]["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
    assert "gpu-shared-memory" not in rules_of(wf)


def test_argo_parameters_in_quantities_are_not_errors() -> None:
    wf = load("workflowtemplate.yaml")
    wf["spec"]["templates"][0]["container"]["resources"] = {"limits": {"nvidia.com/gpu": "{{inputs.parameters.gpus}}"}}
    ev = evaluate(wf)
    assert ev.gpu_related and ev.placeholders == []
    assert not [f for f in ev.findings if f.severity is Severity.ERROR]


def test_argo_workflow_volumes_count_for_shared_memory() -> None:
    wf = gpu_workflow()
    wf["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    wf["spec"]["templates"][0]["containerSet"]["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
    assert "gpu-shared-memory" not in rules_of(wf)
    wf["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {}}]
    (finding,) = [f for f in evaluate(wf).findings if f.rule == "gpu-shared-memory"][:1]
    assert "disk-backed" in finding.message and finding.fix == ()  # the workflow's volume is not patched


def test_kuberay_provides_dev_shm_to_the_ray_container_only() -> None:
    rc = load("raycluster.yaml")
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = copy.deepcopy(GPU)
    _, worker = extract(rc)
    assert worker.shm_provided == (("containers", 0),)
    assert "gpu-shared-memory" not in rules_of(rc)
    sidecar = {"name": "sidecar", "image": "x", "resources": copy.deepcopy(GPU)}
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"].append(sidecar)
    paths = [f.path for f in evaluate(rc).findings if f.rule == "gpu-shared-memory"]
    assert paths == ["/spec/workerGroupSpecs/0/template/spec/containers/1"]
    rc["spec"]["workerGroupSpecs"][0]["rayStartParams"]["plasma-directory"] = "/tmp"
    assert len([f for f in evaluate(rc).findings if f.rule == "gpu-shared-memory"]) == 2


def test_new_kinds_with_gpu_pods_get_findings() -> None:
    cases: dict[str, tuple[str, list[str | int]]] = {
        "rollout.yaml": ("/spec/template/spec/containers/0", ["spec", "template", "spec", "containers", 0]),
        "knative-service.yaml": ("/spec/template/spec/containers/0", ["spec", "template", "spec", "containers", 0]),
        "knative-configuration.yaml": ("", ["spec", "template", "spec", "containers", 0]),
        "notebook.yaml": ("", ["spec", "template", "spec", "containers", 0]),
        "cronworkflow.yaml": ("", ["spec", "workflowSpec", "templates", 0, "container"]),
    }
    for name, (_, path) in cases.items():
        obj = load(name)
        node: Any = obj
        for segment in path:
            node = node[segment]
        node["resources"] = {"requests": {"nvidia.com/gpu": "1"}}  # no limit: the API server rejects it
        assert "gpu-limit-missing" in rules_of(obj), name
    revision = load("knative-revision.yaml")
    assert evaluate(revision).gpu_related


def _trainer_runtime(kind: str = "ClusterTrainingRuntime", **mpi: Any) -> dict[str, Any]:
    """A Kubeflow Trainer runtime as kubeflow/trainer ships them (manifests/base/runtimes): NGC JAX
    image (NVIDIA_VISIBLE_DEVICES=all), no resources, plus a sidecar the TrainJob does not touch."""
    ngc = "nvcr.io/nvidia/jax:25.10-py3"
    containers = [{"name": "node", "image": ngc}, {"name": "launcher", "image": ngc},
                  {"name": "sidecar", "image": ngc}]
    ml_policy: dict[str, Any] = {"numNodes": 1, "mpi": mpi} if mpi else {"numNodes": 1, "jax": {}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": {"name": "jax-distributed"},
        "spec": {"mlPolicy": ml_policy, "template": {"spec": {"replicatedJobs": [{
            "name": "node",
            "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                         "spec": {"template": {"spec": {"containers": containers}}}},
        }]}}},
    }


def _bypassed(obj: dict[str, Any], facts: ClusterFacts | None = None, config: Config | None = None) -> list[str]:
    return sorted(
        f.path.split("/containers/")[1].split("/")[0]
        for f in evaluate(obj, config, facts).findings if f.rule == "gpu-device-access-bypass"
    )


def test_trainer_runtime_node_containers_get_image_and_gpus_from_the_trainjob() -> None:
    # kubeflow/trainer pkg/runtime/framework/plugins/jobset/builder.go (Builder.Trainer): containers
    # named "node" get the TrainJob's image and resourcesPerNode; "launcher" only with runLauncherAsNode.
    for kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
        obj = _trainer_runtime(kind)
        (template,) = extract(obj)
        assert template.owner_supplied == (("containers", 0),)
        assert _bypassed(obj) == ["1", "2"]
    as_node = _trainer_runtime(runLauncherAsNode=True)
    assert extract(as_node)[0].owner_supplied == (("containers", 0), ("containers", 1))
    assert _bypassed(as_node) == ["2"]
    assert _bypassed(_trainer_runtime(runLauncherAsNode=False)) == ["1", "2"]


def test_trainer_runtimes_differing_only_in_the_launcher_policy_are_judged_apart() -> None:
    """The memo key carries what the extractor took from mlPolicy (one warm snapshot, both orders)."""
    plain, as_node = _trainer_runtime(runLauncherAsNode=False), _trainer_runtime(runLauncherAsNode=True)
    for first, second, expected in ((plain, as_node, ["2"]), (as_node, plain, ["1", "2"])):
        facts, config = load_cluster_facts("sample"), Config()
        evaluate(copy.deepcopy(first), config, facts)
        assert _bypassed(copy.deepcopy(second), facts, config) == expected
