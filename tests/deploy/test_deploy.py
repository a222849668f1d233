"""The manifests in deploy/: valid objects, webhook rules that match the extractor's table, and
matchConditions (evaluated with a CEL interpreter) that select exactly the GPU workloads."""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.cli import main as gpuguard
from gpuguard.sources.configmodel import load_config
from policies.dra.objects import CLAIM_RESOURCES, SERVED_VERSIONS
from policies.podspec import WORKLOADS, Workload, extract
from tests.support.paths import ROOT, load_yaml_docs
from tests.support.sweeps import sweep

DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.33.0"
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


KUSTOMIZATION = load_yaml_docs(DEPLOY / "kustomization.yaml")[0]


def generated_config_maps() -> list[dict[str, Any]]:
    """The ConfigMaps of configMapGenerator, as kustomize builds them (minus the name hash)."""
    maps = []
    for gen in KUSTOMIZATION.get("configMapGenerator", []):
        data = {}
        for entry in gen["files"]:
            key, _, path = entry.partition("=")
            data[key] = (DEPLOY / path).read_text()
        meta = {"name": gen["name"], "namespace": gen["namespace"], "labels": gen.get("options", {}).get("labels", {})}
        maps.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    return maps


def deploy_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name in KUSTOMIZATION["resources"]:
        docs.extend(load_yaml_docs(DEPLOY / name))
    return docs + generated_config_maps()


DOCS = deploy_docs()


def one(kind: str) -> dict[str, Any]:
    found = [d for d in DOCS if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def webhooks() -> list[tuple[str, dict[str, Any]]]:
    return [(d["kind"], w) for d in DOCS if d["kind"] in WEBHOOK_KINDS for w in d["webhooks"]]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_webhooks", DEPLOY / "generate_webhooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_webhooks_yaml_is_generated_from_the_extractor_table() -> None:
    on_disk = (DEPLOY / "webhooks.yaml").read_text()
    without_ca = "".join(line for line in on_disk.splitlines(keepends=True) if "caBundle:" not in line)
    assert without_ca == _generator().render(), "run: python deploy/generate_webhooks.py"


def test_kustomization_lists_every_manifest() -> None:
    listed = set(KUSTOMIZATION["resources"])
    generated = {e.partition("=")[2] for g in KUSTOMIZATION["configMapGenerator"] for e in g["files"]}
    on_disk = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed | generated == on_disk


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_manifest_is_a_valid_kubernetes_object(doc: dict[str, Any]) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_rbac_reads_only_cluster_facts() -> None:
    role = one("ClusterRole")
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    expected = {
        (group, resource, verb)
        for group, resource in (
            ("", "nodes"), ("node.k8s.io", "runtimeclasses"), ("karpenter.sh", "nodepools"),
            *(("resource.k8s.io", r) for r in ("deviceclasses", "resourceslices", "resourceclaims",
                                                "resourceclaimtemplates")),
            # the whole-job rules: webhook/live_facts.py RESOURCE_QUOTAS and KUEUE_RESOURCES
            ("", "resourcequotas"),
            *(("kueue.x-k8s.io", r) for r in ("localqueues", "clusterqueues", "resourceflavors", "cohorts")),
            # what KServe merges under its pods: webhook/live_facts.py KSERVE_RESOURCES
            *(("serving.kserve.io", r) for r in ("servingruntimes", "clusterservingruntimes",
                                                  "llminferenceserviceconfigs")),
        )
        for verb in ("get", "list", "watch")
    }
    assert granted == expected
    binding = one("ClusterRoleBinding")
    account = one("ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": account["metadata"]["namespace"]}
    ]
    assert one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


