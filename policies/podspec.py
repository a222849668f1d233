"""Table-driven extraction of every pod spec embedded in a Kubernetes object.

Each entry of ``WORKLOADS`` names an API group, kind, plural resource and served versions, and
where its pod templates live.  Locations are pointer patterns where ``*`` matches any map key or
list index.  Four shapes exist:

* ``template``  – an object with ``metadata`` and ``spec`` (a PodTemplateSpec);
* ``podspec``   – a PodSpec-like object whose metadata is the owning object's metadata
  (KServe predictors, LLMInferenceService templates);
* ``component`` – a single container-like object with its own resources key (TrainJob trainer,
  NIMService), whose scheduling fields are not known statically;
* ``object``    – an embedded whole Kubernetes object, extracted recursively (Katib trialSpec);
* ``argo``      – an Argo Workflows template: pod-level fields (``nodeSelector``, ``tolerations``,
  ``affinity``, ``volumes``, ``metadata``) next to the containers of the one pod it runs —
  ``container``, ``script`` (a container plus its source) or ``containerSet.containers``, with
  ``initContainers`` and ``sidecars`` (argoproj/argo-workflows pkg/apis/workflow/v1alpha1
  workflow_types.go ``Template``).  Templates of other types (steps, dag, resource, suspend…)
  run no user pod and yield nothing.  A template is judged as the pod the controller builds from
  it (policies.argo): ``templateDefaults`` merged in, then what the workflow spec supplies where
  the template is silent (``nodeSelector``, ``affinity``, ``tolerations``, ``resourceClaims``,
  ``podResources``, ``podMetadata``…), each inherited value keeping the pointer of where it is
  written (``spec_origins``); the workflow's ``volumes`` are available to every pod
  (``inherited_volumes``).  ``podSpecPatch`` can change anything (``spec_patched``, unknown
  scheduling).

The webhook configuration in ``deploy/`` is tested against this table, so adding a kind here
and forgetting the webhook rules fails the suite.

Sources for the paths: upstream CRD schemas/examples in tests/corpus/real (see SOURCES.tsv)
and the projects' API types (kubeflow/trainer, ray-project/kuberay, kubernetes-sigs/jobset,
kubernetes-sigs/lws, kserve/kserve, volcano-sh/volcano, kubeflow/katib).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from policies import pointer
from policies.argo import POD_TYPES, argo_pod, template_type
from policies.digest import DERIVED
from policies.kserve import NO_VIEW, RUNTIME_CONTAINER, KServeView, Merged, llm_bases, runtime_bases
from policies.mpi_launch import MpiLaunch, launch_of
from policies.shapes import as_dict, as_list, index_of, small_int, text
from policies.types import RelPath, Segment

Shape = Literal["template", "podspec", "component", "object", "argo"]
ContainerKind = Literal["container", "initContainer", "ephemeralContainer", "component"]
# What a ``*`` in a location pattern runs over, from the CRD schemas: a list (RayCluster
# ``workerGroupSpecs``, JobSet ``replicatedJobs``, Volcano ``tasks``) or a map keyed by replica
# role (Kubeflow ``*ReplicaSpecs``); "any" for paths from config, whose schema is unknown.  The
# extractor accepts either; the webhook's CEL needs to know.
WildcardOver = Literal["list", "map", "any"]
KServeMerge = Literal["llm", "runtime"]


@dataclass(frozen=True, slots=True)
class Location:
    shape: Shape
    pattern: tuple[str, ...]
    resources_key: str = "resources"
    wildcard: WildcardOver | None = None  # set iff the pattern has a ``*``
    # The operator mounts a memory-backed /dev/shm in the first container itself, unless the group
    # spec that holds the template sets ``rayStartParams.plasma-directory`` (KubeRay, below).
    ray_shm: bool = False
    # ``{{ }}`` in its values is substituted when the pod is created (Argo Workflows parameters).
    runtime_expressions: bool = False
    # KServe merges the template over a base (policies.kserve): "llm" for an LLMInferenceService's
    # presets and baseRefs, "runtime" for an InferenceService predictor's ServingRuntime.
    kserve: KServeMerge | None = None
    # A Kubeflow Trainer runtime's template: the TrainJob that runs it sets the image, command, args,
    # resources and env of its ``node`` containers (trainer_containers, below).
    trainer_runtime: bool = False

    def __post_init__(self) -> None:
        if ("*" in self.pattern) != (self.wildcard is not None):
            raise ValueError(f"/{'/'.join(self.pattern)}: declare what its wildcard runs over, and only then")


@dataclass(frozen=True, slots=True)
class Workload:
    group: str
    kind: str
    resource: str
    versions: tuple[str, ...]
    locations: tuple[Location, ...]


def _t(*patterns: str, over: WildcardOver | None = None) -> tuple[Location, ...]:
    return tuple(_location("template", p, over) for p in patterns)


def _p(*patterns: str, kserve: KServeMerge | None = None) -> tuple[Location, ...]:
    return tuple(dataclasses.replace(_location("podspec", p, None), kserve=kserve) for p in patterns)


def _location(shape: Shape, pattern: str, over: WildcardOver | None) -> Location:
    parts = tuple(pointer.split(pattern))
    return Location(shape, parts, wildcard=over if "*" in parts else None)


_KUBEFLOW = "kubeflow.org"
_RAY = "ray.io"
_RAY_VERSIONS = ("v1", "v1alpha1")


def _ray(cluster_spec: str) -> tuple[Location, ...]:
    """A RayClusterSpec's head template and its list of worker group templates.

    KubeRay mounts an emptyDir with medium Memory at /dev/shm in the Ray container (the first
    one) of every head and worker pod, for the object store, unless the group's rayStartParams
    set ``plasma-directory`` (ray-project/kuberay ray-operator/controllers/ray/common/pod.go:
    ``addEmptyDir(..., SharedMemoryVolumeMountPath "/dev/shm", StorageMediumMemory)`` on
    ``pod.Spec.Containers[utils.RayContainerIndex]``, RayContainerIndex = 0).
    """
    head = Location("template", tuple(pointer.split(cluster_spec + "/headGroupSpec/template")), ray_shm=True)
    workers = tuple(pointer.split(cluster_spec + "/workerGroupSpecs/*/template"))
    return head, Location("template", workers, wildcard="list", ray_shm=True)


_TRAINER_RUNTIME = tuple(
    dataclasses.replace(loc, trainer_runtime=True)
    for loc in _t("/spec/template/spec/replicatedJobs/*/template/spec/template", over="list")
)

# Kubeflow Trainer's JobSet builder gives every replicated Job's containers named ``node`` (and
# ``launcher`` when ``mlPolicy.mpi.runLauncherAsNode`` is true) the TrainJob's trainer image,
# command, args, resourcesPerNode and env (kubeflow/trainer@0859508
# pkg/runtime/framework/plugins/jobset/builder.go, Builder.Trainer; constants.Node = "node",
# constants.Launcher = "launcher").
TRAINER_NODE = "node"
TRAINER_LAUNCHER = "launcher"


def trainer_containers(runtime: Any, spec: dict[str, Any]) -> tuple[RelPath, ...]:
    """The paths (relative to ``spec``) of the containers a TrainJob fills in, in a runtime's pod spec."""
    mpi = as_dict(as_dict(as_dict(as_dict(runtime).get("spec")).get("mlPolicy")).get("mpi"))
    names = {TRAINER_NODE, TRAINER_LAUNCHER} if mpi.get("runLauncherAsNode") is True else {TRAINER_NODE}
    return tuple(
        ("containers", i)
        for i, c in enumerate(as_list(spec.get("containers")))
        if isinstance(c, dict) and c.get("name") in names
    )


