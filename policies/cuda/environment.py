"""A container's final environment: the image config's Env overridden by the pod's ``env:``.

The container runtime starts the process with the image's ``Env`` and the container's variables
on top (CRI: a container variable replaces an image variable of the same name; the NVIDIA hook
then builds a map in which a later duplicate wins — nvidia-container-toolkit
``internal/config/image/builder.go`` ``WithEnv``).  The kubelet resolves the pod's variables:

* ``value`` as written; a missing ``value`` is the empty string; of duplicate names the last wins;
* ``valueFrom`` (ConfigMap, Secret, field or resource references) is unknown here;
* a value with a ``$(VAR)`` reference is expanded by the kubelet — unknown here;
* ``envFrom`` sources (ConfigMaps, Secrets) set variables gpuguard cannot see, below ``env``:
  with one that may produce the variables the runtime reads (no prefix, or a prefix they start
  with), those variables are unknown unless ``env`` sets them.

(Kubernetes API reference, Container ``env`` / ``envFrom``; kubelet ``makeEnvironmentVariables``.)
Only the variables the NVIDIA runtime reads matter: ``NVIDIA_*`` and ``CUDA_VERSION``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.cuda.require import CUDA_VERSION, UNKNOWN, Environment, EnvValue

_RELEVANT_PREFIX = "NVIDIA_"


def relevant(name: str) -> bool:
    return name.startswith(_RELEVANT_PREFIX) or name == CUDA_VERSION


@dataclass(frozen=True, slots=True)
class PodEnv:
    """What the pod itself does to the variables the runtime reads."""

    values: Mapping[str, EnvValue]  # relevant variables set in ``env:``
    open: bool  # an ``envFrom`` source may set relevant variables too


def pod_env(container: Mapping[str, Any]) -> PodEnv:
    values: dict[str, EnvValue] = {}
    raw_env = container.get("env")
    for item in raw_env if isinstance(raw_env, list) else ():
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            continue
        name = item["name"]
        if not relevant(name):
            continue
        if item.get("valueFrom") is not None:
            values[name] = UNKNOWN
            continue
        value = item.get("value")
        text = "" if value is None else str(value)
        values[name] = UNKNOWN if "$(" in text else text
    opened = False
    raw_from = container.get("envFrom")
    for source in raw_from if isinstance(raw_from, list) else ():
        if not isinstance(source, Mapping):
            continue
        prefix = source.get("prefix")
        prefix = prefix if isinstance(prefix, str) else ""
        if _RELEVANT_PREFIX.startswith(prefix) or prefix.startswith(_RELEVANT_PREFIX) or (
            CUDA_VERSION.startswith(prefix)
        ):
            opened = True
    return PodEnv(values, opened)


def final_environment(image_env: Sequence[tuple[str, str]] | None, pod: PodEnv) -> Environment:
    """The runtime's view: image Env (None: unknown) overridden by the pod's variables."""
    values: dict[str, EnvValue] = {}
    if image_env is not None:
        for name, value in image_env:
            if relevant(name):
                values[name] = value
    if pod.open:
        values = {name: UNKNOWN for name in values}
    values.update(pod.values)
    return Environment(values, complete=image_env is not None and not pod.open)


def image_value(image_env: Sequence[tuple[str, str]], name: str) -> str | None:
    """The last value of ``name`` in an image config's Env (later duplicates win)."""
    found = None
    for key, value in image_env:
        if key == name:
            found = value
    return found