def test_rbac_grants_what_the_live_facts_watch() -> None:
    """Every resource webhook/live_facts.py runs a reflector for is granted get/list/watch."""
    from webhook.live_facts import WATCHED

    groups = {"CoreV1Api": "", "NodeV1Api": "node.k8s.io"}
    granted = {(group, resource, verb) for rule in one("ClusterRole")["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    for resource in WATCHED:
        group = dict(resource.arguments).get("group", groups.get(resource.api))
        assert group is not None, resource.name
        for verb in ("get", "list", "watch"):
            assert (group, resource.name, verb) in granted, (group, resource.name, verb)


def test_policy_config_is_valid() -> None:
    from gpuguard.sources.yamlsafe import load_all_plain

    text = one("ConfigMap")["data"][".gpuguard.yaml"]
    (raw,) = list(load_all_plain(text, ".gpuguard.yaml"))
    config = load_config(raw)
    assert config.mutate == ("gpu-limit-missing", "gpu-taint-not-tolerated")
    assert config.failure_mode == "allow"
    assert config.enforcement == "warn"  # a first install warns; the README says when to enforce
    assert config.exempt_namespaces == load_config(None).exempt_namespaces  # the GPU infrastructure too
    assert not config.mutate_templates


def test_deployment_is_highly_available_and_restricted() -> None:
    deployment = one("Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] >= 2
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    spread = pod.get("topologySpreadConstraints", [])
    assert any(c["topologyKey"] == "kubernetes.io/hostname" for c in spread) or "podAntiAffinity" in pod.get(
        "affinity", {}
    )
    pdb = one("PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()

    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"]["path"] == path
        # Probes go to the plain-HTTP health port, so --client-ca can guard the webhook port.
        assert container[probe]["httpGet"]["scheme"] == "HTTP"
        assert container[probe]["httpGet"]["port"] == "health"
    assert ports["health"] == 8081 and ports["https"] == 8443

    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "gpuguard-tls"
    assert mounts["tls"] == "/tls"
    assert volumes["config"]["configMap"]["name"] == one("ConfigMap")["metadata"]["name"]
    assert mounts["config"] == "/config"
    assert container["args"] == [
        "serve", "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key",
        "--config", "/config/.gpuguard.yaml", "--in-cluster", "--health-port", "8081", "--review-deadline", "4",
    ]
    # A review is answered before the API server gives up on it (which would admit it unchecked).
    assert all(float(container["args"][-1]) < w["timeoutSeconds"] for _, w in webhooks())


def test_deployment_args_parse_with_the_serve_command() -> None:
    from gpuguard.cli import build_parser

    args = build_parser().parse_args(one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])
    assert args.command == "serve"
    assert args.in_cluster is True
    assert args.port == 8443
    assert args.health_port == 8081


def test_service_targets_the_webhook_port() -> None:
    service = one("Service")
    (port,) = service["spec"]["ports"]
    container = one("Deployment")["spec"]["template"]["spec"]["containers"][0]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port["port"] == 443
    assert named[port["targetPort"]] == 8443
    labels = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


@pytest.mark.parametrize(("kind", "webhook"), webhooks(), ids=lambda x: x if isinstance(x, str) else x["name"])
def test_webhook_settings(kind: str, webhook: dict[str, Any]) -> None:
    service = one("Service")
    ref = webhook["clientConfig"]["service"]
    assert (ref["name"], ref["namespace"], ref["port"]) == (
        service["metadata"]["name"], service["metadata"]["namespace"], 443
    )
    assert ref["path"] == ("/mutate" if kind == "MutatingWebhookConfiguration" else "/validate")
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["sideEffects"] == "None"
    assert 1 <= webhook["timeoutSeconds"] <= 10
    assert webhook["failurePolicy"] in ("Ignore", "Fail")
    if kind == "MutatingWebhookConfiguration":
        assert webhook["failurePolicy"] == "Ignore"
        assert webhook["reinvocationPolicy"] == "IfNeeded"
    label, expr = webhook["namespaceSelector"]["matchExpressions"]
    # Namespaces an administrator labels gpuguard.io/exempt=true never reach the webhook.
    assert label == {"key": "gpuguard.io/exempt", "operator": "NotIn", "values": ["true"]}
    assert expr["key"] == "kubernetes.io/metadata.name"
    assert expr["operator"] == "NotIn"
    # By name, only namespaces no tenant can create: the system's and gpuguard's own.
    assert set(expr["values"]) == {"kube-system", service["metadata"]["namespace"]}
    config_map = one("ConfigMap")["data"][".gpuguard.yaml"]
    policy = load_config(yaml.safe_load(config_map))
    assert set(expr["values"]) == set(policy.exempt_namespaces)
    # The shipped policy trusts no namespace by name and lets no annotation skip the allocation guard.
    assert policy.settings("gpu-device-access-bypass").options["infrastructureNamespaces"] == []
    assert policy.ignore_annotation is False and not policy.ignore_rules
    assert len(webhook["matchConditions"]) <= 64


@pytest.mark.parametrize(("kind", "webhook"), webhooks(), ids=lambda x: x if isinstance(x, str) else x["name"])
def test_webhook_rules_cover_exactly_the_extractor_kinds(kind: str, webhook: dict[str, Any]) -> None:
    covered: dict[tuple[str, str], set[str]] = {}
    for rule in webhook["rules"]:
        assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                covered.setdefault((group, resource), set()).update(rule["apiVersions"])
    expected = {(w.group, w.resource): set(w.versions) for w in WORKLOADS}
    expected[("", "pods/ephemeralcontainers")] = {"v1"}  # kubectl debug: see webhook/admission.py
    for _, plural in CLAIM_RESOURCES:  # DRA claims are judged as objects
        expected[("resource.k8s.io", plural)] = set(SERVED_VERSIONS)
    assert covered == expected


# The parents of gangs (policies/gangs.py): their CREATE must reach /validate for the whole-job rules.
GANG_PARENTS = (("kubeflow.org", "pytorchjobs", "v1"), ("kubeflow.org", "tfjobs", "v1"),
                ("kubeflow.org", "mpijobs", "v2beta1"), ("kubeflow.org", "jaxjobs", "v1"),
                ("trainer.kubeflow.org", "trainjobs", "v1alpha1"), ("jobset.x-k8s.io", "jobsets", "v1alpha2"),
                ("leaderworkerset.x-k8s.io", "leaderworkersets", "v1"), ("batch.volcano.sh", "jobs", "v1alpha1"),
                ("ray.io", "rayclusters", "v1"), ("batch", "jobs", "v1"))


@pytest.mark.parametrize(("group", "resource", "version"), GANG_PARENTS)
def test_the_validating_webhook_is_sent_the_create_of_every_gang_parent(group: str, resource: str,
                                                                        version: str) -> None:
    (validating,) = [w for kind, w in webhooks() if kind == "ValidatingWebhookConfiguration"]
    assert any(group in r["apiGroups"] and resource in r["resources"] and version in r["apiVersions"]
               and "CREATE" in r["operations"] for r in validating["rules"])


def test_both_webhooks_select_the_same_objects() -> None:
    (_, mutating), (_, validating) = sorted(webhooks(), key=lambda kw: kw[0])
    for key in ("rules", "matchConditions", "namespaceSelector"):
        assert mutating[key] == validating[key], key


# --- matchConditions, evaluated as the API server does ---------------------------------------

GPU = {"limits": {"nvidia.com/gpu": "1"}}


def container(name: str = "main", resources: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.example.com/ml/trainer:1.0", **extra}
    if resources is not None:
        c["resources"] = copy.deepcopy(dict(resources))
    return c


def pod_spec(*containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"containers": list(containers) or [container()], **extra}


def template(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}}, "spec": spec}


def obj(api_version: str, kind: str, spec: Any, **top: Any) -> dict[str, Any]:
    o: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "ml"}}
    if spec is not None:
        o["spec"] = spec
    o.update(top)
    return o


