"""Where lookup results are kept: on disk for the CLI, in a bounded memory map for the webhook.

Three kinds of entries, the same in both stores:

* ``(manifest digest, arch) → ImageConfig``, kept forever: a digest names immutable content;
* ``image reference → manifest digest`` (tags), trusted for ``tag_ttl`` seconds: tags move;
* ``(image, arch) → failure detail``, remembered for ``negative_ttl`` seconds, so a hanging or
  refusing registry is not asked again on every run or review.

Disk entries are JSON files written atomically (a temporary file in the same directory, fsync,
rename); an entry that cannot be read or does not have the expected shape is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from policies.images import ImageConfig

MAX_ENTRY_BYTES = 16 << 20
Clock = Callable[[], float]


class Store(Protocol):
    def get_tag(self, ref: str) -> str | None: ...
    def put_tag(self, ref: str, digest: str) -> None: ...
    def get_config(self, digest: str, arch: str) -> ImageConfig | None: ...
    def put_config(self, digest: str, arch: str, config: ImageConfig) -> None: ...
    def get_failure(self, image: str, arch: str) -> str | None: ...
    def put_failure(self, image: str, arch: str, detail: str) -> None: ...


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$GPUGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuguard``, else ``~/.cache/gpuguard``."""
    env = os.environ if env is None else env
    if env.get("GPUGUARD_CACHE_DIR"):
        return Path(env["GPUGUARD_CACHE_DIR"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "gpuguard"
    return Path(env.get("HOME") or Path.home()) / ".cache" / "gpuguard"


def config_to_json(config: ImageConfig) -> dict[str, Any]:
    return {
        "env": [list(pair) for pair in config.env],
        "labels": dict(config.labels),
        "digest": config.digest,
        "source": config.source,
    }


def config_from_json(raw: Any) -> ImageConfig | None:
    if not isinstance(raw, dict):
        return None
    env, labels = raw.get("env"), raw.get("labels")
    digest, source = raw.get("digest"), raw.get("source")
    if not isinstance(env, list) or not isinstance(labels, dict):
        return None
    if not isinstance(digest, str) or not isinstance(source, str):
        return None
    pairs = []
    for item in env:
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            return None
        pairs.append((item[0], item[1]))
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    return ImageConfig(env=tuple(pairs), labels=dict(labels), digest=digest, source=source)


class DiskStore:
    """The CLI's cache under ``root/registry-v1/``; failures to write are noted, never fatal."""

    def __init__(self, root: Path, tag_ttl: float, negative_ttl: float, clock: Clock = time.time) -> None:
        self.root = root / "registry-v1"
        self.tag_ttl = tag_ttl
        self.negative_ttl = negative_ttl
        self.clock = clock
        self.problem = ""  # the first write failure, for a note

    def _path(self, kind: str, key: str) -> Path:
        name = hashlib.sha256(key.encode()).hexdigest()
        return self.root / kind / f"{name}.json"

    def _read(self, kind: str, key: str) -> dict[str, Any] | None:
        path = self._path(kind, key)
        try:
            with path.open("rb") as fh:
                data = fh.read(MAX_ENTRY_BYTES + 1)
            if len(data) > MAX_ENTRY_BYTES:
                return None
            entry = json.loads(data)
        except (OSError, ValueError, UnicodeDecodeError):
            return None  # missing or corrupt: a miss
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        stored = entry.get("stored")
        if isinstance(stored, bool) or not isinstance(stored, (int, float)):
            return None
        return entry

    def _write(self, kind: str, key: str, payload: dict[str, Any]) -> None:
        path = self._path(kind, key)
        body = json.dumps({"key": key, "stored": self.clock(), **payload}, sort_keys=True).encode()
        tmp_name = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "wb") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp_name, path)
            tmp_name = None
        except OSError as exc:
            if not self.problem:
                self.problem = f"cannot write the cache under {self.root}: {exc.strerror or exc}"
        finally:
            if tmp_name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_name)

    def _fresh(self, entry: dict[str, Any], ttl: float) -> bool:
        age = self.clock() - float(entry["stored"])
        return -60.0 <= age < ttl  # a clock far behind the entry is not trusted either

    def get_tag(self, ref: str) -> str | None:
        entry = self._read("tags", ref)
        if entry is None or not self._fresh(entry, self.tag_ttl):
            return None
        digest = entry.get("digest")
        return digest if isinstance(digest, str) else None

    def put_tag(self, ref: str, digest: str) -> None:
        if self.tag_ttl > 0:
            self._write("tags", ref, {"digest": digest})

    def get_config(self, digest: str, arch: str) -> ImageConfig | None:
        entry = self._read("configs", f"{digest} linux/{arch}")
        return config_from_json(entry.get("config")) if entry else None

    def put_config(self, digest: str, arch: str, config: ImageConfig) -> None:
        self._write("configs", f"{digest} linux/{arch}", {"config": config_to_json(config)})

    def get_failure(self, image: str, arch: str) -> str | None:
        entry = self._read("failures", f"{image} linux/{arch}")
        if entry is None or not self._fresh(entry, self.negative_ttl):
            return None
        detail = entry.get("detail")
        return detail if isinstance(detail, str) else None

    def put_failure(self, image: str, arch: str, detail: str) -> None:
        if self.negative_ttl > 0:
            self._write("failures", f"{image} linux/{arch}", {"detail": detail})


class MemoryStore:
    """The webhook's cache: one LRU map of at most ``max_entries`` entries of all kinds."""

    def __init__(
        self, max_entries: int, tag_ttl: float, negative_ttl: float, clock: Clock = time.monotonic
    ) -> None:
        self.max_entries = max_entries
        self.tag_ttl = tag_ttl
        self.negative_ttl = negative_ttl
        self.clock = clock
        self._entries: OrderedDict[tuple[str, str], tuple[float, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _get(self, key: tuple[str, str], ttl: float | None) -> Any:
        found = self._entries.get(key)
        if found is None:
            return None
        stored, value = found
        if ttl is not None and self.clock() - stored >= ttl:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def _put(self, key: tuple[str, str], value: Any) -> None:
        self._entries[key] = (self.clock(), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def get_tag(self, ref: str) -> str | None:
        value = self._get(("tag", ref), self.tag_ttl)
        return value if isinstance(value, str) else None

    def put_tag(self, ref: str, digest: str) -> None:
        if self.tag_ttl > 0:
            self._put(("tag", ref), digest)

    def get_config(self, digest: str, arch: str) -> ImageConfig | None:
        value = self._get(("config", f"{digest} linux/{arch}"), None)
        return value if isinstance(value, ImageConfig) else None

    def put_config(self, digest: str, arch: str, config: ImageConfig) -> None:
        self._put(("config", f"{digest} linux/{arch}"), config)

    def get_failure(self, image: str, arch: str) -> str | None:
        value = self._get(("failure", f"{image} linux/{arch}"), self.negative_ttl)
        return value if isinstance(value, str) else None

    def put_failure(self, image: str, arch: str, detail: str) -> None:
        if self.negative_ttl > 0:
            self._put(("failure", f"{image} linux/{arch}"), detail)
