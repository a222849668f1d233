"""LiveFacts lists and watches Dynamic Resource Allocation (resource.k8s.io) with the real ``kubernetes``
client against the in-process API server: DeviceClasses, ResourceSlices, ResourceClaims and templates
become ``ClusterFacts.dra``; an API that is not served is no DRA; an older version is used when v1 is
not served.

Objects come from tests/fixtures/dra/nvidia-mixed-cluster.yaml (shaped like NVIDIA's DRA driver
publishes them; see its header).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from policies import Config, evaluate
from policies.effective_facts import effective_facts
from tests.support.fake_apiserver import DRA_RESOURCES, LIST_META, PATHS, TYPE_META, FakeApiServer, serving
from tests.support.paths import FIXTURES, load_yaml_docs
from tests.webhook.test_live_facts import start_live

pytestmark = pytest.mark.integration

MIXED = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"
RESOURCE_OF = {
    "Node": "nodes",
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
}


def cluster_objects() -> list[dict[str, Any]]:
    (doc,) = load_yaml_docs(MIXED)
    items: list[dict[str, Any]] = doc["items"]
    return items


def serve_cluster(state: FakeApiServer) -> None:
    for obj in cluster_objects():
        state.put(RESOURCE_OF[obj["kind"]], obj)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer(("nodes", "runtimeclasses", "nodepools", *DRA_RESOURCES))
    serve_cluster(state)
    with serving(state):
        yield state


def gpu_pod(**spec: Any) -> dict[str, Any]:
    """NVIDIA demo/specs/quickstart/v1/gpu-test1.yaml's pod (its template is in the cluster)."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "gpu-test1", "name": "pod1"},
        "spec": {
            "containers": [{"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            **spec,
        },
    }


def errors(obj: dict[str, Any], facts: Any) -> list[str]:
    return sorted(f.rule for f in evaluate(obj, Config(), facts).findings if f.severity.name == "ERROR")


def test_dra_objects_are_listed_and_become_facts(api: FakeApiServer) -> None:
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready and live.current().dra is not None, "DRA facts")
        facts = live.current()
        dra = facts.dra
        assert dra is not None and dra.classes_known
        assert sorted(dra.inventory.classes) == ["gpu.nvidia.com", "mig.nvidia.com"]
        assert sorted(str(p) for p in dra.inventory.pools) == [
            "gpu.nvidia.com/dra-h100-0", "gpu.nvidia.com/dra-mig-0", "gpu.nvidia.com/mixed-l4-0",
        ]
        # list items carry no apiVersion: the claims were still read with their version's shape
        assert dra.template("gpu-test4", "mig-devices") is not None
        assert [str(d) for d in dra.inventory.allocated] == ["gpu.nvidia.com/dra-h100-0/gpu-0"]
        served = {n.name: n for n in effective_facts(facts, Config()).nodes}
        assert served["dra-h100-0"].allocatable["nvidia.com/gpu"] == Fraction(4)
        assert served["dra-h100-0"].dra_served[0] == ("nvidia.com/gpu", "gpu.nvidia.com")
        assert served["mixed-l4-0"].dra_conflicts
        assert errors(gpu_pod(nodeSelector={"pool": "h100"}), facts) == []
        assert errors(gpu_pod(nodeSelector={"pool": "a100"}), facts) == ["gpu-dra-unsatisfiable"]
    finally:
        live.stop()


def test_watched_changes_reach_the_rules(api: FakeApiServer) -> None:
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready and live.current().dra is not None, "DRA facts")
        pinned = gpu_pod(nodeSelector={"pool": "h100"})
        assert errors(pinned, live.current()) == []

        # The scheduler allocates the two remaining untainted H100s to other claims.
        for i, device in ((1, "gpu-1"), (2, "gpu-2")):
            claim = copy.deepcopy(next(o for o in cluster_objects() if o["kind"] == "ResourceClaim"))
            claim["metadata"]["name"] = f"other-{i}"
            claim["status"]["allocation"]["devices"]["results"][0]["device"] = device
            api.put("resourceclaims", claim)
        recorder.wait_for(lambda: len(live.current().dra.inventory.allocated) == 3, "allocated claims")  # type: ignore[union-attr]
        assert errors(pinned, live.current()) == ["gpu-dra-unsatisfiable"]

        api.delete("resourceclaims", "team-a/other-2")
        recorder.wait_for(lambda: len(live.current().dra.inventory.allocated) == 2, "a released claim")  # type: ignore[union-attr]
        assert errors(pinned, live.current()) == []

        api.delete("deviceclasses", "gpu.nvidia.com")
        recorder.wait_for(
            lambda: "gpu.nvidia.com" not in live.current().dra.inventory.classes,  # type: ignore[union-attr]
            "a deleted DeviceClass",
        )
        assert errors(pinned, live.current()) == ["gpu-dra-device-class"]
    finally:
        live.stop()


def test_an_api_not_served_is_no_dra(api: FakeApiServer) -> None:
    api.absent.update(DRA_RESOURCES)
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready, "ready without DRA")
        assert live.current().dra is None
        # every version was asked for: v1, v1beta2, v1beta1 (the fake answers 404 for the unknown paths)
        assert all(api.list_calls[r] >= 1 for r in DRA_RESOURCES)
        assert errors(gpu_pod(), live.current()) == []  # nothing known: nothing claimed
    finally:
        live.stop()


def test_an_older_version_is_used_when_v1_is_not_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Kubernetes 1.32 cluster serves resource.k8s.io/v1beta1 only; its requests are flat."""
    for resource in DRA_RESOURCES:
        monkeypatch.delitem(PATHS, f"/apis/resource.k8s.io/v1/{resource}")
        monkeypatch.setitem(PATHS, f"/apis/resource.k8s.io/v1beta1/{resource}", resource)
        # the server routes resource paths by TYPE_META's group/version
        monkeypatch.setitem(TYPE_META, resource, {**TYPE_META[resource], "apiVersion": "resource.k8s.io/v1beta1"})
        monkeypatch.setitem(LIST_META, resource, {**LIST_META[resource], "apiVersion": "resource.k8s.io/v1beta1"})
    state = FakeApiServer(("nodes", "runtimeclasses", "nodepools", *DRA_RESOURCES))
    serve_cluster(state)
    # NVIDIA demo/specs/quickstart/v1beta1/gpu-test1.yaml's template, as a v1beta1 server stores it
    state.put("resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate",
        "metadata": {"namespace": "beta", "name": "single-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}}},
    })
    with serving(state):
        live, recorder = start_live(state)
        try:
            recorder.wait_for(lambda: live.ready and live.current().dra is not None, "v1beta1 DRA facts")
            dra = live.current().dra
            assert dra is not None
            template = dra.template("beta", "single-gpu")
            assert template is not None and template.spec.problems == ()
            (request,) = template.spec.requests
            assert request.exactly is not None and request.exactly.device_class_name == "gpu.nvidia.com"
        finally:
            live.stop()