def gpu_fixtures() -> dict[str, dict[str, Any]]:
    gpu_pod = pod_spec(container(resources=GPU))
    return {
        "pod": obj("v1", "Pod", gpu_pod),
        "pod-amd-request": obj("v1", "Pod", pod_spec(container(resources={"requests": {"amd.com/gpu": "1"}}))),
        "pod-intel-init": obj("v1", "Pod", pod_spec(
            container(), initContainers=[container("init", {"limits": {"gpu.intel.com/i915": "1"}})]
        )),
        "pod-mig": obj("v1", "Pod", pod_spec(container(resources={"limits": {"nvidia.com/mig-1g.10gb": "1"}}))),
        "deployment": obj("apps/v1", "Deployment", {
            "replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template(gpu_pod),
        }),
        "cronjob": obj("batch/v1", "CronJob", {
            "schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template(gpu_pod)}},
        }),
        "pytorchjob": obj("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template(pod_spec(container()))},
            "Worker": {"replicas": 2, "template": template(gpu_pod)},
        }}),
        # the parents of gangs the whole-job rules judge at CREATE (tests/webhook/test_whole_job_admission.py)
        "jobset": obj("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": [{"name": "workers", "replicas": 2,
                      "template": {"spec": {"parallelism": 7, "completions": 7, "template": template(gpu_pod)}}}]}),
        "leaderworkerset": obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"replicas": 1,
                               "leaderWorkerTemplate": {"size": 14, "workerTemplate": template(gpu_pod)}}),
        "job-kueue-queued": {**obj("batch/v1", "Job", {"parallelism": 4, "completions": 4, "suspend": True,
                                                        "template": template(gpu_pod)}),
                             "metadata": {"name": "x", "namespace": "ml",
                                          "labels": {"kueue.x-k8s.io/queue-name": "team-a"}}},
        "mpijob": obj("kubeflow.org/v2beta1", "MPIJob", {"mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": template(pod_spec(container()))},
            "Worker": {"replicas": 4, "template": template(gpu_pod)},
        }}),
        "raycluster-gpu-worker": obj("ray.io/v1", "RayCluster", {
            "headGroupSpec": {"rayStartParams": {}, "template": template(pod_spec(container("ray-head")))},
            "workerGroupSpecs": [
                {"groupName": "cpu", "template": template(pod_spec(container("w")))},
                {"groupName": "gpu", "template": template(pod_spec(container("w", GPU)))},
            ],
        }),
        "inferenceservice-model": obj("serving.kserve.io/v1beta1", "InferenceService", {"predictor": {
            "model": {"modelFormat": {"name": "huggingface"}, "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        }}),
        "pod-env-only": obj("v1", "Pod", pod_spec(container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]))),
        "pod-hostpath-nvidia0": obj("v1", "Pod", pod_spec(
            container(volumeMounts=[{"name": "dev", "mountPath": "/dev/nvidia0"}]),
            volumes=[{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}],
        )),
        "pod-hostpath-nvidia0-unnormalised": obj("v1", "Pod", pod_spec(
            container(), volumes=[{"name": "dev", "hostPath": {"path": "//dev/./nvidia0"}}]
        )),
        "pod-hostpath-dri": obj("v1", "Pod", pod_spec(
            container(), volumes=[{"name": "dri", "hostPath": {"path": "/dev/dri", "type": "Directory"}}]
        )),
        "pod-dra-claim": obj("v1", "Pod", pod_spec(
            container(resources={"claims": [{"name": "gpu"}]}),
            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
        )),
        "trainjob": obj("trainer.kubeflow.org/v1alpha1", "TrainJob", {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}},
        }),
        "nimservice": obj("apps.nvidia.com/v1alpha1", "NIMService", {
            "image": {"repository": "nvcr.io/nim/meta/llama3-8b-instruct", "tag": "1.0.0"},
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }),
        "kaito-workspace": obj("kaito.sh/v1beta1", "Workspace", None, inference={"template": template(gpu_pod)}),
        "katib-experiment": obj("kubeflow.org/v1beta1", "Experiment", {"trialTemplate": {"trialSpec": obj(
            "batch/v1", "Job", {"template": template(pod_spec(container(resources=GPU)))}
        )}}),
        # NVIDIA/k8s-dra-driver-gpu demo/specs/quickstart/v1/gpu-test1.yaml and gpu-test3.yaml
        "resourceclaimtemplate": obj("resource.k8s.io/v1", "ResourceClaimTemplate", {"spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}),
        "resourceclaim": obj("resource.k8s.io/v1", "ResourceClaim", {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}),
        "resourceclaim-v1beta1": obj("resource.k8s.io/v1beta1", "ResourceClaim", {"devices": {
            "requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}}),
    }


def non_gpu_fixtures() -> dict[str, dict[str, Any]]:
    nginx = pod_spec(container("nginx", {"limits": {"cpu": "500m", "memory": "128Mi"}}, image="nginx:1.27"))
    return {
        "nginx-deployment": obj("apps/v1", "Deployment", {
            "replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template(nginx),
        }),
        "plain-pod": obj("v1", "Pod", pod_spec(container("app", {"requests": {"cpu": "1"}}))),
        "pod-other-extended-resource": obj("v1", "Pod", pod_spec(
            container(resources={"limits": {"example.com/fpga": "1", "hugepages-2Mi": "1Gi"}})
        )),
        "pod-driver-capabilities-only": obj("v1", "Pod", pod_spec(
            container(env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}])
        )),
        "pod-unrelated-env-and-hostpath": obj("v1", "Pod", pod_spec(
            container(env=[{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]),
            volumes=[{"name": "logs", "hostPath": {"path": "/var/log"}}],
        )),
        "cpu-pytorchjob": obj("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": {
            "Worker": {"replicas": 2, "template": template(pod_spec(container()))},
        }}),
        "empty-deployment": obj("apps/v1", "Deployment", {}),
        "no-spec": obj("v1", "Pod", None),
        "configmap": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}},
        "resourceclaim-other-group": obj("example.com/v1", "ResourceClaim", {"devices": {}}),
    }


