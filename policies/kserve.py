"""What KServe merges under the pod templates of its serving objects, as its controllers merge it.

KServe builds the pods of an ``InferenceService`` and an ``LLMInferenceService`` from more than the
object: the pod it runs is the object's template merged over a base, and what the base mounts the
pod has.  Two merges (kserve/kserve@aaac4e29):

* **LLMInferenceService** (pkg/controller/v1alpha2/llmisvc/config_merge.go, ``combineBaseRefsConfig``):
  the well-known ``LLMInferenceServiceConfig`` presets chosen by the deployment pattern, then the
  service's own ``baseRefs`` in order, then the service itself, each merged over the one before
  (``MergeSpecs``: a strategic merge patch of ``LLMInferenceServiceSpec``).  The pattern is read from
  the spec with its baseRefs merged: with ``prefill``, ``config-llm-prefill-template`` (no
  ``prefill.worker``) or ``config-llm-prefill-worker-data-parallel`` (``prefill.worker`` and a data
  parallel ``prefill.parallelism``), and for decode ``config-llm-decode-template`` (no ``worker``) or
  ``config-llm-decode-worker-data-parallel``; without ``prefill``, ``config-llm-template`` or
  ``config-llm-worker-data-parallel``.  Pipeline-parallel workers get a ``*-pipeline-parallel``
  config that KServe does not ship (a service fails without one: ``configNotFoundError``).  Data
  parallel means ``data`` or ``dataLocal`` > 0, pipeline parallel ``pipeline`` > 0 (data first;
  llm_inference_service_types_func.go).  Each name is ``kserve-`` (``LLM_INFERENCE_SERVICE_CONFIG_PREFIX``)
  + the preset, looked up in the service's namespace first, then in the KServe namespace (``kserve``,
  ``getConfig``): a config of that name beside the service replaces the preset.  The shipped presets
  (policies/data/kserve_llmisvc_presets.json, from config/llmisvcconfig/) mount an emptyDir with
  medium Memory at /dev/shm in their ``main`` container.
* **InferenceService** (pkg/controller/v1beta1/inferenceservice/components/predictor.go,
  ``buildPodSpec``; utils.go ``MergeServingRuntimeAndInferenceServiceSpecs``): a predictor's ``model``
  runs in the ``kserve-container`` of its ServingRuntime — ``model.runtime``, a ServingRuntime in the
  service's namespace, else a ClusterServingRuntime of that name (``GetServingRuntime``) — merged with
  the model spec (``MergeContainerWithPatch``), and the pod is the runtime's ``nodeSelector``,
  ``affinity``, ``tolerations``, ``volumes``… merged with the predictor's (``MergePodSpec``).  Without
  ``model.runtime`` (and for the framework keys, ``sklearn``, ``huggingface``…, which are models of
  that format) KServe picks one of the runtimes that support the model format by priority
  (``GetSupportingRuntimes``), among those of the namespace and the cluster; gpuguard does not guess
  which (KServe's own ``kserve-huggingfaceserver`` and ``kserve-vllmserver`` mount a memory-backed
  /dev/shm, config/runtimes/), so that runtime is unseen.

Strategic merge (k8s.io/api core/v1 types.go): containers are merged by ``name``, a container's
``volumeMounts`` by ``mountPath`` and the pod's ``volumes`` by ``name`` (a map inside is merged key by
key, the override's values winning); what the object sets wins over the base.

Where the objects come from: ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs in
the input being checked (the same file first, then the other files of a ``gpuguard lint`` run) and in
the cluster facts (a snapshot that lists them).  A base that is named but not among them is
*unseen*: what it mounts is not known, and the rules say so rather than guess.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from policies.shapes import as_dict, as_list, small_int

GROUP = "serving.kserve.io"
RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
CONFIG_KIND = "LLMInferenceServiceConfig"
RUNTIME_CONTAINER = "kserve-container"  # constants.InferenceServiceContainerName
SYSTEM_NAMESPACE = "kserve"  # constants.KServeNamespace (POD_NAMESPACE of the controller, default kserve)
PRESET_PREFIX = "kserve-"  # LLM_INFERENCE_SERVICE_CONFIG_PREFIX's default
SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations")
Slot = tuple[str, ...]  # where a pod spec sits in an LLMInferenceServiceSpec: ("template",), ("prefill", "worker")…


def is_kserve_object(obj: Mapping[str, Any]) -> bool:
    """A ServingRuntime, ClusterServingRuntime or LLMInferenceServiceConfig (any served version)."""
    api_version = obj.get("apiVersion")
    return (isinstance(api_version, str) and api_version.startswith(GROUP + "/")
            and obj.get("kind") in (*RUNTIME_KINDS, CONFIG_KIND))


@dataclass(frozen=True, slots=True)
class Base:
    """One object KServe merges under a pod template: its pod spec there (``None``: it has none)."""

    label: str  # "ClusterServingRuntime nvidia-nim-llama3-70b-instruct-1.0.0", "KServe's preset …"
    pod: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class KServeObjects:
    """ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs of one source, by name."""

    runtimes: tuple[tuple[str, str, Mapping[str, Any]], ...] = ()  # (namespace, name, spec)
    cluster_runtimes: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    configs: tuple[tuple[str, str, Mapping[str, Any]], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.runtimes or self.cluster_runtimes or self.configs)


def kserve_objects(objects: Iterable[Any]) -> KServeObjects:
    """The KServe objects among ``objects`` (others are passed over)."""
    runtimes: list[tuple[str, str, Mapping[str, Any]]] = []
    cluster: list[tuple[str, Mapping[str, Any]]] = []
    configs: list[tuple[str, str, Mapping[str, Any]]] = []
    for obj in objects:
        if not isinstance(obj, Mapping) or not is_kserve_object(obj):
            continue
        meta = as_dict(obj.get("metadata"))
        name, namespace = meta.get("name"), meta.get("namespace")
        spec = obj.get("spec")
        if not isinstance(name, str) or not isinstance(spec, Mapping):
            continue
        ns = namespace if isinstance(namespace, str) else ""
        kind = obj.get("kind")
        if kind == "ServingRuntime":
            runtimes.append((ns, name, spec))
        elif kind == "ClusterServingRuntime":
            cluster.append((name, spec))
        else:
            configs.append((ns, name, spec))
    return KServeObjects(tuple(runtimes), tuple(cluster), tuple(configs))


NO_OBJECTS = KServeObjects()


def _loose(items: Iterable[tuple[str, str, Mapping[str, Any]]], namespace: str, name: str) -> Mapping[str, Any] | None:
    """In an input a missing namespace is the one the objects are applied to: either side may omit it."""
    loose = None
    for ns, n, spec in items:
        if n != name:
            continue
        if ns == namespace:
            return spec
        if (not ns or not namespace) and loose is None:
            loose = spec
    return loose


@dataclass(frozen=True, slots=True)
class KServeView:
    """The KServe objects a template's bases resolve to: layers, nearest first (the input's file, the
    run, the cluster)."""

    layers: tuple[KServeObjects, ...] = ()

    def nearer(self, layer: KServeObjects) -> KServeView:
        return KServeView((layer, *self.layers)) if not layer.empty else self

    def runtime(self, namespace: str, name: str) -> Base | None:
        """``GetServingRuntime``: a ServingRuntime in the namespace, else the ClusterServingRuntime."""
        for layer in self.layers:
            spec = _loose(layer.runtimes, namespace, name)
            if spec is not None:
                return Base(f"ServingRuntime {name}", spec)
        for layer in self.layers:
            for n, spec in layer.cluster_runtimes:
                if n == name:
                    return Base(f"ClusterServingRuntime {name}", spec)
        return None

    def config(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """``getConfig``: the LLMInferenceServiceConfig in the service's namespace, else in KServe's."""
        for where in (namespace, SYSTEM_NAMESPACE):
            for layer in self.layers:
                spec = next((s for ns, n, s in layer.configs if n == name and ns == where), None)
                if spec is not None:
                    return spec
        for layer in self.layers:  # an input that names no namespace
            spec = _loose(layer.configs, namespace, name)
            if spec is not None:
                return spec
        return None


NO_VIEW = KServeView()


@cache
def _presets() -> dict[str, dict[str, Any]]:
    text = resources.files("policies").joinpath("data", "kserve_llmisvc_presets.json").read_text(encoding="utf-8")
    presets: dict[str, dict[str, Any]] = json.loads(text)["presets"]
    return presets


def preset_names() -> tuple[str, ...]:
    return tuple(_presets())


def _preset_pod(preset: str, slot: Slot) -> Mapping[str, Any] | None:
    entry = _presets().get(preset)
    if entry is None:
        return None
    pod: Mapping[str, Any] | None = entry["slots"].get("/".join(slot))
    return pod


def _positive(parallelism: Any, key: str) -> bool:
    value = as_dict(parallelism).get(key)
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        value = small_int(value)
    return isinstance(value, int) and value > 0


def _workload_preset(workload: Mapping[str, Any], single: str, data: str, pipeline: str) -> str | None:
    """The preset of one workload (decode, or prefill) for its worker and parallelism."""
    if workload.get("worker") is None:
        return single
    parallelism = workload.get("parallelism")
    if _positive(parallelism, "data") or _positive(parallelism, "dataLocal"):
        return data
    if _positive(parallelism, "pipeline"):
        return pipeline
    return None  # a worker without data or pipeline parallelism: no preset (the switch matches nothing)


def well_known_presets(spec: Mapping[str, Any]) -> list[str]:
    """The presets ``combineBaseRefsConfig`` applies for ``spec`` (the service with its baseRefs)."""
    presets: list[str | None]
    prefill = spec.get("prefill")
    if isinstance(prefill, Mapping):
        presets = [
            _workload_preset(prefill, "config-llm-prefill-template", "config-llm-prefill-worker-data-parallel",
                             "config-llm-prefill-worker-pipeline-parallel"),
            _workload_preset(spec, "config-llm-decode-template", "config-llm-decode-worker-data-parallel",
                             "config-llm-decode-worker-pipeline-parallel"),
        ]
    else:
        presets = [_workload_preset(spec, "config-llm-template", "config-llm-worker-data-parallel",
                                    "config-llm-worker-pipeline-parallel")]
    return [p for p in presets if p is not None]


def merge_maps(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A strategic merge of two maps without lists: the override's values win, maps are merged."""
    out = dict(base)
    for key, value in override.items():
        old = out.get(key)
        out[key] = merge_maps(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return out


def _by_key(items: Iterable[Any], key: str) -> dict[Any, dict[str, Any]]:
    out: dict[Any, dict[str, Any]] = {}
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get(key), str):
            out[item[key]] = merge_maps(out.get(item[key], {}), item)
    return out


