"""The TLS port's connection gate: per-source shares and which connection makes room at the cap."""

from __future__ import annotations

from typing import Any, cast

from webhook.protocol import ConnectionLimits, _Gate


class Conn:
    def __init__(self, gate: _Gate, source: str, serving: bool = False) -> None:
        self.gate, self.source, self.busy, self.evicted = gate, source, serving, False

    def serving(self) -> bool:
        return self.busy

    def evict(self) -> None:
        self.evicted = True
        self.gate.leave(cast(Any, self), self.source)


def admit(gate: _Gate, source: str, serving: bool = False) -> tuple[Conn, str | None]:
    conn = Conn(gate, source, serving)
    return conn, gate.admit(cast(Any, conn), source)


def test_a_source_over_its_share_is_refused() -> None:
    gate = _Gate(ConnectionLimits(max_connections=10, max_connections_per_source=3))
    for _ in range(3):
        assert admit(gate, "10.0.0.9")[1] is None
    assert admit(gate, "10.0.0.9")[1] == "too_many_connections_from_source"
    assert admit(gate, "10.0.0.1")[1] is None
    assert gate.open == 4


def test_at_the_cap_the_oldest_idle_connection_of_the_biggest_holder_makes_room() -> None:
    gate = _Gate(ConnectionLimits(max_connections=5, max_connections_per_source=5))
    attacker = [admit(gate, "10.0.0.9")[0] for _ in range(3)]
    other = [admit(gate, "10.0.0.8")[0] for _ in range(2)]
    apiserver, refused = admit(gate, "10.0.0.1")
    assert refused is None and gate.open == 5
    assert [c.evicted for c in attacker] == [True, False, False]
    assert not any(c.evicted for c in other)
    assert not apiserver.evicted


def test_connections_serving_a_request_are_never_evicted() -> None:
    gate = _Gate(ConnectionLimits(max_connections=3, max_connections_per_source=3))
    busy = [admit(gate, "10.0.0.9", serving=True)[0] for _ in range(2)]
    idle, _ = admit(gate, "10.0.0.8")
    assert admit(gate, "10.0.0.1", serving=True)[1] is None and idle.evicted  # the only one not serving
    assert admit(gate, "10.0.0.2")[1] == "too_many_connections"  # everyone left is serving
    assert not any(c.evicted for c in busy) and gate.open == 3


def test_leaving_frees_the_place_once() -> None:
    gate = _Gate(ConnectionLimits(max_connections=2, max_connections_per_source=2))
    conn, _ = admit(gate, "10.0.0.9")
    gate.leave(cast(Any, conn), "10.0.0.9")
    gate.leave(cast(Any, conn), "10.0.0.9")  # an evicted connection is reported lost again later
    assert gate.open == 0 and gate.by_source == {}