def _argo(templates: str) -> tuple[Location, ...]:
    return (Location("argo", tuple(pointer.split(templates)), wildcard="list", runtime_expressions=True),)


_ARGO = "argoproj.io"
_KNATIVE = "serving.knative.dev"


WORKLOADS: tuple[Workload, ...] = (
    Workload("", "Pod", "pods", ("v1",), (Location("template", ()),)),
    Workload("", "PodTemplate", "podtemplates", ("v1",), _t("/template")),
    Workload("", "ReplicationController", "replicationcontrollers", ("v1",), _t("/spec/template")),
    Workload("apps", "Deployment", "deployments", ("v1",), _t("/spec/template")),
    Workload("apps", "StatefulSet", "statefulsets", ("v1",), _t("/spec/template")),
    Workload("apps", "DaemonSet", "daemonsets", ("v1",), _t("/spec/template")),
    Workload("apps", "ReplicaSet", "replicasets", ("v1",), _t("/spec/template")),
    Workload("batch", "Job", "jobs", ("v1",), _t("/spec/template")),
    Workload("batch", "CronJob", "cronjobs", ("v1",), _t("/spec/jobTemplate/spec/template")),
    Workload(_KUBEFLOW, "PyTorchJob", "pytorchjobs", ("v1",), _t("/spec/pytorchReplicaSpecs/*/template", over="map")),
    Workload(_KUBEFLOW, "TFJob", "tfjobs", ("v1",), _t("/spec/tfReplicaSpecs/*/template", over="map")),
    Workload(_KUBEFLOW, "MPIJob", "mpijobs", ("v1", "v2beta1"), _t("/spec/mpiReplicaSpecs/*/template", over="map")),
    Workload(_KUBEFLOW, "PaddleJob", "paddlejobs", ("v1",), _t("/spec/paddleReplicaSpecs/*/template", over="map")),
    Workload(_KUBEFLOW, "XGBoostJob", "xgboostjobs", ("v1",), _t("/spec/xgbReplicaSpecs/*/template", over="map")),
    Workload(_KUBEFLOW, "JAXJob", "jaxjobs", ("v1",), _t("/spec/jaxReplicaSpecs/*/template", over="map")),
    # pytorch/elastic@bc88e69 kubernetes/api/v1alpha1/elasticjob_types.go: ElasticJobSpec.ReplicaSpecs
    # is a map of replica type (Worker, Etcd) to kubeflow/common's ReplicaSpec, which holds a
    # PodTemplateSpec.
    Workload(
        "elastic.pytorch.org", "ElasticJob", "elasticjobs", ("v1alpha1",),
        _t("/spec/replicaSpecs/*/template", over="map"),
    ),
    # aws/sagemaker-hyperpod-cli@011ca92 src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py
    # (group sagemaker.amazonaws.com, v1, plural hyperpodpytorchjobs) and
    # config/hyperpod_pytorch_job_unified_config.py: replicaSpecs is a list of ReplicaSpec, each
    # with a name, replicas and a pod template.
    Workload(
        "sagemaker.amazonaws.com", "HyperPodPyTorchJob", "hyperpodpytorchjobs", ("v1",),
        _t("/spec/replicaSpecs/*/template", over="list"),
    ),
    Workload(
        _KUBEFLOW,
        "Experiment",
        "experiments",
        ("v1beta1",),
        (Location("object", ("spec", "trialTemplate", "trialSpec")),),
    ),
    Workload(
        "trainer.kubeflow.org",
        "TrainJob",
        "trainjobs",
        ("v1alpha1",),
        (Location("component", ("spec", "trainer"), "resourcesPerNode"),),
    ),
    Workload("trainer.kubeflow.org", "TrainingRuntime", "trainingruntimes", ("v1alpha1",), _TRAINER_RUNTIME),
    Workload(
        "trainer.kubeflow.org", "ClusterTrainingRuntime", "clustertrainingruntimes", ("v1alpha1",), _TRAINER_RUNTIME
    ),
    Workload(_RAY, "RayCluster", "rayclusters", _RAY_VERSIONS, _ray("/spec")),
    Workload(_RAY, "RayJob", "rayjobs", _RAY_VERSIONS, _ray("/spec/rayClusterSpec")),
    Workload(_RAY, "RayService", "rayservices", _RAY_VERSIONS, _ray("/spec/rayClusterConfig")),
    Workload(
        "jobset.x-k8s.io",
        "JobSet",
        "jobsets",
        ("v1alpha2",),
        _t("/spec/replicatedJobs/*/template/spec/template", over="list"),
    ),
    Workload(
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
        "leaderworkersets",
        ("v1",),
        _t("/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate"),
    ),
    Workload(
        "serving.kserve.io",
        "InferenceService",
        "inferenceservices",
        ("v1beta1",),
        (*_p("/spec/predictor", kserve="runtime"), *_p("/spec/transformer", "/spec/explainer")),
    ),
    Workload(
        "serving.kserve.io",
        "LLMInferenceService",
        "llminferenceservices",
        ("v1alpha1", "v1alpha2"),
        _p("/spec/template", "/spec/worker", "/spec/prefill/template", "/spec/prefill/worker", kserve="llm"),
    ),
    Workload("batch.volcano.sh", "Job", "jobs", ("v1alpha1",), _t("/spec/tasks/*/template", over="list")),
    # sgl-project/rbg@993491f config/crd/bases/workloads.x-k8s.io_rolebasedgroups.yaml and
    # api/workloads/*/rolebasedgroup_types.go: each role's inline pod template is ``template`` in
    # v1alpha1 and under its pattern in v1alpha2 (``standalonePattern``, ``leaderWorkerPattern``: the
    # base of leader and workers).  A role that names a ``templateRef`` (a roleTemplate patched by
    # ``templatePatch``) has no inline template and is not judged.
    Workload(
        "workloads.x-k8s.io", "RoleBasedGroup", "rolebasedgroups", ("v1alpha1", "v1alpha2"),
        _t("/spec/roles/*/template", "/spec/roles/*/standalonePattern/template",
           "/spec/roles/*/leaderWorkerPattern/template", over="list"),
    ),
    Workload("kaito.sh", "Workspace", "workspaces", ("v1alpha1", "v1beta1"), _t("/inference/template")),
    Workload(
        "apps.nvidia.com",
        "NIMService",
        "nimservices",
        ("v1alpha1",),
        (Location("component", ("spec",), "resources"),),
    ),
    # argoproj/argo-rollouts pkg/apis/rollouts/v1alpha1/types.go: RolloutSpec.Template is a
    # PodTemplateSpec (absent when workloadRef points at a Deployment).
    Workload(_ARGO, "Rollout", "rollouts", ("v1alpha1",), _t("/spec/template")),
    # knative/serving pkg/apis/serving/v1: Service and Configuration hold a RevisionTemplateSpec
    # (metadata + RevisionSpec, which inlines a PodSpec); a Revision's spec is a RevisionSpec.
    Workload(_KNATIVE, "Service", "services", ("v1",), _t("/spec/template")),
    Workload(_KNATIVE, "Configuration", "configurations", ("v1",), _t("/spec/template")),
    Workload(_KNATIVE, "Revision", "revisions", ("v1",), _p("/spec")),
    # kubeflow/kubeflow components/notebook-controller/api/v1/notebook_types.go: NotebookSpec.Template
    # is a NotebookTemplateSpec holding only ``spec`` (a PodSpec), in v1, v1beta1 and v1alpha1.
    Workload(_KUBEFLOW, "Notebook", "notebooks", ("v1", "v1beta1", "v1alpha1"), _p("/spec/template/spec")),
    # argoproj/argo-workflows pkg/apis/workflow/v1alpha1: Workflow, WorkflowTemplate and
    # ClusterWorkflowTemplate hold a WorkflowSpec, CronWorkflow one under workflowSpec.
    Workload(_ARGO, "Workflow", "workflows", ("v1alpha1",), _argo("/spec/templates/*")),
    Workload(_ARGO, "WorkflowTemplate", "workflowtemplates", ("v1alpha1",), _argo("/spec/templates/*")),
    Workload(
        _ARGO, "ClusterWorkflowTemplate", "clusterworkflowtemplates", ("v1alpha1",), _argo("/spec/templates/*")
    ),
    Workload(_ARGO, "CronWorkflow", "cronworkflows", ("v1alpha1",), _argo("/spec/workflowSpec/templates/*")),
)

