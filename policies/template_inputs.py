"""What a template rule is given, and nothing else: ``TemplateInputs``, and the memo key derived from it.

A template rule (``policies.rule.RuleContext``) sees one pod template as ``project`` builds it — the
spec as ``policies.rule_inputs`` keeps it for the rule-results key (variables no rule reads, the
service-account token volume's generated name, hostnames and claim names replaced by stand-ins),
the template's annotations that rules read, and of the object only ``ObjectInputs``: its kind, its
namespace, its annotations that rules read, and whether a GPU Operator ClusterPolicy controls it.
The raw object and the raw pod are not reachable from there.

``inputs_key`` digests every field of ``TemplateInputs``, recursively through the dataclasses it
holds, except fields whose metadata marks them ``DERIVED`` (a value computed from other fields, such
as a container's mapping, which is the spec's at the container's path).  So the memo key is not a
second description of what rules read, kept by hand: adding a field to what rules are given adds
it to the key.  ``tests/policies/test_template_inputs.py`` checks that a rule reading outside the
inputs gets nothing, and that two templates with equal keys get equal rule results.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies.digest import DERIVED, MAX_DEPTH, TooDeep
from policies.env_sources import EnvSources, SourceState, container_sources
from policies.podspec import ContainerRef, PodTemplate, node_at
from policies.rule_inputs import annotations_read, spec_read
from policies.shapes import as_dict, as_list


@dataclass(frozen=True, slots=True)
class ObjectInputs:
    """What template rules read of the object that holds the template."""

    kind: Any  # the object's ``kind`` as given
    namespace: Any  # ``metadata.namespace`` as given (None without one)
    annotations: Any  # the object's annotations that rules read (policies.rule_inputs.annotations_read)
    cluster_policy_owned: bool  # a GPU Operator ClusterPolicy is its controller (policies.operands)
    controller_kind: str | None = None  # the kind of its controller (the ownerReference with controller: true)

    @property
    def namespace_name(self) -> str:
        """The namespace as a string ("" when absent or not a string)."""
        return self.namespace if isinstance(self.namespace, str) else ""

    def annotation_map(self) -> dict[str, Any]:
        return as_dict(self.annotations)


@dataclass(frozen=True, slots=True, eq=False)
class TemplateInputs:
    """One judged pod template, as its rules see it; hashable and compared by ``key``."""

    pod: PodTemplate  # projected (``project``): what the rules read of the template
    of_object: ObjectInputs
    ignored: frozenset[str]  # rule ids the ignore annotation skips on this template
    # The input's DRA objects, when they can matter to this template (policies.engine): their key.
    dra_inputs: bytes = b""
    # Containers that are not the spec's mapping at their path, kept whole (none in any known shape).
    loose_containers: tuple[dict[str, Any], ...] = ()
    # Each container with envFrom: (its path, what each entry is in the run's ConfigMaps and Secrets,
    # policies.env_sources); None when no run was given (an admission review): nothing is known of them.
    env_from: tuple[tuple[tuple[Any, ...], tuple[SourceState, ...]], ...] | None = None
    key: bytes | None = field(default=None, metadata={DERIVED: True})

    @property
    def of_run(self) -> bool:
        """The template comes from a set of manifests being linted (their sources are known, if none),
        not from an admission review or a live cluster."""
        return self.env_from is not None

    def env_source(self, container_path: tuple[Any, ...], index: int) -> SourceState | None:
        """What entry ``index`` of the container's envFrom is in the run; None without a run."""
        if self.env_from is None:
            return None
        for path, states in self.env_from:
            if path == container_path:
                return states[index] if index < len(states) else None
        return None

    def __hash__(self) -> int:
        return hash(self.key) if self.key is not None else id(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TemplateInputs):
            return NotImplemented
        return self is other or (self.key is not None and self.key == other.key)


def project(pod: PodTemplate) -> tuple[PodTemplate, tuple[dict[str, Any], ...]]:
    """The template as rules see it, and the containers kept whole because they are not found at
    their path in the spec (their mapping is then part of the key by itself)."""
    spec = spec_read(pod)
    annotations = pod.metadata.get("annotations")
    metadata: dict[str, Any] = {"annotations": annotations_read(annotations)} if annotations is not None else {}
    if spec is pod.spec:
        containers = pod.containers
        loose = tuple(c.container for c in containers if node_at(pod.spec, c.path) is not c.container)
    else:
        refs = []
        kept: list[dict[str, Any]] = []
        for c in pod.containers:
            mapping = node_at(spec, c.path) if node_at(pod.spec, c.path) is c.container else None
            if not isinstance(mapping, dict):
                mapping = c.container
                kept.append(mapping)
            refs.append(ContainerRef(c.path, mapping, c.kind, c.resources_key, c.shared_mounts, c.base))
        containers, loose = tuple(refs), tuple(kept)
    return _replaced(pod, spec=spec, metadata=metadata, containers=containers), loose