class MatchConditions:
    """A webhook's matchConditions with the API server's combination rules."""

    def __init__(self, webhook: Mapping[str, Any]) -> None:
        import celpy

        self._celpy = celpy
        env = celpy.Environment()
        self.programs = [(c["name"], env.program(env.compile(c["expression"]))) for c in webhook["matchConditions"]]

    def decide(self, operation: str, new: Any, old: Any = None) -> bool | None:
        """True: call the webhook; False: skip it; None: an evaluation error (failurePolicy decides).

        Any false condition skips the webhook even if another one errors."""
        celpy = self._celpy
        activation = {
            "object": celpy.json_to_cel(new),
            "oldObject": celpy.json_to_cel(old),
            "request": celpy.json_to_cel({"operation": operation, "namespace": "ml", "name": "x"}),
        }
        errored = False
        for _, program in self.programs:
            try:
                result = program.evaluate(activation)
            except celpy.CELEvalError:
                errored = True
                continue
            if isinstance(result, celpy.CELEvalError):
                errored = True
            elif not bool(result):
                return False
        return None if errored else True


@pytest.fixture(scope="module", params=[k for k, _ in webhooks()])
def conditions(request: pytest.FixtureRequest) -> MatchConditions:
    return MatchConditions(next(w for k, w in webhooks() if k == request.param))


