"""The DRA objects of the inputs being checked: what a pod's claims resolve to before the cluster's.

A manifest set usually carries its ResourceClaimTemplates (and sometimes ResourceClaims and
DeviceClasses) beside the pods that use them: NVIDIA's demos put them in the same file, a chart
renders them into one stream, a kustomization keeps them in sibling files.  ``DraCollector`` picks
them out of texts — only texts that mention ``resource.k8s.io`` are parsed — with the streaming
parser (bounded memory), keeping at most ``MAX_OBJECTS`` objects as parsed views
(``policies.dra.facts.input_layer``).  Input errors are left to the linter, which reports them
when it reads the same text.
"""

from __future__ import annotations

from typing import Any

from gpuguard.sources.picked import MAX_OBJECTS, Collector, objects_in
from policies.dra.facts import NO_INPUTS, DraInputs, InputLayer, input_layer

GROUP = "resource.k8s.io/"
KINDS = frozenset({"DeviceClass", "ResourceClaim", "ResourceClaimTemplate"})


def _wanted(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("apiVersion"), str)
        and data["apiVersion"].startswith(GROUP)
        and data.get("kind") in KINDS
    )


def dra_objects(text: str, name: str, limit: int = MAX_OBJECTS) -> list[dict[str, Any]]:
    """The DeviceClasses, ResourceClaims and ResourceClaimTemplates in ``text`` (Lists flattened)."""
    return objects_in(text, name, GROUP, _wanted, limit)


def layer_of(text: str, name: str) -> InputLayer | None:
    objects = dra_objects(text, name)
    return input_layer(objects) if objects else None


class DraCollector(Collector):
    """The DRA objects of a whole run, gathered text by text."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(dra_objects)

    def inputs(self) -> DraInputs:
        return DraInputs((input_layer(self.objects),)) if self.objects else NO_INPUTS


def with_file(run: DraInputs, text: str, name: str) -> DraInputs:
    """The run's inputs with ``text``'s own objects nearest."""
    layer = layer_of(text, name)
    return run.nearer(layer) if layer is not None else run