@dataclass(frozen=True, slots=True)
class Merged:
    """What the bases of one pod template give it, merged in order.

    ``volumes``: the bases' volumes by name; ``mounts``: per container name, the volume mounts its
    bases give it, by mount path; ``schedules``: a base sets node selection or tolerations of its own
    (the pod's scheduling is then more than its spec says); ``unseen``: bases that apply but that
    gpuguard does not have (their content is unknown).
    """

    sources: tuple[str, ...] = ()
    volumes: tuple[dict[str, Any], ...] = ()
    mounts: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = ()
    schedules: bool = False
    unseen: tuple[str, ...] = ()
    # Per container name, what its bases set of the program it runs (PROGRAM_FIELDS).
    programs: tuple[tuple[str, dict[str, Any]], ...] = ()

    def mounts_of(self, container: str) -> tuple[dict[str, Any], ...]:
        return next((m for name, m in self.mounts if name == container), ())

    def program_of(self, container: str) -> dict[str, Any] | None:
        return next((p for name, p in self.programs if name == container), None)


# The fields of a base container that say what it runs; a list in the template replaces the base's.
PROGRAM_FIELDS = ("image", "command", "args", "env")


def _merge(bases: Sequence[Base], unseen: Sequence[str]) -> Merged:
    volumes: dict[Any, dict[str, Any]] = {}
    mounts: dict[str, dict[Any, dict[str, Any]]] = {}
    programs: dict[str, dict[str, Any]] = {}
    schedules = False
    for base in bases:
        pod = base.pod
        if pod is None:
            continue
        for name, volume in _by_key(as_list(pod.get("volumes")), "name").items():
            volumes[name] = merge_maps(volumes.get(name, {}), volume)
        for c in as_list(pod.get("containers")):
            if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
                continue
            held = mounts.setdefault(c["name"], {})
            for path, mount in _by_key(as_list(c.get("volumeMounts")), "mountPath").items():
                held[path] = merge_maps(held.get(path, {}), mount)
            program = programs.setdefault(c["name"], {})
            program.update((f, c[f]) for f in PROGRAM_FIELDS if f in c)
        schedules = schedules or any(pod.get(f) for f in SCHEDULING_FIELDS)
    return Merged(
        sources=tuple(b.label for b in bases),
        volumes=tuple(volumes.values()),
        mounts=tuple((name, tuple(m.values())) for name, m in mounts.items()),
        schedules=schedules,
        unseen=tuple(unseen),
        programs=tuple((name, p) for name, p in programs.items() if p),
    )


