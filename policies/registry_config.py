"""The ``registry:`` config key: whether and how faces read image configs from registries.

``RegistrySettings`` holds what the faces use, with their defaults; the keys of ``registry:`` (in
seconds, and milliseconds for the webhook's review budget) are declared by the config model
(``gpuguard.sources.configmodel``; ``gpuguard config schema`` prints them).  Pure settings only;
the client lives in ``gpuguard.registry``.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies import patterns

# Distribution refuses manifests over 4 MiB on push (distribution v2.8.2
# registry/handlers/manifests.go: maxManifestBodySize = 4 << 20), so no registry serves larger ones.
DEFAULT_MAX_MANIFEST_BYTES = 4 << 20
DEFAULT_MAX_CONFIG_BYTES = 8 << 20

_HOST_PORT = patterns.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?$")


class RegistryConfigError(ValueError):
    """A registry setting that is not valid; the message names the setting."""


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


def normalise_insecure(entry: str, key: str | None = None) -> str:
    """A registry host as image names write it (``HOST`` or ``HOST:PORT``), lower-cased; the error
    names ``key`` when given."""
    text = entry.strip().lower()
    if not _HOST_PORT.match(text):
        problem = f"expected HOST or HOST:PORT (as written in image names), got {entry!r}"
        raise RegistryConfigError(f"{key}: {problem}" if key else problem)
    return text
