"""DRA as cluster facts, and the DRA objects of the input under check.

``DraFacts`` is the cluster side, carried by ``ClusterFacts.dra``: its DeviceClasses, ResourceSlices,
ResourceClaims (allocated ones mark devices in use; all of them resolve ``resourceClaimName``) and
ResourceClaimTemplates, with the :class:`~policies.dra.inventory.Inventory` built once per snapshot.
``classes_known`` says whether the cluster's DeviceClasses are known at all: a snapshot of only
``kubectl get nodes`` says nothing about them, so "class X does not exist" is then never claimed.

``DraInputs`` are the DeviceClasses, ResourceClaims and ResourceClaimTemplates of the input being
checked (a face passes them to :func:`policies.engine.evaluate`): layers, nearest first (the
same file, then the other files of a ``gpuguard lint`` run).  A pod's claims resolve to the
nearest layer that has them, then to the cluster.

``DraView`` joins both for the rules: lookups, the inventory (input DeviceClasses added) and where a
claim came from.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from policies.digest import digest
from policies.dra.inventory import Inventory
from policies.dra.matching import MatchCache
from policies.dra.objects import DeviceClass, ResourceClaim, ResourceClaimTemplate

if TYPE_CHECKING:
    from policies.dra.published import Published
from policies.dra.reading import DraObjects, read_objects
from policies.reads import DRA_ASPECTS, DRA_CLAIMS, DRA_DEVICES, DRA_TEMPLATES, note, note_all

Origin = Literal["input", "cluster"]
T = TypeVar("T")


@dataclass(frozen=True)
class DraFacts:
    """The cluster's DRA objects (parsed views) and what they add up to."""

    # Read through the properties and methods below, which record what a computation read
    # (policies.reads): devices (classes and slices), claims and templates apart.
    _objects: DraObjects = field(default_factory=DraObjects)
    _classes_known: bool = False  # the cluster's DeviceClasses were listed (none may exist)

    @property
    def objects(self) -> DraObjects:
        note_all(DRA_ASPECTS)
        return self._objects

    @property
    def classes_known(self) -> bool:
        note(DRA_DEVICES)
        return self._classes_known

    @functools.cached_property
    def inventory(self) -> Inventory:
        o = self._objects
        return Inventory.build(o.classes, o.slices, o.claims)

    @functools.cached_property
    def _match_cache(self) -> MatchCache:
        return {}

    @property
    def match_cache(self) -> MatchCache:
        """Which devices each set of selectors selects (policies.dra.matching), shared per snapshot."""
        note(DRA_DEVICES)
        return self._match_cache

    @functools.cached_property
    def _published(self) -> dict[tuple[bool, tuple[str, ...]], Published | None]:
        return {}

    @property
    def published(self) -> dict[tuple[bool, tuple[str, ...]], Published | None]:
        """What drivers publish (policies.dra.published), per snapshot."""
        note(DRA_DEVICES)
        return self._published

    @functools.cached_property
    def _class_drivers(self) -> dict[tuple[str, ...], tuple[str, ...]]:
        return {}

    @property
    def class_drivers(self) -> dict[tuple[str, ...], tuple[str, ...]]:
        """The drivers of the devices a class's selectors select (policies.dra.published)."""
        note(DRA_DEVICES)
        return self._class_drivers

    @functools.cached_property
    def _templates(self) -> dict[tuple[str, str], ResourceClaimTemplate]:
        return {(t.namespace, t.name): t for t in self._objects.templates}

    @functools.cached_property
    def _claims(self) -> dict[tuple[str, str], ResourceClaim]:
        return {(c.namespace, c.name): c for c in self._objects.claims}

    def same_devices(self, previous: DraFacts) -> bool:
        """Whether the devices and classes are the very same objects as ``previous``'s."""
        return _same(self._objects.slices, previous._objects.slices) and _same(
            self._objects.classes, previous._objects.classes
        )

    def reuse_matches(self, previous: DraFacts) -> None:
        """Keep what ``previous`` worked out of its devices when they and the classes are the very same
        objects: selector answers, drivers, the pools and the reach of each node (claims change with
        every allocation; only what they hold is taken afresh)."""
        if not self.same_devices(previous):
            return
        for name in ("_match_cache", "_class_drivers", "_published"):
            if name in previous.__dict__:
                self.__dict__[name] = previous.__dict__[name]
        if "inventory" in previous.__dict__:
            self.__dict__["inventory"] = previous.inventory.with_claims(self._objects.claims)

    def template(self, namespace: str, name: str) -> ResourceClaimTemplate | None:
        note(DRA_TEMPLATES)
        return _lookup(self._templates, namespace, name)

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        note(DRA_CLAIMS)
        return _lookup(self._claims, namespace, name)

    @property
    def has_devices(self) -> bool:
        note(DRA_DEVICES)
        return bool(self._objects.slices)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _lookup(table: Mapping[tuple[str, str], T], namespace: str, name: str) -> T | None:
    """Exact namespace first; an object checked without a namespace matches a unique name."""
    found = table.get((namespace, name))
    if found is not None or namespace:
        return found
    matches = [v for (_, n), v in table.items() if n == name]
    return matches[0] if len(matches) == 1 else None


