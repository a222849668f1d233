"""The policy config the webhook answers with, reloaded when its file changes.

A ConfigMap mounted as a volume is updated in place by the kubelet (it swaps the ``..data``
symlink), so ``ReloadingConfig`` checks the file's contents every ``interval`` seconds: a valid edit
is applied to the next review; an invalid one is logged and counted and the last good config stays
in force, so a bad edit never takes enforcement down (and is visible at once, not at the next pod
restart).  Reviews read ``current()``, one reference swap; nothing blocks them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gpuguard.sources.configfile import load_config_file
from gpuguard.sources.yamlsafe import InputError
from policies.config import Config

log = logging.getLogger("gpuguard.config")

ReloadResult = Callable[[str], None]  # "ok" | "invalid" | "unreadable"


class ConfigSource(Protocol):
    def current(self) -> Config: ...


class StaticConfig:
    def __init__(self, config: Config) -> None:
        self._config = config

    def current(self) -> Config:
        return self._config


class ReloadingConfig:
    """A config file watched for changes; ``run()`` is the polling task."""

    def __init__(self, path: Path, initial: Config, on_result: ReloadResult | None = None) -> None:
        self.path = path
        self._config = initial
        self._digest = self._read_digest()
        self.on_result = on_result
        self.loaded_at = time.time()

    def current(self) -> Config:
        return self._config

    def _read_digest(self) -> str | None:
        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError:
            return None

    def check(self) -> str | None:
        """Reload if the file changed; the result ("ok", "invalid", "unreadable") or None if unchanged."""
        digest = self._read_digest()
        if digest == self._digest:
            return None
        if digest is None:
            # A ConfigMap update never removes the file; keep the last good config meanwhile
            # (and report it once, not at every check).
            self._digest = None
            log.error("config %s cannot be read; keeping the config loaded at %s", self.path, _when(self.loaded_at))
            return self._report("unreadable")
        self._digest = digest
        try:
            config, _ = load_config_file(str(self.path))
        except InputError as exc:
            log.error("config %s is invalid, keeping the previous one: %s", self.path, exc.message)
            return self._report("invalid")
        self._config = config
        self.loaded_at = time.time()
        log.info("config %s reloaded (sha256 %s)", self.path, digest[:12])
        return self._report("ok")

    def _report(self, result: str) -> str:
        if self.on_result is not None:
            self.on_result(result)
        return result

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.check()


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))
