"""Find and load the gpuguard config: ``--config FILE``, else ``.gpuguard.yaml`` upward from cwd."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpuguard.sources.yamlsafe import InputError, load_all_plain, read_text
from policies.config import Config, ConfigError, load_config

CONFIG_NAME = ".gpuguard.yaml"


def find_config(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def load_config_file(explicit: str | None, cwd: Path | None = None) -> tuple[Config, Path | None]:
    """Return the config and the file it came from; raise InputError naming file and key."""
    path = Path(explicit) if explicit else find_config((cwd or Path.cwd()).resolve())
    if path is None:
        return Config(), None
    docs = [d for d in load_all_plain(read_text(path), str(path)) if d is not None]
    if len(docs) > 1:
        raise InputError(str(path), 1, "config must be a single YAML document")
    try:
        config = load_config(docs[0] if docs else None)
    except ConfigError as exc:
        raise InputError(str(path), 1, f"config error: {exc}") from None
    ca = config.registry.ca
    if ca and not Path(ca).is_absolute():  # relative to the config file, wherever gpuguard runs
        registry = dataclasses.replace(config.registry, ca=str(path.parent / ca))
        config = dataclasses.replace(config, registry=registry)
    return config, path
