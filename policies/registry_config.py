"""The ``registry:`` config key: whether and how faces read image configs from registries.

    registry:
      enabled: false                 # lookups on (the linter's --registry; the webhook's only switch)
      ca: /etc/ssl/registry-ca.pem   # an extra CA to trust (relative: to the config file)
      insecure: [registry.lan:5000]  # hosts (HOST or HOST:PORT, exactly as in image names) over plain HTTP
      connectTimeoutSeconds: 3
      readTimeoutSeconds: 5
      timeoutSeconds: 15             # one image's whole lookup (tokens, manifests, config blob)
      reviewBudgetMilliseconds: 300  # webhook: longest a review waits for lookups
      tagTTLSeconds: 3600            # how long a tag → digest answer is trusted
      negativeTTLSeconds: 60         # how long a failed lookup is remembered
      maxManifestBytes: 4194304
      maxConfigBytes: 8388608
      cacheEntries: 4096             # webhook: images kept in memory

Pure validation only; the client lives in ``gpuguard.registry``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies import patterns

# Distribution refuses manifests over 4 MiB on push (distribution v2.8.2
# registry/handlers/manifests.go: maxManifestBodySize = 4 << 20), so no registry serves larger ones.
DEFAULT_MAX_MANIFEST_BYTES = 4 << 20
DEFAULT_MAX_CONFIG_BYTES = 8 << 20

_HOST_PORT = patterns.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?$")


class RegistryConfigError(ValueError):
    """A problem in ``registry:``; the message names the key."""


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    enabled: bool = False
    ca: str | None = None
    insecure: tuple[str, ...] = ()
    connect_timeout: float = 3.0
    read_timeout: float = 5.0
    timeout: float = 15.0
    review_budget: float = 0.3
    tag_ttl: float = 3600.0
    negative_ttl: float = 60.0
    max_manifest_bytes: int = DEFAULT_MAX_MANIFEST_BYTES
    max_config_bytes: int = DEFAULT_MAX_CONFIG_BYTES
    cache_entries: int = 4096


# key → (field, kind, minimum); seconds are given as numbers, milliseconds converted
_NUMBERS: dict[str, tuple[str, str, float]] = {
    "connectTimeoutSeconds": ("connect_timeout", "seconds", 0.001),
    "readTimeoutSeconds": ("read_timeout", "seconds", 0.001),
    "timeoutSeconds": ("timeout", "seconds", 0.001),
    "reviewBudgetMilliseconds": ("review_budget", "milliseconds", 0),
    "tagTTLSeconds": ("tag_ttl", "seconds", 0),
    "negativeTTLSeconds": ("negative_ttl", "seconds", 0),
    "maxManifestBytes": ("max_manifest_bytes", "count", 1024),
    "maxConfigBytes": ("max_config_bytes", "count", 1024),
    "cacheEntries": ("cache_entries", "count", 1),
}
KEYS = ("enabled", "ca", "insecure", *_NUMBERS)


def normalise_insecure(entry: str, key: str) -> str:
    text = entry.strip().lower()
    if not _HOST_PORT.match(text):
        raise RegistryConfigError(f"{key}: expected HOST or HOST:PORT (as written in image names), got {entry!r}")
    return text


def parse_registry_settings(raw: Any, key: str = "registry") -> RegistrySettings:
    """Validate the ``registry:`` mapping; raise RegistryConfigError naming the offending key."""
    if raw is None:
        return RegistrySettings()
    if not isinstance(raw, Mapping):
        raise RegistryConfigError(f"{key}: expected a mapping, got {type(raw).__name__}")
    for k in raw:
        if k not in KEYS:
            raise RegistryConfigError(f"{key}.{k}: unknown key (expected one of {', '.join(KEYS)})")
    values: dict[str, Any] = {}
    if "enabled" in raw:
        if not isinstance(raw["enabled"], bool):
            raise RegistryConfigError(f"{key}.enabled: expected true or false, got {raw['enabled']!r}")
        values["enabled"] = raw["enabled"]
    if raw.get("ca") is not None:
        if not isinstance(raw["ca"], str) or not raw["ca"].strip():
            raise RegistryConfigError(f"{key}.ca: expected a file path")
        values["ca"] = raw["ca"]
    insecure = raw.get("insecure") or []
    if not isinstance(insecure, list):
        raise RegistryConfigError(f"{key}.insecure: expected a list of HOST or HOST:PORT")
    entries = []
    for i, entry in enumerate(insecure):
        if not isinstance(entry, str):
            raise RegistryConfigError(f"{key}.insecure[{i}]: expected a string, got {type(entry).__name__}")
        entries.append(normalise_insecure(entry, f"{key}.insecure[{i}]"))
    values["insecure"] = tuple(entries)
    for name, (attr, kind, minimum) in _NUMBERS.items():
        if name not in raw:
            continue
        value = raw[name]
        wanted = int if kind == "count" else (int, float)
        if isinstance(value, bool) or not isinstance(value, wanted):
            what = "an integer" if kind == "count" else "a number"
            raise RegistryConfigError(f"{key}.{name}: expected {what}, got {value!r}")
        if value < minimum:
            raise RegistryConfigError(f"{key}.{name}: must be at least {minimum:g}, got {value!r}")
        values[attr] = value / 1000.0 if kind == "milliseconds" else value
    return RegistrySettings(**values)
