"""CEL types as the checker sees them, and the declaration of the DRA ``device`` variable.

Type names print the way cel-go's ``FormatCELType`` prints them (checker/format.go), so
messages such as ``found no matching overload for '_>_' applied to '(string, int)'`` read
like the API server's.

The ``device`` declaration and the size bounds come from
k8s.io/dynamic-resource-allocation cel/compile.go (``newCompiler``) and the limits in
k8s.io/api resource/v1 types.go: driver names ≤ 63 characters, ≤ 32 attributes and
capacities per device, domains ≤ 63 and identifiers ≤ 32 characters, attribute values ≤ 64
(strings) or 48 (list attributes) long.  compile.go estimates costs against the newest
declaration (list-type attributes as ``dyn``, max 64 elements).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CelType:
    kind: str  # bool int uint double string bytes null dyn list map type object param error
    name: str = ""  # object type name, or type-parameter name
    params: tuple[CelType, ...] = ()

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.kind == "type":
            return f"type({self.params[0]})" if self.params else "type"
        if self.kind in ("object", "param"):
            return self.name
        if self.kind == "error":
            return "!error!"
        return self.kind

    @property
    def is_dyn(self) -> bool:
        return self.kind == "dyn"


BOOL = CelType("bool")
INT = CelType("int")
UINT = CelType("uint")
DOUBLE = CelType("double")
STRING = CelType("string")
BYTES = CelType("bytes")
NULL = CelType("null")
DYN = CelType("dyn")
ERROR = CelType("error")
SEMVER = CelType("object", "kubernetes.Semver")
QUANTITY = CelType("object", "kubernetes.Quantity")
DEVICE = CelType("object", "kubernetes.DRADevice")


def list_of(elem: CelType) -> CelType:
    return CelType("list", params=(elem,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType("map", params=(key, value))


def type_of(t: CelType) -> CelType:
    return CelType("type", params=(t,))


def param(name: str) -> CelType:
    return CelType("param", name)


SCALARS = frozenset({"bool", "int", "uint", "double"})  # checker/cost.go isScalar (no strings)


# --- the DRA device --------------------------------------------------------------------------

DRIVER_NAME_MAX = 63  # resourceapi.DriverNameMaxLength
DOMAIN_MAX = 63  # resourceapi.DeviceMaxDomainLength
ID_MAX = 32  # resourceapi.DeviceMaxIDLength
ATTRIBUTES_MAX = 32  # resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice
ATTRIBUTE_VALUE_MAX = 64  # max(DeviceAttributeMaxValueLength 64, ResourceSliceMaxAttributeValuesPerDevice 48)
LIST_ATTRIBUTE_VALUES_MAX = 48  # resourceapi.ResourceSliceMaxAttributeValuesPerDevice

ATTRIBUTE_VALUE = DYN
ATTRIBUTES = map_of(STRING, map_of(STRING, ATTRIBUTE_VALUE))
CAPACITY = map_of(STRING, map_of(STRING, QUANTITY))

DEVICE_FIELDS: dict[str, CelType] = {
    "driver": STRING,
    "attributes": ATTRIBUTES,
    "capacity": CAPACITY,
    "allowMultipleAllocations": BOOL,  # only with DRAConsumableCapacity
}
GATED_DEVICE_FIELDS = {"allowMultipleAllocations": "DRAConsumableCapacity"}


@dataclass(frozen=True, slots=True)
class SizeNode:
    """One level of compile.go's size estimator: max elements, and what lies beneath."""

    max_elements: int
    fields: dict[str, SizeNode] | None = None
    keys: SizeNode | None = None
    values: SizeNode | None = None
    attribute_map: bool = False  # unknown field names resolve to the attribute value bound


_ATTRIBUTE_VALUE_SIZE = SizeNode(ATTRIBUTE_VALUE_MAX)
_DOMAIN_SIZE = SizeNode(DOMAIN_MAX)
_ID_SIZE = SizeNode(ID_MAX)
_INNER_ATTRIBUTES = SizeNode(ATTRIBUTES_MAX, keys=_ID_SIZE, values=_ATTRIBUTE_VALUE_SIZE, attribute_map=True)
_INNER_CAPACITY = SizeNode(ATTRIBUTES_MAX, keys=_ID_SIZE, values=None)

DEVICE_SIZES = SizeNode(
    0,
    fields={
        "driver": SizeNode(DRIVER_NAME_MAX),
        "attributes": SizeNode(ATTRIBUTES_MAX, keys=_DOMAIN_SIZE, values=_INNER_ATTRIBUTES),
        "capacity": SizeNode(ATTRIBUTES_MAX, keys=_DOMAIN_SIZE, values=_INNER_CAPACITY),
        "allowMultipleAllocations": SizeNode(1),
    },
)


def size_of_path(path: tuple[str, ...]) -> int | None:
    """compile.go ``sizeEstimator.EstimateSize``: the max size of ``device.<path>``, if known."""
    if not path or path[0] != "device":
        return None
    node: SizeNode | None = DEVICE_SIZES
    for step in path[1:]:
        if node is None:
            return None
        if step in ("@items", "@values"):
            node = node.values
        elif step == "@keys":
            node = node.keys
        elif node.fields is not None and step in node.fields:
            node = node.fields[step]
        elif node.attribute_map:
            node = node.values
        else:
            return None
    return None if node is None else node.max_elements
