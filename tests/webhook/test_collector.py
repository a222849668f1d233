"""The server keeps its long-lived startup heap out of the garbage collector's full collections, but
never live facts: a replaced snapshot holds reference cycles, and frozen cycles are never collected."""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policies.config import Config
from policies.facts import ClusterFacts
from webhook import server
from webhook.app import StaticFacts


class _Live:
    """Stands in for LiveFacts: a provider whose snapshots are replaced."""

    ready = True

    def __init__(self) -> None:
        self.snapshot = ClusterFacts.empty()

    def current(self) -> ClusterFacts:
        return self.snapshot


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def _run_worker(monkeypatch: pytest.MonkeyPatch, factory: Any) -> Any:
    made: list[Any] = []

    def make() -> Any:
        made.append(factory())
        return made[0]

    monkeypatch.setattr(server, "run_app", lambda *args, **kwargs: True)
    options = server.ServeOptions(config=Config(), facts_factory=make, tls_cert=Path("unused"), tls_key=Path("unused"))
    with socket.socket() as sock:
        assert server.run_worker(options, sock) == 0
    return made[0]


def _frozen(obj: object) -> bool:
    return not any(o is obj for o in gc.get_objects())


def test_a_snapshot_is_frozen_with_the_startup_heap(monkeypatch: pytest.MonkeyPatch, unfrozen: None) -> None:
    provider = _run_worker(monkeypatch, StaticFacts)
    assert _frozen(provider) and _frozen(server.run_worker)


def test_live_facts_are_never_frozen(monkeypatch: pytest.MonkeyPatch, unfrozen: None) -> None:
    provider = _run_worker(monkeypatch, _Live)
    assert not _frozen(provider) and _frozen(server.run_worker)