def _at(spec: Mapping[str, Any], slot: Slot) -> Mapping[str, Any] | None:
    node: Any = spec
    for key in slot:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def llm_bases(obj: Mapping[str, Any], slot: Slot, view: KServeView) -> Merged:
    """What the presets and baseRefs of an LLMInferenceService merge under its pod spec at ``slot``."""
    spec = as_dict(obj.get("spec"))
    namespace = as_dict(obj.get("metadata")).get("namespace")
    ns = namespace if isinstance(namespace, str) else ""
    refs: list[tuple[str, Mapping[str, Any] | None]] = []
    for ref in as_list(spec.get("baseRefs")):
        name = as_dict(ref).get("name")
        if isinstance(name, str):
            refs.append((name, view.config(ns, name)))
    # The pattern is read from the service with its baseRefs merged (config_merge.go "resolvedSpec").
    resolved: Mapping[str, Any] = {}
    for _, ref_spec in refs:
        if ref_spec is not None:
            resolved = merge_maps(resolved, ref_spec)
    resolved = merge_maps(resolved, spec)
    bases: list[Base] = []
    unseen: list[str] = []
    for preset in well_known_presets(resolved):
        name = PRESET_PREFIX + preset
        own = view.config(ns, name)
        if own is not None:
            bases.append(Base(f"LLMInferenceServiceConfig {name}", _at(own, slot)))
        elif preset in _presets():
            bases.append(Base(f"KServe's preset LLMInferenceServiceConfig {name}", _preset_pod(preset, slot)))
        else:
            unseen.append(f"LLMInferenceServiceConfig {name}")
    for name, ref_spec in refs:
        if ref_spec is None:
            unseen.append(f"LLMInferenceServiceConfig {name}")
        else:
            bases.append(Base(f"LLMInferenceServiceConfig {name}", _at(ref_spec, slot)))
    return _merge([b for b in bases if b.pod is not None], unseen)


