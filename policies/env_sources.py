"""The ConfigMaps and Secrets of the inputs being checked, as far as ``envFrom`` reads them.

The kubelet turns each key of an ``envFrom`` source into the variable ``prefix + key``, after the
device plugin's variables and before ``env`` (kubelet_pods.go ``makeEnvironmentVariables``), so a
source that holds ``NVIDIA_VISIBLE_DEVICES`` overrides the device plugin's value.  A source in the
same run as the pod (a chart that renders its ConfigMap beside its Deployment) can be read: what it
sets is then known.  A run that carries sources is a set of manifests someone keeps (lint); where no
run is given (an admission review) nothing is known of any source.

Only the keys that can become ``NVIDIA_VISIBLE_DEVICES`` under some prefix (its non-empty suffixes)
are kept, with their values cut to ``MAX_VALUE_CHARS``; Secret ``data`` is base64 (core/v1 Secret:
"The serialized form of the secret data is a base64 encoded string"), ``stringData`` plain text.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.shapes import as_dict, as_list
from policies.signals import NVIDIA_DEVICE_ENV, env_from_key

MAX_VALUE_CHARS = 200
_SUFFIXES = frozenset(NVIDIA_DEVICE_ENV[i:] for i in range(len(NVIDIA_DEVICE_ENV)))
_REFS = (("ConfigMap", "configMapRef"), ("Secret", "secretRef"))

# What one envFrom source of a container is, for the rules: (kind, name, state, value) where state is
# "read" (in the run: ``value`` is the NVIDIA_VISIBLE_DEVICES it gives, None when it gives none) or
# "absent" (the run carries sources, not this one).
SourceState = tuple[str, str, str, str | None]


def is_env_source(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("apiVersion") == "v1" and obj.get("kind") in ("ConfigMap", "Secret")


def _decoded(kind: str, field_name: str, value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    if kind == "Secret" and field_name == "data":
        try:
            return base64.b64decode(value[: MAX_VALUE_CHARS * 2], validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            return None
    return value


@dataclass(frozen=True, slots=True)
class EnvSources:
    """ConfigMaps and Secrets by (kind, namespace, name): the device-variable keys each holds."""

    sources: Mapping[tuple[str, str, str], Mapping[str, str | None]] = field(default_factory=dict)

    def state(self, kind: str, namespace: str, name: str, prefix: str) -> tuple[str, str | None]:
        found = self.sources.get((kind, namespace, name))
        if found is None and namespace:
            found = self.sources.get((kind, "", name))  # a manifest without a namespace is applied to the pod's
        if found is None:
            return "absent", None
        key = env_from_key(NVIDIA_DEVICE_ENV, prefix)
        if key is None or key not in found:
            return "read", None
        value = found[key]
        return "read", ("" if value is None else value[:MAX_VALUE_CHARS])

    def nearer(self, objects: Iterable[Any]) -> EnvSources:
        """These sources with ``objects``' own over them (a text's own, nearest)."""
        own = env_sources(objects).sources
        return EnvSources({**self.sources, **own}) if own else self


NO_SOURCES = EnvSources()


def env_sources(objects: Iterable[Any]) -> EnvSources:
    sources: dict[tuple[str, str, str], dict[str, str | None]] = {}
    for obj in objects:
        if not is_env_source(obj):
            continue
        meta = as_dict(obj.get("metadata"))
        name, namespace = meta.get("name"), meta.get("namespace") or ""
        if not isinstance(name, str) or not isinstance(namespace, str):
            continue
        kind = str(obj["kind"])
        keys: dict[str, str | None] = {}
        for field_name in ("data", "stringData", "binaryData"):
            for key, value in as_dict(obj.get(field_name)).items():
                if isinstance(key, str) and key in _SUFFIXES:
                    keys[key] = _decoded(kind, field_name, value) if field_name != "binaryData" else None
        sources[(kind, namespace, name)] = keys
    return EnvSources(sources)


def container_sources(container: Mapping[str, Any], namespace: str, run: EnvSources) -> tuple[SourceState, ...]:
    """What each ``envFrom`` entry of ``container`` is in ``run``, in order (entries that name no
    ConfigMap or Secret: ("", "", "absent", None))."""
    states: list[SourceState] = []
    for source in as_list(container.get("envFrom")):
        entry = as_dict(source)
        prefix = entry.get("prefix") if isinstance(entry.get("prefix"), str) else ""
        for kind, ref in _REFS:
            name = as_dict(entry.get(ref)).get("name")
            if isinstance(name, str):
                state, value = run.state(kind, namespace, name, str(prefix))
                states.append((kind, name, state, value))
                break
        else:
            states.append(("", "", "absent", None))
    return tuple(states)