# Each evaluation costs cel-python's interpreter ~30 ms: the quick subset keeps one case of each path
# family (containers of a pod, a template, a CRD's replica map, a DRA claim, a device hostPath).
@pytest.mark.parametrize("name", sweep(sorted(gpu_fixtures()), quick=(
    "pod", "deployment", "pytorchjob", "resourceclaim", "pod-hostpath-nvidia0", "pod-env-only")))
def test_match_conditions_select_gpu_objects(conditions: MatchConditions, name: str) -> None:
    new = gpu_fixtures()[name]
    assert conditions.decide("CREATE", new) is True
    assert conditions.decide("UPDATE", new, old=new) is True


@pytest.mark.parametrize("name", sweep(sorted(non_gpu_fixtures()), quick=(
    "plain-pod", "cpu-pytorchjob", "pod-unrelated-env-and-hostpath", "no-spec")))
def test_match_conditions_skip_other_objects(conditions: MatchConditions, name: str) -> None:
    assert conditions.decide("CREATE", non_gpu_fixtures()[name]) is False


def test_match_conditions_skip_delete(conditions: MatchConditions) -> None:
    old = gpu_fixtures()["pod"]
    assert conditions.decide("DELETE", None, old=old) is False


def _fill(pattern: tuple[str, ...], leaf: Any, over: str | None) -> Any:
    """A minimal object shape with ``leaf`` at ``pattern`` (``*`` becomes a map key or list item,
    as the table declares; tests/policies/test_podspec.py checks the declarations on real objects)."""
    if not pattern:
        return leaf
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        raise AssertionError("a wildcard must follow a named key")
    child = _fill(rest[1:], leaf, over) if rest and rest[0] == "*" else _fill(rest, leaf, over)
    if rest and rest[0] == "*":
        return {head: [child] if over == "list" else {"Worker": child}}
    return {head: child}



