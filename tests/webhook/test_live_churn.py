"""Live facts under churn give the verdicts fresh facts give: a property test.

A random sequence of watch events (GFD relabels, heartbeats, taints, cordons, label and
allocatable changes, nodes joining and leaving, DRA claims allocated and released, ResourceSlices
published and withdrawn, RuntimeClasses, ResourceQuotas edited, their status updated and deleted) is fed to ``LiveFacts`` as its reflectors feed it, with
snapshots published at random points.  At every publish point, probe pods are evaluated on the
incremental snapshot (warming memos that later snapshots inherit) and on ``ClusterFacts`` built
afresh from the same objects: findings, skipped rules and patches must be identical.

The cluster starts from tests/fixtures/dra/nvidia-mixed-cluster.yaml (NVIDIA's DRA driver shapes,
see its header) plus device-plugin GPU nodes (tests/support/cluster_objects.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuguard.sources.configmodel import load_config
from policies import Config, evaluate
from policies.dra.facts import DraFacts
from policies.dra.reading import DraObjects
from policies.facts import ClusterFacts
from policies.queue_facts import QueueFacts
from policies.quota_facts import QuotaFacts
from tests.support.cluster_objects import GPU_TOLERATION, node
from tests.support.fake_apiserver import FakeApiServer, gpu_node, serving
from tests.support.fake_apiserver import runtime_class as runtime_class_obj
from tests.support.paths import FIXTURES, load_yaml_docs
from tests.webhook.test_live_facts import start_live
from webhook.live_facts import LiveFacts

MIXED = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"
RESOURCE_OF = {
    "Node": "nodes",
    "RuntimeClass": "runtimeclasses",
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
}
NODE_NAMES = ("dp-a100-0", "dra-h100-0", "dra-mig-0", "mixed-l4-0", "h100-0", "h100-1", "a100-0", "a100-1")
EXTRA_NODES = ("h100-2", "a100-2")
CLAIM_NAMES = ("trainer-gpu", "shared-gpu", "other-gpu")
CONFIGS = (
    Config(),
    load_config({"nodePools": [{"name": "h100-spare", "labels": {"pool": "spare"},
                                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                                "resources": {"nvidia.com/gpu": 8}, "gpuProduct": "NVIDIA-H100-80GB-HBM3",
                                "driverVersion": "570.124.06"}]}),
)


def runtime_class() -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
            "handler": "nvidia", "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}}


def initial_objects() -> list[dict[str, Any]]:
    (doc,) = load_yaml_docs(MIXED)
    objects: list[dict[str, Any]] = list(doc["items"])
    for name in ("h100-0", "h100-1"):
        objects.append(node(name))
    for name in ("a100-0", "a100-1"):
        objects.append(node(name, product="NVIDIA-A100-SXM4-80GB", instance="p4d.24xlarge"))
    objects.append(runtime_class())
    for obj in objects:
        if obj["kind"] == "Node":
            obj["metadata"]["labels"]["pool"] = obj["metadata"]["name"].rsplit("-", 1)[0]
    return objects


# --- events ------------------------------------------------------------------------------------
def _node_event(kind: str) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.tuples(st.just(kind), st.sampled_from(NODE_NAMES))


EVENTS = st.one_of(
    _node_event("gfd"),
    _node_event("heartbeat"),
    _node_event("taint"),
    _node_event("untaint"),
    _node_event("cordon"),
    st.tuples(st.just("label"), st.sampled_from(NODE_NAMES), st.sampled_from(("h100", "a100", "spare"))),
    st.tuples(st.just("driver"), st.sampled_from(NODE_NAMES), st.sampled_from(("535.129.03", "570.124.06"))),
    st.tuples(st.just("gpus"), st.sampled_from(NODE_NAMES), st.sampled_from(("0", "4", "8"))),
    st.tuples(st.just("delete-node"), st.sampled_from(NODE_NAMES + EXTRA_NODES)),
    st.tuples(st.just("add-node"), st.sampled_from(EXTRA_NODES + NODE_NAMES[4:])),
    st.tuples(st.just("claim"), st.sampled_from(CLAIM_NAMES), st.sampled_from(("allocate", "release", "delete"))),
    st.tuples(st.just("slice"), st.sampled_from(("drop", "restore"))),
    st.tuples(st.just("runtimeclass"), st.booleans()),
    st.tuples(st.just("quota"), st.sampled_from(("4", "8", "16", "64", "status", "delete"))),
    st.just(("publish",)),
)


class Cluster:
    """The API server's objects (the truth) and a LiveFacts fed as its reflectors would feed it."""

    def __init__(self) -> None:
        self.live = LiveFacts(lambda: None)
        self.objects: dict[str, dict[str, dict[str, Any]]] = {r.resource.name: {} for r in self.live._reflectors}
        self.reflectors = {r.resource.name: r for r in self.live._reflectors}
        self.removed_slices: list[dict[str, Any]] = []
        self.tick = 1764500000
        for obj in initial_objects():
            self.objects[RESOURCE_OF[obj["kind"]]][self._key(RESOURCE_OF[obj["kind"]], obj)] = obj
        for name, reflector in self.reflectors.items():
            store = {k: reflector.resource.convert(o) for k, o in self.objects.setdefault(name, {}).items()}
            self.live._replace(reflector, {k: v for k, v in store.items() if v is not None})
        self.live._publish()

    def _key(self, resource: str, obj: dict[str, Any]) -> str:
        key = self.reflectors[resource].resource.key(obj["metadata"]) if hasattr(self, "reflectors") else None
        if key is None:
            meta = obj["metadata"]
            key = f"{meta.get('namespace') or ''}/{meta['name']}" if meta.get("namespace") else meta["name"]
        return key

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        key = self._key(resource, obj)
        self.objects[resource][key] = obj
        converted = self.reflectors[resource].resource.convert(copy.deepcopy(obj))
        self.live._put(self.reflectors[resource], key, converted)

    def delete(self, resource: str, key: str) -> None:
        if self.objects[resource].pop(key, None) is not None:
            self.live._put(self.reflectors[resource], key, None)

    def node(self, name: str) -> dict[str, Any] | None:
        found = self.objects["nodes"].get(name)
        return copy.deepcopy(found) if found is not None else None

    def apply(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind in ("gfd", "heartbeat", "taint", "untaint", "cordon", "label", "driver", "gpus"):
            obj = self.node(event[1])
            if obj is None:
                return
            labels = obj["metadata"].setdefault("labels", {})
            spec = obj.setdefault("spec", {})
            if kind == "gfd":
                self.tick += 60
                labels["nvidia.com/gfd.timestamp"] = str(self.tick)
            elif kind == "heartbeat":
                self.tick += 1
                for c in obj["status"].get("conditions", ()):
                    c["lastHeartbeatTime"] = f"2026-12-01T10:{self.tick % 60:02d}:00Z"
            elif kind == "taint":
                spec["taints"] = [*spec.get("taints", []), {"key": "maintenance", "effect": "NoSchedule"}]
            elif kind == "untaint":
                spec["taints"] = [t for t in spec.get("taints", []) if t.get("key") != "maintenance"]
            elif kind == "cordon":
                spec["unschedulable"] = not spec.get("unschedulable", False)
            elif kind == "label":
                labels["pool"] = event[2]
            elif kind == "driver":
                labels["nvidia.com/cuda.driver-version.full"] = event[2]
            else:
                for which in ("allocatable", "capacity"):
                    obj["status"].setdefault(which, {})["nvidia.com/gpu"] = event[2]
            self.put("nodes", obj)
        elif kind == "delete-node":
            self.delete("nodes", event[1])
        elif kind == "add-node":
            if event[1] not in self.objects["nodes"]:
                product = "NVIDIA-A100-SXM4-80GB" if event[1].startswith("a100") else "NVIDIA-H100-80GB-HBM3"
                obj = node(event[1], product=product)
                obj["metadata"]["labels"]["pool"] = event[1].rsplit("-", 1)[0]
                self.put("nodes", obj)
        elif kind == "claim":
            self._claim(event[1], event[2])
        elif kind == "slice":
            slices = self.objects["resourceslices"]
            if event[1] == "drop" and slices:
                key = sorted(slices)[0]
                self.removed_slices.append(slices[key])
                self.delete("resourceslices", key)
            elif event[1] == "restore" and self.removed_slices:
                self.put("resourceslices", self.removed_slices.pop())
        elif kind == "runtimeclass":
            if event[1]:
                self.put("runtimeclasses", runtime_class())
            else:
                self.delete("runtimeclasses", "nvidia")
        elif kind == "quota":
            self._quota(event[1])

    def _quota(self, what: str) -> None:
        key = "team-a/gpus"
        if what == "delete":
            self.delete("resourcequotas", key)
            return
        found = self.objects["resourcequotas"].get(key)
        if what == "status":  # the quota controller recounting: nothing a rule judges by
            if found is None:
                return
            obj = copy.deepcopy(found)
            self.tick += 1
            obj["status"] = {"used": {"requests.nvidia.com/gpu": str(self.tick % 9)}}
        else:
            obj = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
                   "spec": {"hard": {"requests.nvidia.com/gpu": what}}}
        self.put("resourcequotas", obj)

    def _claim(self, name: str, what: str) -> None:
        key = f"team-a/{name}"
        if what == "delete":
            self.delete("resourceclaims", key)
            return
        claim: dict[str, Any] = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        }
        if what == "allocate":
            device = self._free_device()
            if device is None:
                return
            pool, dev = device
            claim["status"] = {"allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": dev}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [pool]}]}]}}}
        self.put("resourceclaims", claim)

    def _free_device(self) -> tuple[str, str] | None:
        used = {(r["pool"], r["device"]) for c in self.objects["resourceclaims"].values()
                for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", ())}
        for item in sorted(self.objects["resourceslices"].values(), key=lambda s: s["metadata"]["name"]):
            spec = item["spec"]
            if spec.get("driver") != "gpu.nvidia.com":
                continue
            for d in spec.get("devices", ()):
                if (spec["pool"]["name"], d["name"]) not in used:
                    return spec["pool"]["name"], d["name"]
        return None

    def fresh(self) -> ClusterFacts:
        """Facts built from scratch from the objects, as a snapshot file would give them."""
        converted = {
            name: {k: r.resource.convert(copy.deepcopy(o)) for k, o in self.objects[name].items()}
            for name, r in self.reflectors.items()
        }
        nodes = tuple(converted["nodes"][k] for k in sorted(converted["nodes"]))
        dra_parts = [tuple(v for _, v in sorted(converted[r].items())) for r in
                     ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")]
        dra = DraFacts(DraObjects(*dra_parts), True)
        quotas = QuotaFacts.of(converted["resourcequotas"].values())
        return ClusterFacts(nodes=nodes, runtime_classes=dict(converted["runtimeclasses"]), source="live", dra=dra,
                            quotas=quotas, queues=QueueFacts.of())


# --- probes --------------------------------------------------------------------------------------
def pod(name: str, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    container = spec.pop("container", {})
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [{"name": "main", "image": container.get("image", "nvcr.io/nvidia/pytorch:25.01-py3"),
                            "resources": container.get("resources", {
                                "limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}})}],
            "tolerations": [GPU_TOLERATION],
            **spec,
        },
    }


PROBES: tuple[dict[str, Any], ...] = (
    pod("plain"),
    pod("h100", nodeSelector={"pool": "h100"}),
    pod("spare", nodeSelector={"pool": "spare"}),
    pod("eight", container={"resources": {"limits": {"nvidia.com/gpu": "8"}}}),
    pod("bound", nodeName="h100-1"),
    pod("hostname", nodeSelector={"kubernetes.io/hostname": "a100-0"}),
    pod("runtime", runtimeClassName="nvidia"),
    pod("timestamp", nodeSelector={"nvidia.com/gfd.timestamp": "1764500000"}),
    pod("old-cuda", container={"image": "nvidia/cuda:12.8.0-runtime-ubuntu22.04"}),
    pod("template", "gpu-test1", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
        containers=[{"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}]),
    pod("claimed", resourceClaims=[{"name": "gpu", "resourceClaimName": "shared-gpu"}],
        containers=[{"name": "ctr", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                     "resources": {"claims": [{"name": "gpu"}]}}]),
    pod("mig", "gpu-test4", resourceClaims=[{"name": "mig", "resourceClaimTemplateName": "mig-devices"}],
        containers=[{"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "mig"}]}}]),
    # a gang: 3 workers × 4 GPUs, against the nodes and the namespace's quota
    {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "gang", "namespace": "team-a"},
     "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 3, "template": {"spec": pod(
         "w", container={"resources": {"limits": {"nvidia.com/gpu": "4"}}})["spec"]}}}}},
)


def verdicts(facts: ClusterFacts) -> Iterator[tuple[Any, ...]]:
    for config in CONFIGS:
        for probe in PROBES:
            ev = evaluate(copy.deepcopy(probe), config, facts)
            findings = tuple((f.rule, f.severity.name, f.path, f.message, f.remediation) for f in ev.findings)
            yield probe["metadata"]["name"], findings, tuple(ev.skipped_rules), repr(ev.patch())


def assert_same(cluster: Cluster) -> None:
    live = list(verdicts(cluster.live.current()))
    fresh = list(verdicts(cluster.fresh()))
    for got, want in zip(live, fresh, strict=True):
        assert got == want, f"probe {got[0]}: incremental\n{got}\nfresh\n{want}"


@pytest.mark.slow  # a property test
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENTS, min_size=1, max_size=40))
def test_incremental_snapshots_judge_as_fresh_facts(events: list[tuple[Any, ...]]) -> None:
    cluster = Cluster()
    assert_same(cluster)
    for event in events:
        if event == ("publish",):
            cluster.live._publish()
            assert_same(cluster)
        else:
            cluster.apply(event)
    cluster.live._publish()
    assert_same(cluster)


def test_the_probes_see_what_changes() -> None:
    """The comparison can fail: a taint on the only pool a probe selects changes its verdict."""
    cluster = Cluster()
    before = dict((v[0], v[1]) for v in verdicts(cluster.live.current()))
    for name in ("h100-0", "h100-1"):
        cluster.apply(("taint", name))
    cluster.apply(("taint", "dra-h100-0"))
    cluster.live._publish()
    after = dict((v[0], v[1]) for v in verdicts(cluster.live.current()))
    assert before["h100"] != after["h100"]
    assert any("maintenance" in f[3] for f in after["h100"])
    cluster.apply(("quota", "8"))  # 12 GPUs the gang needs at once, 8 in the namespace's quota
    cluster.live._publish()
    quota = dict((v[0], v[1]) for v in verdicts(cluster.live.current()))
    assert not any(f[0] == "gpu-quota-exceeded" for f in after["gang"])
    assert any(f[0] == "gpu-quota-exceeded" for f in quota["gang"])


# --- over HTTP: the kubernetes client against the in-process API server ---------------------------
def _gpu_fleet(state: Any, count: int) -> list[str]:
    names = [f"gpu-{i:03d}" for i in range(count)]
    for name in names:
        obj = gpu_node(name)
        obj["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1764500000"
        state.put("nodes", obj)
    return names


def _relabel(state: Any, name: str, stamp: int) -> None:
    with state.cond:
        obj = copy.deepcopy(state.objects["nodes"][name])
        obj["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = str(stamp)
        obj["status"]["conditions"][0]["lastHeartbeatTime"] = f"2026-12-01T10:{stamp % 60:02d}:00Z"
        state.put("nodes", obj)


def _taint(state: Any, name: str) -> None:
    with state.cond:
        obj = copy.deepcopy(state.objects["nodes"][name])
        obj["spec"]["taints"].append({"key": "maintenance", "effect": "NoSchedule"})
        state.put("nodes", obj)


@pytest.fixture
def fleet_api() -> Iterator[Any]:
    state = FakeApiServer()
    state.put("runtimeclasses", runtime_class_obj("nvidia", "nvidia"))
    with serving(state):
        yield state


@pytest.mark.integration
def test_heartbeats_and_gfd_relabels_publish_nothing_while_a_taint_does(fleet_api: Any) -> None:
    names = _gpu_fleet(fleet_api, 40)
    live, recorder = start_live(fleet_api)
    try:
        recorder.wait_for(lambda: live.ready and len(live.current().nodes) == 40, "initial list")
        first = live.current()
        published = live.stats().publishes
        for stamp, name in enumerate(names * 3, start=1764500060):
            _relabel(fleet_api, name, stamp)
        _taint(fleet_api, names[7])
        recorder.wait_for(lambda: any(len(n.taints) == 2 for n in live.current().nodes), "the taint")
        stats = live.stats()
        assert stats.events_unchanged == 120  # every relabel was seen, and none was a change
        assert stats.publishes - published == 1
        after = live.current()
        assert after.basis is first and sorted(g.size for g in after.groups) == [1, 39]
    finally:
        live.stop()


@pytest.mark.integration
def test_a_burst_of_changes_costs_a_few_snapshots(fleet_api: Any) -> None:
    names = _gpu_fleet(fleet_api, 300)
    live, recorder = start_live(fleet_api, publish_interval=0.2)
    try:
        recorder.wait_for(lambda: live.ready and len(live.current().nodes) == 300, "initial list")
        published = live.stats().publishes
        for name in names:  # a pool tainted as fast as the API server takes it
            _taint(fleet_api, name)
        recorder.wait_for(lambda: all(len(n.taints) == 2 for n in live.current().nodes), "every taint")
        assert live.stats().publishes - published < 30  # 300 changes, coalesced
        assert live.lag_seconds() == 0.0
    finally:
        live.stop()


@pytest.mark.integration
def test_a_change_waiting_for_its_snapshot_shows_as_lag(fleet_api: Any) -> None:
    names = _gpu_fleet(fleet_api, 3)
    live, recorder = start_live(fleet_api, publish_interval=60)
    try:
        recorder.wait_for(lambda: live.ready and len(live.current().nodes) == 3, "initial list")
        _taint(fleet_api, names[0])
        recorder.wait_for(lambda: live.lag_seconds() > 0, "the change received")
        assert not any(len(n.taints) == 2 for n in live.current().nodes)  # not published yet: the interval
    finally:
        live.stop()


@pytest.mark.integration
def test_relist_after_410_during_churn_applies_only_what_changed(fleet_api: Any) -> None:
    names = _gpu_fleet(fleet_api, 60)
    live, recorder = start_live(fleet_api)
    try:
        recorder.wait_for(lambda: live.ready and len(live.current().nodes) == 60, "initial list")
        before = {n.name: n for n in live.current().nodes}
        for stamp, name in enumerate(names, start=1764500060):
            _relabel(fleet_api, name, stamp)
        # changes the watch never delivers (lost to compaction), in the middle of the relabelling
        with fleet_api.cond:
            hidden = copy.deepcopy(fleet_api.objects["nodes"][names[3]])
            hidden["spec"]["taints"].append({"key": "maintenance", "effect": "NoSchedule"})
            fleet_api.put("nodes", hidden, notify=False)
            fleet_api.put("nodes", gpu_node("gpu-new"), notify=False)
        fleet_api.expire("nodes")
        for stamp, name in enumerate(names, start=1764500200):
            _relabel(fleet_api, name, stamp)
        recorder.wait_for(lambda: "gpu-new" in [n.name for n in live.current().nodes], "relist after 410")
        assert fleet_api.list_calls["nodes"] == 2
        now = {n.name: n for n in live.current().nodes}
        assert len(now[names[3]].taints) == 2
        # every other node is the very object published before: relabels and the relist changed nothing
        assert all(now[n] is before[n] for n in names if n != names[3])
    finally:
        live.stop()
