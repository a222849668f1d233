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
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gpuguard.sources.configfile import load_config_file
from gpuguard.sources.yamlsafe import InputError, load_all_plain
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
        content = _read_regular(self.path)
        return None if content is None else hashlib.sha256(content).hexdigest()

    def check(self) -> str | None:
        """Reload if the file changed; the result ("ok", "invalid", "unreadable") or None if unchanged."""
        content = _read_regular(self.path)
        digest = None if content is None else hashlib.sha256(content).hexdigest()
        if digest == self._digest:
            return None
        if content is None or digest is None:
            # A ConfigMap update never removes the file; keep the last good config meanwhile
            # (and report it once, not at every check).
            self._digest = None
            log.error("config %s cannot be read (or is no regular file); keeping the config loaded at %s",
                      self.path, _when(self.loaded_at))
            return self._report("unreadable")
        self._digest = digest
        try:
            if not _holds_a_document(content, str(self.path)):
                # What a truncated or half-written file looks like; applying it would reset every
                # setting to the permissive defaults.
                log.error("config %s holds no settings (empty); keeping the config loaded at %s", self.path,
                          _when(self.loaded_at))
                return self._report("invalid")
            config, _ = load_config_file(str(self.path))
        except InputError as exc:
            log.error("config %s is invalid, keeping the previous one: %s: %s", self.path, exc.where, exc.message)
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


MAX_CONFIG_BYTES = 1 << 20  # a ConfigMap holds at most 1 MiB


def _holds_a_document(content: bytes, name: str) -> bool:
    """Whether the YAML holds a non-empty document (comments and blank lines alone are none)."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return True  # let the loader say what is wrong with it
    return any(d is not None for d in load_all_plain(text, name))


def _read_regular(path: Path) -> bytes | None:
    """The file's bytes when it is a regular file of at most MAX_CONFIG_BYTES; None otherwise.

    Opened without blocking and checked before reading: a FIFO at the path would otherwise hang
    every reload (and the event loop) while /healthz kept answering."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CONFIG_BYTES:
            return None
        chunks = []
        size = 0
        while chunk := os.read(fd, 65536):
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:
                return None
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))