# KServe predictor/transformer/explainer: besides ``containers``, a single container-like
# component may appear under these keys (PredictorSpec in kserve pkg/apis/serving/v1beta1).
KSERVE_COMPONENT_KEYS: tuple[str, ...] = (
    "model",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "huggingface",
    "pmml",
    "lightgbm",
    "paddle",
)

CONTAINER_LISTS: tuple[tuple[str, ContainerKind], ...] = (
    ("initContainers", "initContainer"),
    ("containers", "container"),
    ("ephemeralContainers", "ephemeralContainer"),
)


def _group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def index_workloads(extra: tuple[Workload, ...] = ()) -> dict[tuple[str, str], Workload]:
    table: dict[tuple[str, str], Workload] = {}
    for w in (*WORKLOADS, *extra):
        table[(w.group, w.kind)] = w
    return table


_DEFAULT_INDEX = index_workloads()


@dataclass(frozen=True, slots=True)
class ContainerRef:
    path: RelPath  # relative to the pod spec
    # The spec's mapping at ``path`` (policies.template_inputs keeps any other one apart).
    container: dict[str, Any] = field(metadata={DERIVED: True})
    kind: ContainerKind
    resources_key: str = "resources"
    # Volume mounts the container gets besides its own (an Argo containerSet's shared volumeMounts):
    # (path relative to the pod spec, mount).
    shared_mounts: tuple[tuple[RelPath, dict[str, Any]], ...] = ()
    # What the bases an operator merges the container with set of the program it runs (image,
    # command, args, env: policies.kserve.PROGRAM_FIELDS); the container's own values win.
    base: dict[str, Any] | None = None
    # Rules read these many times per evaluation; they are resolved once, at construction.
    resources: dict[str, Any] = field(init=False, repr=False, compare=False)
    _maps: dict[str, dict[str, Any]] = field(init=False, repr=False, compare=False)
    # policies.podresources.container_requests per resource predicate (held, so never reused by id).
    requests_cache: dict[object, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        resources = as_dict(self.container.get(self.resources_key))
        object.__setattr__(self, "resources", resources)
        maps = {which: as_dict(resources.get(which)) for which in ("limits", "requests")}
        object.__setattr__(self, "_maps", maps)
        object.__setattr__(self, "requests_cache", {})

    @property
    def name(self) -> str:
        name = self.container.get("name")
        return text(name, 253) if isinstance(name, str) else (str(self.path[-1]) if self.path else "main")

    @property
    def resources_path(self) -> RelPath:
        return (*self.path, self.resources_key)

    def resource_map(self, which: str) -> dict[str, Any]:
        found = self._maps.get(which)
        return found if found is not None else as_dict(self.resources.get(which))

    @property
    def is_sidecar(self) -> bool:
        """A restartable init container (KEP-753) runs for the pod's lifetime."""
        return self.kind == "initContainer" and self.container.get("restartPolicy") == "Always"


@dataclass(frozen=True, slots=True)
class PodTemplate:
    """One pod spec found in an object, with absolute pointers to it and its metadata."""

    spec: dict[str, Any]
    spec_pointer: str
    metadata: dict[str, Any]
    metadata_pointer: str
    containers: tuple[ContainerRef, ...]
    scheduling_known: bool = True  # False for components whose pod is built by an operator
    shape: Shape = "template"
    # Containers (paths relative to the spec) that the operator gives a memory-backed /dev/shm.
    shm_provided: tuple[RelPath, ...] = ()
    runtime_expressions: bool = False  # ``{{ }}`` values are substituted when the pod is created
    inherited_volumes: tuple[dict[str, Any], ...] = ()  # volumes the pod gets from its owner
    # Top-level keys of ``spec`` whose value is written elsewhere in the object (an Argo workflow's
    # resourceClaims, its templateDefaults): (key, absolute pointer of the value).  Findings and
    # fixes under such a key are rebased there (policies.engine).
    spec_origins: tuple[tuple[str, str], ...] = ()
    # A patch the owner applies last may change any field of the pod spec (Argo podSpecPatch).
    spec_patched: bool = False
    # What an operator merges under the template (policies.kserve): what it merged, and the bases
    # that apply but are not known (their mounts and volumes are then unknown).
    merged_from: tuple[str, ...] = ()
    unseen_bases: tuple[str, ...] = ()
    # Containers (paths relative to the spec) whose image, command, args, resources and env the
    # object that runs the template sets (a Kubeflow Trainer runtime's ``node`` containers): what
    # the template says of them is a default, and whether they get GPUs is not decided here.
    owner_supplied: tuple[RelPath, ...] = ()
    # An MPIJob Worker template: what the Launcher's mpirun starts in each of its pods, when it says
    # (policies.mpi_launch).
    launch: MpiLaunch | None = None

    def spec_origin(self, key: Any) -> str | None:
        """The pointer of the value of spec key ``key`` when it is written outside the template."""
        for k, at in self.spec_origins:
            if k == key:
                return at
        return None

    @property
    def annotations(self) -> dict[str, Any]:
        return as_dict(self.metadata.get("annotations"))


def _expand(
    node: Any, pattern: tuple[str, ...], base: tuple[Segment, ...], stops: bool = False
) -> Iterator[tuple[tuple[Segment, ...], Any]]:
    """The values at ``pattern``; with ``stops``, also each value on the way that cannot hold the
    rest of the path (a scalar where a map or list belongs; null among them)."""
    if not pattern:
        yield base, node
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        if isinstance(node, dict):
            for key, child in node.items():
                yield from _expand(child, rest, (*base, key), stops)
        elif isinstance(node, list):
            for i, child in enumerate(node):
                yield from _expand(child, rest, (*base, i), stops)
        elif stops:
            yield base, node
        return
    if isinstance(node, dict):
        if head in node:
            yield from _expand(node[head], rest, (*base, head), stops)
    elif isinstance(node, list) and small_int(head) is not None:
        if (index := index_of(head, len(node))) is not None:
            yield from _expand(node[index], rest, (*base, index), stops)
    elif stops:
        yield base, node


def _containers_of(spec: dict[str, Any]) -> list[ContainerRef]:
    refs: list[ContainerRef] = []
    kind: ContainerKind
    for key, kind in CONTAINER_LISTS:
        items = spec.get(key)
        if isinstance(items, list):
            refs.extend(
                ContainerRef((key, i), c, kind) for i, c in enumerate(items) if isinstance(c, dict)
            )
    return refs


def node_at(obj: Any, path: tuple[Segment, ...]) -> Any:
    """The value at ``path`` in ``obj`` (dict keys, list indices), or None where it is not there."""
    for segment in path:
        if isinstance(obj, dict):
            obj = obj.get(segment)  # type: ignore[call-overload]
        elif isinstance(obj, list) and isinstance(segment, int) and 0 <= segment < len(obj):
            obj = obj[segment]
        else:
            return None
    return obj


def _kserve_bases(
    obj: dict[str, Any], loc: Location, path: tuple[Segment, ...], node: dict[str, Any], view: KServeView
) -> Merged | None:
    """What KServe merges under the pod spec at ``path`` (policies.kserve); None: nothing."""
    if loc.kserve == "llm":
        slot = tuple(str(p) for p in path[1:])  # the spec's ``template``, ``worker``, ``prefill/…``
        merged = llm_bases(obj, slot, view)
        return merged if merged.sources or merged.unseen else None
    if loc.kserve == "runtime":
        return runtime_bases(obj, node, view, KSERVE_COMPONENT_KEYS)
    return None


def _with_bases(c: ContainerRef, merged: Merged, loc: Location) -> ContainerRef:
    """The container with the volume mounts and the program its bases give it: a predictor's
    ``model`` runs in the runtime's ``kserve-container``; other containers merge with the base
    container of their name."""
    if c.kind == "component":
        base_name: Any = RUNTIME_CONTAINER if loc.kserve == "runtime" else None
    elif c.kind == "container":  # init containers merge with the base's init containers, which hold no mount
        base_name = c.container.get("name")
    else:
        base_name = None
    if not isinstance(base_name, str):
        return c
    mounts, program = merged.mounts_of(base_name), merged.program_of(base_name)
    if not mounts and program is None:
        return c
    return dataclasses.replace(c, shared_mounts=(*c.shared_mounts, *((c.path, m) for m in mounts)), base=program)


SHM_PATH = "/dev/shm"


def is_shm_mount(mount: Any) -> bool:
    """Whether a volume mount is at ``/dev/shm`` (a trailing slash is the same place)."""
    if not isinstance(mount, dict):
        return False
    path = mount.get("mountPath")
    return isinstance(path, str) and path.rstrip("/") == SHM_PATH


def _ray_shm(group: Any) -> tuple[RelPath, ...]:
    """The Ray container KubeRay gives a memory-backed /dev/shm, unless plasma-directory is set."""
    params = as_dict(as_dict(group).get("rayStartParams"))
    return () if "plasma-directory" in params else (("containers", 0),)


ARGO_CONTAINER_KEYS = ("container", "script")


def _argo_template(template: dict[str, Any], workflow_spec: Any, at: str, workflow_at: str) -> PodTemplate | None:
    if template_type(template) not in POD_TYPES:
        return None  # steps, dag, resource, suspend, http…: no user pod
    pod = argo_pod(template, workflow_spec, at, workflow_at)
    spec = pod.spec
    refs: list[ContainerRef] = []
    for key in ARGO_CONTAINER_KEYS:
        if isinstance(spec.get(key), dict):
            refs.append(ContainerRef((key,), spec[key], "container"))
    container_set = as_dict(spec.get("containerSet"))
    # Its volumeMounts are appended to every container (container_set_template_types.go GetContainers).
    shared = tuple(
        (("containerSet", "volumeMounts", i), m)
        for i, m in enumerate(as_list(container_set.get("volumeMounts")))
        if isinstance(m, dict)
    )
    refs.extend(
        ContainerRef(("containerSet", "containers", i), c, "container", shared_mounts=shared)
        for i, c in enumerate(as_list(container_set.get("containers")))
        if isinstance(c, dict)
    )
    if not refs:
        return None
    kind: ContainerKind
    for key, kind in (("initContainers", "initContainer"), ("sidecars", "container")):
        items = spec.get(key)
        if isinstance(items, list):
            refs.extend(ContainerRef((key, i), c, kind) for i, c in enumerate(items) if isinstance(c, dict))
    volumes = tuple(v for v in as_list(as_dict(workflow_spec).get("volumes")) if isinstance(v, dict))
    return PodTemplate(
        spec=spec,
        spec_pointer=at,
        metadata=pod.metadata,
        metadata_pointer=at + "/metadata",
        containers=tuple(refs),
        scheduling_known=pod.scheduling_known,
        shape="argo",
        runtime_expressions=True,
        inherited_volumes=volumes,
        spec_origins=pod.origins,
        spec_patched=pod.patched,
    )


@dataclass(frozen=True, slots=True)
class Misshapen:
    """A place where a pod template, or a part of one the rules read, holds the wrong type."""

    at: str  # RFC 6901 pointer in the object
    found: str  # "a list", "a string"…
    expected: str  # what belongs there, e.g. "a pod template or spec (an object)"


_TEMPLATE = "a pod template or spec (an object)"


def misshapen_templates(
    obj: Any, index: dict[tuple[str, str], Workload] | None = None, _base: str = "", _depth: int = 0
) -> list[Misshapen]:
    """Where ``obj``'s kind keeps its pod templates, or their containers and resources, but ``obj``
    holds the wrong type: a Pod whose ``spec`` is a list, a container that is a string, ``limits``
    that are a list.  ``extract`` and the rules pass over such places, so the faces report them as
    input errors rather than pass the object as checked.  Absent and null values are fine."""
    if not isinstance(obj, dict) or _depth > 4:
        return []
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return []
    workload = (index or _DEFAULT_INDEX).get((_group_of(api_version), kind))
    if workload is None:
        return []
    found: list[Misshapen] = []
    for loc in workload.locations:
        for path, node in _expand(obj, loc.pattern, (), stops=True):
            if node is None:  # absent and null are fine
                continue
            at = pointer.join(_base, path)
            if not isinstance(node, dict):
                found.append(Misshapen(at, _json_type(node), _TEMPLATE))
            elif loc.shape == "template" and node.get("spec") is not None and not isinstance(node["spec"], dict):
                found.append(Misshapen(at + "/spec", _json_type(node["spec"]), _TEMPLATE))
            elif loc.shape == "object":
                found.extend(misshapen_templates(node, index, at, _depth + 1))
    if _depth == 0:
        for pod in extract(obj, index):
            found.extend(_misshapen_parts(pod))
    return found


# Pod-spec switches the rules read (gpu-shared-memory: hostIPC; gpu-device-access-bypass: privileged); the
# API server decodes them as booleans and rejects anything else, so "true" in quotes is no switch at all.
_POD_FLAGS = ("hostIPC", "hostPID", "hostNetwork")


def _misshapen_parts(pod: PodTemplate) -> Iterator[Misshapen]:
    """Container lists, containers, the switches and the resources the rules read, of one extracted template."""
    spec, base = pod.spec, pod.spec_pointer
    lists = ("initContainers", "sidecars") if pod.shape == "argo" else tuple(key for key, _ in CONTAINER_LISTS)
    for key in lists:
        items = spec.get(key)
        if items is not None and not isinstance(items, list):
            yield Misshapen(pointer.join(base, (key,)), _json_type(items), "a list of containers")
        for i, item in enumerate(items if isinstance(items, list) else ()):
            if item is not None and not isinstance(item, dict):
                yield Misshapen(pointer.join(base, (key, i)), _json_type(item), "a container (an object)")
    if pod.shape == "argo":
        for key in ARGO_CONTAINER_KEYS:
            if spec.get(key) is not None and not isinstance(spec[key], dict):
                yield Misshapen(pointer.join(base, (key,)), _json_type(spec[key]), "a container (an object)")
    if pod.shape in ("template", "podspec"):
        for key in _POD_FLAGS:
            value = spec.get(key)
            if value is not None and not isinstance(value, bool):
                yield Misshapen(pointer.join(base, (key,)), _json_type(value), "a boolean (true or false)")
    for c in pod.containers:
        privileged = as_dict(c.container.get("securityContext")).get("privileged")
        if privileged is not None and not isinstance(privileged, bool):
            yield Misshapen(pointer.join(base, (*c.path, "securityContext", "privileged")), _json_type(privileged),
                            "a boolean (true or false)")
        resources = c.container.get(c.resources_key)
        where = (*c.path, c.resources_key)
        if resources is not None and not isinstance(resources, dict):
            yield Misshapen(pointer.join(base, where), _json_type(resources), "resources (an object)")
            continue
        for which in ("limits", "requests"):
            quantities = as_dict(resources).get(which)
            if quantities is not None and not isinstance(quantities, dict):
                yield Misshapen(pointer.join(base, (*where, which)), _json_type(quantities),
                                "resource quantities (an object)")


def misshapen_message(kind: Any, place: Misshapen) -> str:
    """The input error for one place ``misshapen_templates`` found."""
    return (
        f"{pointer.to_dotted(place.at) or 'the object'} is {place.found}, but a {kind} holds {place.expected} "
        "there: gpuguard cannot check it"
    )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def extract(
    obj: dict[str, Any],
    index: dict[tuple[str, str], Workload] | None = None,
    _base: str = "",
    _depth: int = 0,
    *,
    kserve: KServeView = NO_VIEW,
) -> list[PodTemplate]:
    """Every pod spec in ``obj``; an empty list for kinds without one or malformed objects.

    ``kserve``: the ServingRuntimes and LLMInferenceServiceConfigs KServe's templates merge over
    (policies.kserve); KServe's own presets are known without them."""
    if not isinstance(obj, dict) or _depth > 4:
        return []
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return []
    workload = (index or _DEFAULT_INDEX).get((_group_of(api_version), kind))
    if workload is None:
        return []
    obj_meta = as_dict(obj.get("metadata"))
    found: list[PodTemplate] = []
    for loc in workload.locations:
        for path, node in _expand(obj, loc.pattern, ()):
            if not isinstance(node, dict):
                continue
            at = pointer.join(_base, path)
            if loc.shape == "object":
                found.extend(extract(node, index, at, _depth + 1, kserve=kserve))
            elif loc.shape == "template":
                spec = node.get("spec")
                if not isinstance(spec, dict):
                    continue
                found.append(
                    PodTemplate(
                        spec=spec,
                        spec_pointer=at + "/spec",
                        metadata=as_dict(node.get("metadata")),
                        metadata_pointer=at + "/metadata",
                        containers=tuple(_containers_of(spec)),
                        shm_provided=_ray_shm(node_at(obj, path[:-1])) if loc.ray_shm else (),
                        owner_supplied=trainer_containers(obj, spec) if loc.trainer_runtime else (),
                        launch=launch_of(obj) if path == _MPI_WORKER and workload.kind == "MPIJob" else None,
                    )
                )
            elif loc.shape == "argo":
                template = _argo_template(node, node_at(obj, path[:-2]), at, pointer.join(_base, path[:-2]))
                if template is not None:
                    found.append(template)
            elif loc.shape == "podspec":
                refs = _containers_of(node)
                for key in KSERVE_COMPONENT_KEYS:
                    comp = node.get(key)
                    if isinstance(comp, dict):
                        refs.append(ContainerRef((key,), comp, "component"))
                merged = _kserve_bases(obj, loc, path, node, kserve)
                if merged is not None:
                    refs = [_with_bases(c, merged, loc) for c in refs]
                found.append(
                    PodTemplate(
                        spec=node,
                        spec_pointer=at,
                        metadata=obj_meta,
                        metadata_pointer=pointer.join(_base, ("metadata",)),
                        containers=tuple(refs),
                        shape="podspec",
                        scheduling_known=merged is None or not merged.schedules,
                        inherited_volumes=merged.volumes if merged is not None else (),
                        merged_from=merged.sources if merged is not None else (),
                        unseen_bases=merged.unseen if merged is not None else (),
                    )
                )
            else:  # component
                found.append(
                    PodTemplate(
                        spec=node,
                        spec_pointer=at,
                        metadata=obj_meta,
                        metadata_pointer=pointer.join(_base, ("metadata",)),
                        containers=(ContainerRef((), node, "component", loc.resources_key),),
                        scheduling_known=False,
                        shape="component",
                    )
                )
    return found


_MPI_WORKER: tuple[Segment, ...] = ("spec", "mpiReplicaSpecs", "Worker", "template")


def runnable_containers(pod: PodTemplate) -> Iterator[ContainerRef]:
    """Containers that run with resources: init, sidecar and app containers (not ephemeral ones,
    which may not set resources and are never scheduled for)."""
    return (c for c in pod.containers if c.kind != "ephemeralContainer")