_POD_FIELDS = tuple(f.name for f in dataclasses.fields(PodTemplate))


def _replaced(pod: PodTemplate, **changes: Any) -> PodTemplate:
    """``dataclasses.replace`` for PodTemplate (which has no ``__post_init__``), without its generic
    argument handling: this runs for every judged template."""
    new = object.__new__(PodTemplate)
    for name in _POD_FIELDS:
        object.__setattr__(new, name, changes[name] if name in changes else getattr(pod, name))
    return new


def _digested_fields(cls: type) -> Callable[[Any], list[Any]]:
    """For a dataclass: its name and the values of its compared, non-derived fields, in order."""
    names = tuple(f.name for f in dataclasses.fields(cls) if f.compare and not f.metadata.get(DERIVED))
    name = cls.__name__
    return lambda value: [name, *(getattr(value, n) for n in names)]


_AS_DATA: dict[type, Callable[[Any], list[Any]]] = {}  # one entry per dataclass, built when first met


def _as_data(value: Any) -> Any:
    """orjson's fallback: a dataclass as its type and its digested fields; a set sorted; bytes as hex."""
    as_data = _AS_DATA.get(type(value))
    if as_data is not None:
        return as_data(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        as_data = _AS_DATA[type(value)] = _digested_fields(type(value))
        return as_data(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, bytes):  # a digest (the DRA inputs' key)
        return value.hex()
    raise TypeError(type(value).__name__)


_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS


def inputs_key(inputs: TemplateInputs) -> bytes | None:
    """A 16-byte digest of every non-derived field of ``inputs``, recursively (policies.digest's
    bound); None when some value is not JSON data.  Raises TooDeep past the engine's nesting limit."""
    try:
        data = orjson.dumps(inputs, default=_as_data, option=_OPTIONS)
    except orjson.JSONEncodeError as exc:
        if "Recursion limit" in str(exc):
            raise TooDeep(f"nested deeper than {MAX_DEPTH} levels") from None
        return None
    return hashlib.blake2b(data, digest_size=16).digest()


def template_inputs(
    pod: PodTemplate, obj_inputs: ObjectInputs, ignored: frozenset[str], dra_inputs: bytes = b"",
    env_sources: EnvSources | None = None,
) -> TemplateInputs:
    """The inputs of one template, with their key (None: not JSON data, so never memoised)."""
    projected, loose = project(pod)
    env_from = None if env_sources is None else tuple(
        (tuple(c.path), container_sources(c.container, obj_inputs.namespace_name, env_sources))
        for c in pod.containers if c.container.get("envFrom")
    )
    inputs = TemplateInputs(projected, obj_inputs, ignored, dra_inputs, loose, env_from)
    object.__setattr__(inputs, "key", inputs_key(inputs))
    return inputs


def object_inputs(obj: Mapping[str, Any], cluster_policy_owned: bool) -> ObjectInputs:
    meta = as_dict(obj.get("metadata"))
    return ObjectInputs(obj.get("kind"), meta.get("namespace"), annotations_read(meta.get("annotations")),
                        cluster_policy_owned, _controller_kind(meta.get("ownerReferences")))


def _controller_kind(refs: Any) -> str | None:
    """The kind of the controller reference (at most one has ``controller: true``, apimachinery
    ``metav1.GetControllerOf``), cut to a DNS label's length."""
    for ref in as_list(refs):
        ref = as_dict(ref)
        if ref.get("controller") is True and isinstance(ref.get("kind"), str):
            return str(ref["kind"])[:63]
    return None


def template_key(pod: PodTemplate, obj: Mapping[str, Any] | None = None, ignored: frozenset[str] = frozenset(),
                 cluster_policy_owned: bool = False) -> bytes | None:
    """``inputs_key`` of ``pod`` as a template of ``obj`` (its kind, namespace and annotations)."""
    return template_inputs(pod, object_inputs(obj or {}, cluster_policy_owned), ignored).key