def runtime_bases(
    obj: Mapping[str, Any], predictor: Mapping[str, Any], view: KServeView, components: Sequence[str]
) -> Merged | None:
    """What the ServingRuntime of an InferenceService predictor merges under the predictor: the one
    ``model.runtime`` names, else the one KServe selects for the model format (unseen: gpuguard does not
    guess which); None when the predictor runs no model (only its own ``containers``).  A framework key
    (``sklearn``, ``huggingface``…) is a model of that format (inference_service_defaults.go
    ``setPredictorModelDefaults``); the runtime's ``kserve-container`` is the model's container."""
    model = predictor.get("model")
    if not isinstance(model, Mapping):
        framework = next((k for k in components if k != "model" and isinstance(predictor.get(k), Mapping)), None)
        if framework is None:
            return None
        return Merged(unseen=(f"the ServingRuntime KServe selects for model format {framework}",))
    name = model.get("runtime")
    if not isinstance(name, str) or not name:
        fmt = as_dict(model.get("modelFormat")).get("name")
        what = f"model format {fmt}" if isinstance(fmt, str) and fmt else "the model"
        return Merged(unseen=(f"the ServingRuntime KServe selects for {what}",))
    namespace = as_dict(obj.get("metadata")).get("namespace")
    base = view.runtime(namespace if isinstance(namespace, str) else "", name)
    if base is None:
        return Merged(unseen=(f"ServingRuntime or ClusterServingRuntime {name}",))
    return _merge([base], ())