def dra_facts_from_objects(objects: Iterable[Any]) -> DraFacts | None:
    """The DRA facts among snapshot objects; None when the snapshot holds no DRA object."""
    parsed = read_objects(objects)
    if not (parsed.classes or parsed.slices or parsed.claims or parsed.templates):
        return None
    return DraFacts(parsed, bool(parsed.classes or parsed.slices))


@dataclass(frozen=True, slots=True)
class InputLayer:
    """DRA objects of one part of the input, with a digest of their content (for memo keys)."""

    objects: DraObjects
    key: bytes


def input_layer(objects: Iterable[Any]) -> InputLayer:
    """The DeviceClasses, ResourceClaims and ResourceClaimTemplates among ``objects``.

    ResourceSlices in an input are not cluster facts (drivers write them), so they are left out.
    """
    raw = [o for o in objects if isinstance(o, Mapping)]
    parsed = read_objects(raw)
    kept = DraObjects(classes=parsed.classes, claims=parsed.claims, templates=parsed.templates)
    kinds = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate")
    content = [
        (o.get("apiVersion"), o.get("kind"), o.get("metadata", {}).get("name") if isinstance(o.get("metadata"), dict)
         else None, o.get("spec"))
        for o in raw
        if o.get("kind") in kinds
    ]
    return InputLayer(kept, digest(content) or b"")


@dataclass(frozen=True, slots=True)
class DraInputs:
    """Layers of input objects, nearest first."""

    layers: tuple[InputLayer, ...] = ()

    @property
    def empty(self) -> bool:
        return not any(_has_objects(layer.objects) for layer in self.layers)

    @property
    def key(self) -> bytes:
        return b"".join(layer.key for layer in self.layers)

    def nearer(self, layer: InputLayer) -> DraInputs:
        return DraInputs((layer, *self.layers))


def _has_objects(o: DraObjects) -> bool:
    return bool(o.classes or o.claims or o.templates)


NO_INPUTS = DraInputs()


@dataclass(frozen=True, slots=True)
class Resolved:
    """A claim or template found for a name, and where."""

    spec_owner: ResourceClaimTemplate | ResourceClaim
    origin: Origin


def _resolved(in_inputs: Iterable[Any], in_cluster: ResourceClaimTemplate | ResourceClaim | None) -> Resolved | None:
    """The nearest input layer's object, else the cluster's (input layers are searched in order)."""
    for found in in_inputs:
        if found is not None:
            return Resolved(found, "input")
    return Resolved(in_cluster, "cluster") if in_cluster is not None else None


def _in_layer(items: Iterable[Any], namespace: str, name: str) -> Any:
    """In an input a missing namespace is the one the objects are applied to: either side may omit it."""
    loose = None
    for item in items:
        if item.name != name:
            continue
        if item.namespace == namespace:
            return item
        if (not item.namespace or not namespace) and loose is None:
            loose = item
    return loose


@dataclass(frozen=True)
class DraView:
    """What the DRA rules read: the cluster's DRA facts (None when unknown) and the input's objects."""

    _cluster: DraFacts | None
    inputs: DraInputs = NO_INPUTS

    @property
    def cluster(self) -> DraFacts | None:
        note(DRA_DEVICES)  # whether the cluster's DRA is known is read here (policies.reads)
        return self._cluster

    def template(self, namespace: str, name: str) -> Resolved | None:
        in_inputs = (_in_layer(layer.objects.templates, namespace, name) for layer in self.inputs.layers)
        return _resolved(in_inputs, self.cluster.template(namespace, name) if self.cluster is not None else None)

    def claim(self, namespace: str, name: str) -> Resolved | None:
        in_inputs = (_in_layer(layer.objects.claims, namespace, name) for layer in self.inputs.layers)
        return _resolved(in_inputs, self.cluster.claim(namespace, name) if self.cluster is not None else None)

    @functools.cached_property
    def input_classes(self) -> dict[str, DeviceClass]:
        out: dict[str, DeviceClass] = {}
        for layer in reversed(self.inputs.layers):  # nearer layers win
            out.update((c.name, c) for c in layer.objects.classes)
        return out

    def device_class(self, name: str) -> DeviceClass | None:
        found = self.input_classes.get(name)
        if found is not None:
            return found
        return self.cluster.inventory.classes.get(name) if self.cluster is not None else None

    @property
    def classes_known(self) -> bool:
        """Whether a class absent here is absent from the cluster."""
        return self.cluster is not None and self.cluster.classes_known

    def class_names(self) -> list[str]:
        names = set(self.input_classes)
        if self.cluster is not None:
            names.update(self.cluster.inventory.classes)
        return sorted(names)

    @functools.cached_property
    def inventory(self) -> Inventory | None:
        """The cluster's inventory with the input's DeviceClasses added; None without cluster devices."""
        if self.cluster is None or not self.cluster.has_devices:
            return None
        base = self.cluster.inventory
        if not self.input_classes:
            return base
        return base.with_classes({**base.classes, **self.input_classes})