def synthesized(workload: Workload, gpu: bool) -> list[dict[str, Any]]:
    """One object per template location of ``workload``, with or without a GPU container there."""
    resources = {"limits": {"nvidia.com/gpu": "1"}} if gpu else {"limits": {"cpu": "1"}}
    api_version = f"{workload.group}/{workload.versions[0]}" if workload.group else workload.versions[0]
    objects = []
    for location in workload.locations:
        if location.shape == "template":
            leaf: Any = template(pod_spec(container(resources=resources)))
        elif location.shape == "podspec":
            leaf = pod_spec(container(resources=resources))
        elif location.shape == "component":
            leaf = {"image": "x", location.resources_key: resources}
        elif location.shape == "argo":  # an Argo Workflows template running one container
            leaf = {"name": "t", "container": {"image": "x", "resources": copy.deepcopy(resources)}}
        else:  # an embedded object: a Job inside
            leaf = obj("batch/v1", "Job", {"template": template(pod_spec(container(resources=resources)))})
        body = _fill(location.pattern, leaf, location.wildcard)
        if location.pattern == ():
            body = {"spec": leaf["spec"]}
        o = {"apiVersion": api_version, "kind": workload.kind, "metadata": {"name": "x", "namespace": "ml"}}
        o.update(copy.deepcopy(body) if isinstance(body, dict) else {})
        objects.append(o)
    return objects


@pytest.mark.slow  # a sweep over every location of every kind, through the CEL interpreter
@pytest.mark.parametrize(
    ("workload", "index"),
    [(w, i) for w in WORKLOADS for i in range(len(w.locations))],
    ids=lambda x: x.kind if isinstance(x, Workload) else str(x),
)
def test_match_conditions_cover_every_extractor_location(
    conditions: MatchConditions, workload: Workload, index: int
) -> None:
    gpu_obj = synthesized(workload, gpu=True)[index]
    templates = extract(gpu_obj)
    # the synthesized object really has the template where the extractor looks
    assert templates and any(
        "nvidia.com/gpu" in c.resource_map("limits") for t in templates for c in t.containers
    ), gpu_obj
    assert conditions.decide("CREATE", gpu_obj) is True
    if workload.kind != "Experiment":  # every Experiment with a trial spec is sent on purpose
        assert conditions.decide("CREATE", synthesized(workload, gpu=False)[index]) is False


def test_gpuguard_lint_passes_on_deploy(capsys: pytest.CaptureFixture[str]) -> None:
    # The kustomize manifests and components; the Helm chart is linted rendered (test_helm_chart.py).
    manifests = [str(p) for p in sorted(DEPLOY.glob("*.yaml"))]
    assert gpuguard(["lint", *manifests, str(DEPLOY / "components")]) == 0
    out = capsys.readouterr().out
    assert "0 errors" in out


def test_readme_install_section_names_real_commands() -> None:
    text = (DEPLOY.parent / "README.md").read_text().split("## Install the admission webhook", 1)[1]
    for needle in ("gpuguard certs", "--inject deploy/webhooks.yaml", "kubectl create secret tls gpuguard-tls",
                   "kubectl apply -k deploy/"):
        assert needle in text
    assert Path(DEPLOY / "webhooks.yaml").is_file()


def test_dockerfile_matches_the_deployment() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    pod = one("Deployment")["spec"]["template"]["spec"]
    user = f'{pod["securityContext"]["runAsUser"]}:{pod["securityContext"]["runAsGroup"]}'
    assert f"USER {user}" in dockerfile
    (container,) = pod["containers"]
    assert container["command"] == ["gpuguard"] and 'ENTRYPOINT ["gpuguard"]' in dockerfile
    assert container["image"].startswith("ghcr.io/gpuguard/gpuguard:")  # its tag: tests/deploy/test_lock_and_image.py
    for package in ("gpuguard", "policies", "linter", "webhook", "certs", "audit", "whypending"):
        assert f"COPY {package} ./{package}" in dockerfile


def test_match_conditions_skip_objects_being_deleted(conditions: MatchConditions) -> None:
    new = copy.deepcopy(gpu_fixtures()["pod"])
    old = copy.deepcopy(new)
    old["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    for obj in (new, old):
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T09:15:00Z"
    assert conditions.decide("UPDATE", new, old=old) is False
    alive = gpu_fixtures()["pod"]
    assert conditions.decide("UPDATE", alive, old=old) is False  # the old one is terminating
    assert conditions.decide("UPDATE", alive, old=alive) is True


def test_debug_containers_reach_the_webhook() -> None:
    for _, webhook in webhooks():
        pods = [r for r in webhook["rules"] if r["apiGroups"] == [""] and "pods" in r["resources"]]
        assert pods and "pods/ephemeralcontainers" in pods[0]["resources"]
