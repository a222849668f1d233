"""Disk and memory caches: TTLs, atomic writes, corrupt entries ignored, bounds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuguard.registry.cache import DiskStore, MemoryStore, cache_dir
from policies.images import ImageConfig

CONFIG = ImageConfig(env=(("CUDA_VERSION", "12.4.1"), ("A", "x=y")), labels={"l": "v"}, digest="sha256:" + "b" * 64,
                     source="registry r, sha256:bbbb…")
DIGEST = "sha256:" + "a" * 64


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_cache_dir_order(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": "/x", "GPUGUARD_CACHE_DIR": "/g"}
    assert cache_dir(env) == Path("/g")
    del env["GPUGUARD_CACHE_DIR"]
    assert cache_dir(env) == Path("/x/gpuguard")
    del env["XDG_CACHE_HOME"]
    assert cache_dir(env) == tmp_path / ".cache" / "gpuguard"


def test_disk_entries_and_ttls(tmp_path: Path) -> None:
    clock = Clock()
    store = DiskStore(tmp_path, tag_ttl=100, negative_ttl=10, clock=clock)
    store.put_tag("r/a:1", DIGEST)
    store.put_config(DIGEST, "amd64", CONFIG)
    store.put_failure("r/a:2", "amd64", "not found")
    again = DiskStore(tmp_path, tag_ttl=100, negative_ttl=10, clock=clock)  # another run
    assert again.get_tag("r/a:1") == DIGEST
    assert again.get_config(DIGEST, "amd64") == CONFIG
    assert again.get_config(DIGEST, "arm64") is None
    assert again.get_failure("r/a:2", "amd64") == "not found"
    clock.now += 11
    assert again.get_failure("r/a:2", "amd64") is None  # negative results are brief
    assert again.get_tag("r/a:1") == DIGEST
    clock.now += 100
    assert again.get_tag("r/a:1") is None  # tags move
    clock.now += 10**9
    assert again.get_config(DIGEST, "amd64") == CONFIG  # digests do not
    leftovers = [p.name for p in (tmp_path / "registry-v1").rglob("*") if p.name.startswith(".tmp-")]
    assert leftovers == []


def test_corrupt_entries_are_misses(tmp_path: Path) -> None:
    store = DiskStore(tmp_path, tag_ttl=100, negative_ttl=10)
    store.put_config(DIGEST, "amd64", CONFIG)
    store.put_tag("r/a:1", DIGEST)
    [config_file] = (tmp_path / "registry-v1" / "configs").iterdir()
    [tag_file] = (tmp_path / "registry-v1" / "tags").iterdir()
    config_file.write_bytes(b"\x00garbage")
    entry = json.loads(tag_file.read_text())
    entry["key"] = "someone/else:1"  # an entry for another key (a collision or a copied file)
    tag_file.write_text(json.dumps(entry))
    assert store.get_config(DIGEST, "amd64") is None
    assert store.get_tag("r/a:1") is None
    config_file.write_text(json.dumps({"key": f"{DIGEST} linux/amd64", "stored": 1, "config": {"env": [["A"]]}}))
    assert store.get_config(DIGEST, "amd64") is None
    store.put_config(DIGEST, "amd64", CONFIG)  # rewritten over the corrupt entry
    assert store.get_config(DIGEST, "amd64") == CONFIG


def test_unwritable_cache_is_a_note_not_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = DiskStore(blocker, tag_ttl=100, negative_ttl=10)
    store.put_tag("r/a:1", DIGEST)
    assert store.get_tag("r/a:1") is None
    assert "cannot write the cache" in store.problem


def test_write_is_atomic_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DiskStore(tmp_path, tag_ttl=100, negative_ttl=10)
    calls: list[str] = []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(src: str, dst: str) -> None:
        calls.append("replace")
        assert Path(src).parent == Path(dst).parent  # same directory: rename is atomic
        real_replace(src, dst)

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "fsync", fsync)
    store.put_tag("r/a:1", DIGEST)
    assert calls == ["fsync", "replace"]


def test_memory_store_is_bounded_lru() -> None:
    clock = Clock()
    store = MemoryStore(max_entries=3, tag_ttl=100, negative_ttl=10, clock=clock)
    store.put_config(DIGEST, "amd64", CONFIG)
    store.put_tag("r/a:1", DIGEST)
    store.put_failure("r/a:2", "amd64", "refused")
    assert store.get_config(DIGEST, "amd64") == CONFIG  # now the most recently used
    store.put_tag("r/a:3", DIGEST)
    assert len(store) == 3
    assert store.get_tag("r/a:1") is None  # the least recently used went
    assert store.get_config(DIGEST, "amd64") == CONFIG
    clock.now += 11
    assert store.get_failure("r/a:2", "amd64") is None
