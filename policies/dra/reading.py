"""Sort Kubernetes objects (Lists flattened) into the DRA views by kind."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from policies.dra.claims import parse_resource_claim, parse_resource_claim_template
from policies.dra.objects import GROUP, DeviceClass, Problem, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from policies.dra.slices import parse_device_class, parse_resource_slice
from policies.shapes import as_list


@dataclass(frozen=True, slots=True)
class DraObjects:
    classes: tuple[DeviceClass, ...] = ()
    slices: tuple[ResourceSlice, ...] = ()
    claims: tuple[ResourceClaim, ...] = ()
    templates: tuple[ResourceClaimTemplate, ...] = ()


def is_dra(obj: Mapping[str, Any]) -> bool:
    return str(obj.get("apiVersion") or "").split("/")[0] == GROUP


def _flatten(objects: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for obj in objects:
        if not isinstance(obj, Mapping):
            continue
        if str(obj.get("kind") or "").endswith("List") and isinstance(obj.get("items"), list):
            yield from _flatten(as_list(obj.get("items")))
        else:
            yield obj


# Classic DRA (resource.k8s.io/v1alpha2: ResourceClass, resourceClassName, parametersRef) was served
# by Kubernetes 1.26-1.30 and removed in 1.31 (k8s.io/api tags; dra.md §1.1).
REMOVED_VERSIONS = {"v1alpha1", "v1alpha2"}
View = TypeVar("View", DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate)


def _removed(obj: Mapping[str, Any], view: View) -> View:
    version = str(obj.get("apiVersion") or "").partition("/")[2]
    if version not in REMOVED_VERSIONS:
        return view
    message = f"{GROUP}/{version} is not served since Kubernetes 1.31 (classic DRA was removed); use {GROUP}/v1"
    return replace(view, problems=(Problem("/apiVersion", message), *view.problems))


def read_objects(objects: Iterable[Any]) -> DraObjects:
    """DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates among ``objects``."""
    classes: list[DeviceClass] = []
    slices: list[ResourceSlice] = []
    claims: list[ResourceClaim] = []
    templates: list[ResourceClaimTemplate] = []
    for obj in _flatten(objects):
        if not is_dra(obj):
            continue
        kind = obj.get("kind")
        if kind == "DeviceClass":
            classes.append(_removed(obj, parse_device_class(obj)))
        elif kind == "ResourceSlice":
            slices.append(_removed(obj, parse_resource_slice(obj)))
        elif kind == "ResourceClaim":
            claims.append(_removed(obj, parse_resource_claim(obj)))
        elif kind == "ResourceClaimTemplate":
            templates.append(_removed(obj, parse_resource_claim_template(obj)))
    return DraObjects(tuple(classes), tuple(slices), tuple(claims), tuple(templates))
