"""YAML values as PyYAML's safe loader builds them (YAML 1.1), from parse events rather than nodes.

Plain scalars are resolved by PyYAML's own implicit resolvers and built by its own constructors
(so ``yes``, ``0x1F``, ``1_000``, ``1:30`` and ``.inf`` mean what they mean to ``yaml.safe_load``),
except that timestamps stay strings, as Kubernetes keeps them (sigs.k8s.io/yaml converts YAML to
JSON).  ``!!set``, ``!!omap`` and ``!!pairs`` are built as PyYAML builds them; any other tag is an
error, as it is for ``yaml.safe_load``.  Merge keys (``<<``) follow PyYAML's ``flatten_mapping``.
"""

from __future__ import annotations

from typing import Any

import yaml

TAG = "tag:yaml.org,2002:"
STR, MAP, SEQ = TAG + "str", TAG + "map", TAG + "seq"
MERGE, VALUE = TAG + "merge", TAG + "value"
_SET, _OMAP, _PAIRS = TAG + "set", TAG + "omap", TAG + "pairs"
_NULL, _BOOL, _TIMESTAMP = TAG + "null", TAG + "bool", TAG + "timestamp"

_RESOLVERS: dict[str, tuple[tuple[str, Any], ...]] = {
    k: tuple(v) for k, v in yaml.resolver.Resolver.yaml_implicit_resolvers.items() if k is not None
}
_SAFE = yaml.constructor.SafeConstructor()
_BY_NODE = {TAG + t: _SAFE.yaml_constructors[TAG + t] for t in ("int", "float", "binary")}


class UnknownTag(ValueError):
    pass


def resolve(value: str) -> str:
    """The tag of a plain scalar."""
    for tag, regexp in _RESOLVERS.get(value[:1], ()):
        if regexp.match(value):
            return str(tag)
    return STR


def scalar(value: str, tag: str) -> Any:
    """The value of a scalar with a resolved or explicit tag; ValueError (UnknownTag) if impossible."""
    if tag in (STR, _TIMESTAMP):
        return value
    if tag == _NULL:
        return None
    if tag == _BOOL:
        try:
            return _SAFE.bool_values[value.lower()]
        except KeyError:
            raise ValueError(f"{value!r} is not a boolean") from None
    construct = _BY_NODE.get(tag)
    if construct is None:
        raise UnknownTag(f"could not determine a constructor for the tag {tag!r}")
    return construct(_SAFE, yaml.ScalarNode(tag, value))


def special_collection(tag: str, is_map: bool) -> str | None:
    """None for a plain mapping/sequence tag; the tag of a set/omap/pairs; UnknownTag otherwise."""
    if tag == "!" or tag == (MAP if is_map else SEQ):
        return None
    if (is_map and tag == _SET) or (not is_map and tag in (_OMAP, _PAIRS)):
        return tag
    kind = "mapping" if is_map else "sequence"
    raise UnknownTag(f"could not determine a constructor for the tag {tag!r} on a {kind}")


def convert(tag: str, data: Any) -> Any:
    """A set's keys, or an omap's/pairs' items as (key, value) tuples."""
    if tag == _SET:
        return set(data)
    pairs = []
    for item in data:
        if not isinstance(item, dict) or len(item) != 1:
            raise ValueError(f"expected a single mapping item in {tag}")
        pairs.append(next(iter(item.items())))
    return pairs
