"""LiveFacts watches Karpenter NodePools when the CRD exists, and notices a CRD installed later.

The real ``kubernetes`` client talks to the in-process fake API server, which answers 404 for
``/apis/karpenter.sh/v1/nodepools`` until a test "installs" the CRD.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import pytest

from policies import evaluate
from tests.support.fake_apiserver import FakeApiServer, cpu_node, nodepool, serving
from tests.webhook.test_live_facts import start_live

pytestmark = pytest.mark.integration


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer()
    state.put("nodes", cpu_node("system-1"))
    with serving(state):
        yield state


def pool_names(facts_pools: tuple[object, ...]) -> list[str]:
    return sorted(getattr(p, "name", "") for p in facts_pools)


def test_nodepools_are_listed_and_watched(api: FakeApiServer) -> None:
    api.absent.discard("nodepools")
    api.put("nodepools", nodepool("gpu", ["g5"]))
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready and bool(live.current().pools), "the NodePool")
        (pool,) = live.current().pools
        assert pool.name == "gpu" and pool.allocatable == {"nvidia.com/gpu": Fraction(8)}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
        assert [f.rule for f in evaluate(pod, None, live.current()).findings if f.severity.name == "ERROR"] == []

        api.put("nodepools", nodepool("gpu", ["p5"]))
        recorder.wait_for(
            lambda: [p.labels.get("karpenter.k8s.aws/instance-family") for p in live.current().pools] == ["p5"],
            "MODIFIED NodePool",
        )
        api.put("nodepools", nodepool("cpu", ["m7i"], taint=False))
        recorder.wait_for(lambda: pool_names(live.current().pools) == ["cpu", "gpu"], "ADDED NodePool")
        api.delete("nodepools", "gpu")
        recorder.wait_for(lambda: pool_names(live.current().pools) == ["cpu"], "DELETED NodePool")
        assert api.list_calls["nodepools"] == 1  # one list, then the watch
    finally:
        live.stop()


def test_a_crd_installed_later_is_picked_up_without_a_restart(api: FakeApiServer) -> None:
    live, recorder = start_live(api, crd_recheck_seconds=0.05)
    try:
        recorder.wait_for(lambda: live.ready, "ready without the CRD")
        assert live.current().pools == ()
        assert live.age_seconds() is not None  # an absent CRD does not make the facts look stale
        api.absent.discard("nodepools")
        api.put("nodepools", nodepool("gpu", ["g6e"]))
        recorder.wait_for(lambda: pool_names(live.current().pools) == ["gpu"], "the NodePool after the CRD")
        assert api.list_calls["nodepools"] >= 2
    finally:
        live.stop()
