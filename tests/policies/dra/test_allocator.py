"""The allocator against driver-shaped ResourceSlices and real demo claims.

Claims come from the demos of NVIDIA's DRA driver and the DRA example driver (the public corpus in
tests/corpus, see its SOURCES.tsv, and kubernetes-sigs/dra-example-driver@31914cea) where the
demo states the expected outcome; fixtures are described in tests/fixtures/dra/*.yaml.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from policies.dra import ClaimToAllocate, Inventory, allocate, read_objects
from policies.dra.claims import parse_claim_spec
from policies.dra.objects import DeviceID
from policies.facts import NodeFacts
from policies.facts_build import facts_from_objects
from tests.support.paths import CORPUS, FIXTURES, load_yaml_docs

NVIDIA = FIXTURES / "dra" / "nvidia-cluster.yaml"
EXAMPLE = FIXTURES / "dra" / "example-driver-cluster.yaml"
NVIDIA_DEMOS = CORPUS / "real"


def cluster(path: Any, extra: Iterable[dict[str, Any]] = ()) -> tuple[Inventory, dict[str, NodeFacts]]:
    docs = [*load_yaml_docs(path), *extra]
    objects = read_objects(docs)
    nodes = {n.name: n for n in facts_from_objects(docs).nodes}
    return Inventory.build(objects.classes, objects.slices, objects.claims), nodes


def template_claims(path: Any, name: str | None = None) -> list[ClaimToAllocate]:
    objects = read_objects(load_yaml_docs(path))
    return [ClaimToAllocate(f"{t.namespace}/{t.name}", t.spec) for t in objects.templates if name in (None, t.name)]


def spec(requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> ClaimToAllocate:
    body = {"devices": {"requests": requests, "constraints": constraints or []}}
    parsed = parse_claim_spec(body, "/spec")
    assert parsed.problems == (), parsed.problems
    return ClaimToAllocate("test/claim", parsed)


def gpu(count: int = 1, cls: str = "gpu.nvidia.com", name: str = "gpu", **extra: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, **extra}}


def test_nvidia_quickstart_single_gpu_fits_every_gpu_node() -> None:
    """demo/specs/quickstart/v1/gpu-test1.yaml: one GPU per pod from class gpu.nvidia.com."""
    inventory, nodes = cluster(NVIDIA)
    claims = template_claims(NVIDIA_DEMOS / "NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__gpu-test1.yaml")
    assert [c.key for c in claims] == ["gpu-test1/single-gpu"]
    verdict = allocate(claims, inventory, nodes["a100-0"])
    assert (verdict.fits, verdict.exact, verdict.error) == (True, True, None)
    assert verdict.assignment == (("gpu-test1/single-gpu", "gpu", DeviceID("gpu.nvidia.com", "a100-0", "gpu-0")),)
    assert allocate(claims, inventory, nodes["h100-0"]).fits is True
    mig_only = allocate(claims, inventory, nodes["mig-0"])  # MIG devices have type mig, not gpu
    assert (mig_only.fits, mig_only.exact) == (False, True)
    (diagnosis,) = mig_only.requests
    assert (diagnosis.reachable, diagnosis.class_matched, diagnosis.selected) == (6, 0, 0)


def test_nvidia_mig_demo_needs_backtracking_to_one_parent() -> None:
    """demo/specs/quickstart/v1/gpu-test4.yaml: 1g.5gb, 1g.5gb, 2g.10gb and 3g.20gb with
    ``matchAttribute: gpu.nvidia.com/parentUUID``.  The first parent listed on mig-0 cannot host
    them; the scheduler's search backtracks to the second."""
    inventory, nodes = cluster(NVIDIA)
    claims = template_claims(NVIDIA_DEMOS / "NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__gpu-test4.yaml")
    verdict = allocate(claims, inventory, nodes["mig-0"])
    assert (verdict.fits, verdict.exact) == (True, True)
    devices = {device.device for _, _, device in verdict.assignment}
    assert devices == {"gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1", "gpu-0-mig-2g10gb-14-2", "gpu-0-mig-3g20gb-9-4"}
    # Without the constraint the first devices in order would do; with it, no single parent on a
    # node lacking GPU-aaaa's layout fits.
    assert allocate(claims, inventory, nodes["a100-0"]).fits is False


def test_removed_index_attribute_is_a_runtime_error_on_matching_gpus() -> None:
    """demo/specs/quickstart/v1/gpu-test6.yaml still selects on ``index``, which the driver dropped
    in v25.8.0 (kubernetes-sigs/dra-driver-nvidia-gpu#563/#744).  On A100s ``productName`` matches,
    so ``index`` is looked up and the scheduler aborts with a CEL runtime error; on H100s the
    first conjunct is false and ``&&`` absorbs the error: no device, no error."""
    inventory, nodes = cluster(NVIDIA)
    claims = template_claims(NVIDIA_DEMOS / "NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__gpu-test6.yaml")
    on_a100 = allocate(claims, inventory, nodes["a100-0"])
    assert on_a100.fits is False and on_a100.error is not None
    assert on_a100.error.startswith("claim gpu-test6/a100: selector #0 on device gpu.nvidia.com/a100-0/gpu-0: ")
    assert on_a100.error.endswith("CEL runtime error: no such key: index")
    on_h100 = allocate(claims, inventory, nodes["h100-0"])
    assert (on_h100.fits, on_h100.exact, on_h100.error) == (False, True, None)


def test_allocated_devices_are_in_use() -> None:
    allocated = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "taken", "namespace": "ml"},
        "spec": {"devices": {"requests": [gpu()]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "a100-0", "device": "gpu-0"}]}
            }
        },
    }
    inventory, nodes = cluster(NVIDIA, [allocated])
    one = allocate([spec([gpu(1)])], inventory, nodes["a100-0"])
    assert one.fits is True and one.assignment[0][2].device == "gpu-1"
    two = allocate([spec([gpu(2)])], inventory, nodes["a100-0"])
    assert (two.fits, two.exact) == (False, True)
    assert (two.requests[0].selected, two.requests[0].free) == (2, 1)
    admin = allocate([spec([gpu(2, adminAccess=True)])], inventory, nodes["a100-0"])
    assert admin.fits is True  # admin access ignores other claims' allocations


def test_claims_of_one_pod_are_allocated_together() -> None:
    inventory, nodes = cluster(NVIDIA)
    first, second = spec([gpu(1)]), spec([gpu(1)])
    assert allocate([first, second], inventory, nodes["a100-0"]).fits is True
    assert allocate([first, second, spec([gpu(1)])], inventory, nodes["a100-0"]).fits is False


def test_missing_device_class_is_the_schedulers_error() -> None:
    inventory, nodes = cluster(NVIDIA)
    verdict = allocate([spec([gpu(1, cls="imex.nvidia.com", name="channel")])], inventory, nodes["a100-0"])
    assert verdict.error == "request channel: device class imex.nvidia.com does not exist"
    assert (verdict.fits, verdict.exact) == (False, True)


def test_selectors_with_version_and_quantity_functions() -> None:
    """Shapes of NVIDIA's e2e specs driver-version.yaml.tmpl and memory-size.yaml.tmpl."""
    inventory, nodes = cluster(NVIDIA)
    newer = 'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("575.0.0")) >= 0'
    memory = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
    claim = spec([gpu(2, selectors=[{"cel": {"expression": newer}}, {"cel": {"expression": memory}}])])
    assert allocate([claim], inventory, nodes["a100-0"]).fits is True  # driver 580.95.5
    on_h100 = allocate([claim], inventory, nodes["h100-0"])  # driver 570.124.6
    assert (on_h100.fits, on_h100.exact) == (False, True)
    assert on_h100.requests[0].class_matched == 2 and on_h100.requests[0].selected == 0


def test_match_attribute_needs_the_attribute_on_every_device() -> None:
    inventory, nodes = cluster(NVIDIA)
    same_bus = spec([gpu(2)], [{"matchAttribute": "resource.kubernetes.io/pciBusID"}])
    assert allocate([same_bus], inventory, nodes["a100-0"]).fits is False  # two GPUs, two bus IDs
    same_product = spec([gpu(2)], [{"matchAttribute": "gpu.nvidia.com/productName"}])
    assert allocate([same_product], inventory, nodes["a100-0"]).fits is True
    missing = spec([gpu(1)], [{"matchAttribute": "resource.kubernetes.io/pciBusID"}])
    assert allocate([missing], inventory, nodes["h100-0"]).fits is False  # the H100s publish no bus ID


def test_all_mode_takes_every_device_and_rejects_incomplete_pools() -> None:
    inventory, nodes = cluster(NVIDIA)
    everything = spec([{"name": "all", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}])
    verdict = allocate([everything], inventory, nodes["a100-0"])
    assert verdict.fits is True and len(verdict.assignment) == 2
    second_slice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "a100-0-extra"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "a100-0",
            "pool": {"name": "a100-0-extra", "generation": 1, "resourceSliceCount": 2},
            "devices": [],
        },
    }
    inventory, nodes = cluster(NVIDIA, [second_slice])
    verdict = allocate([everything], inventory, nodes["a100-0"])
    assert verdict.error == (
        "claim test/claim, request all: asks for all devices, "
        "but resource pool gpu.nvidia.com/a100-0-extra is currently being updated"
    )


def test_only_complete_newest_pool_generations_count() -> None:
    def slice_doc(name: str, generation: int, count: int, devices: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "worker-0",
                "pool": {"name": "shared", "generation": generation, "resourceSliceCount": count},
                "devices": [{"name": d, "attributes": {"model": {"string": "LATEST-GPU-MODEL"}}} for d in devices],
            },
        }

    klass = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"}, "spec": {}}
    node = NodeFacts("worker-0", {}, (), {})
    claim = spec([gpu(1, cls="gpu.example.com")])
    old_and_new = read_objects([klass, slice_doc("old", 1, 1, ["gpu-9"]), slice_doc("new-a", 2, 2, ["gpu-0"])])
    inventory = Inventory.build(old_and_new.classes, old_and_new.slices)
    (pool,) = inventory.pools.values()
    assert (pool.generation, pool.complete) == (2, False)
    assert allocate([claim], inventory, node).fits is False  # gen 1 is outdated, gen 2 incomplete
    complete = read_objects([klass, slice_doc("old", 1, 1, ["gpu-9"]), slice_doc("new-a", 2, 2, ["gpu-0"]),
                             slice_doc("new-b", 2, 2, ["gpu-1"])])
    inventory = Inventory.build(complete.classes, complete.slices)
    verdict = allocate([claim], inventory, node)
    assert verdict.fits is True and verdict.assignment[0][2] == DeviceID("gpu.example.com", "shared", "gpu-0")


def test_first_available_prioritised_alternatives() -> None:
    """dra-example-driver demo/examples/prioritized-alternatives: pod0 falls back to older-gpu,
    pod1 gets latest-gpu (the demo's stated outcome)."""
    inventory, nodes = cluster(EXAMPLE)
    fallback = spec([{"name": "gpu", "firstAvailable": [
        {"name": "bleeding-edge-gpu", "deviceClassName": "gpu.example.com",
         "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'BLEEDING-EDGE-GPU'"}}]},
        {"name": "huge-gpu", "deviceClassName": "gpu.example.com",
         "selectors": [{"cel": {"expression": "device.capacity['gpu.example.com'].memory.compareTo(quantity('1Ti')) >= 0"}}]},
        {"name": "older-gpu", "deviceClassName": "gpu.example.com"},
    ]}])
    preferred = spec([{"name": "gpu", "firstAvailable": [
        {"name": "latest-gpu", "deviceClassName": "gpu.example.com",
         "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'LATEST-GPU-MODEL'"}}]},
        {"name": "older-gpu", "deviceClassName": "gpu.example.com"},
    ]}])
    assert allocate([fallback], inventory, nodes["worker-0"]).assignment[0][1] == "gpu/older-gpu"
    assert allocate([preferred], inventory, nodes["worker-0"]).assignment[0][1] == "gpu/latest-gpu"


def test_device_taints_need_tolerations() -> None:
    """dra-example-driver device-taint-pod-toleration: the NoExecute taint blocks the template
    without a toleration; the one with ``key: gpu.example.com/unhealthy, value: "true"`` fits."""
    inventory, nodes = cluster(EXAMPLE)
    without = spec([gpu(1, cls="gpu.example.com")])
    toleration = {"key": "gpu.example.com/unhealthy", "operator": "Equal", "value": "true", "effect": "NoExecute"}
    with_toleration = spec([gpu(1, cls="gpu.example.com", tolerations=[toleration])])
    blocked = allocate([without], inventory, nodes["worker-1"])
    assert (blocked.fits, blocked.exact) == (False, True)
    assert (blocked.requests[0].free, blocked.requests[0].tolerated) == (1, 0)
    assert allocate([with_toleration], inventory, nodes["worker-1"]).fits is True
    assert allocate([without], inventory, nodes["worker-0"]).fits is True


def test_undecided_selectors_make_the_verdict_unknown() -> None:
    inventory, nodes = cluster(EXAMPLE)
    url = spec([gpu(1, cls="gpu.example.com", selectors=[{"cel": {"expression": "isURL(device.attributes['gpu.example.com'].uuid)"}}])])
    verdict = allocate([url], inventory, nodes["worker-0"])
    assert verdict.fits is None and not verdict.exact
    assert any("URL library" in note for note in verdict.notes)


def test_too_many_devices_per_claim() -> None:
    inventory, nodes = cluster(NVIDIA)
    verdict = allocate([spec([gpu(33)])], inventory, nodes["a100-0"])
    assert verdict.error == "claim test/claim: number of requested devices 33 exceeds the claim limit of 32"


def test_search_budget_labels_the_answer_possibly() -> None:
    """Request a takes any 4 of 10 devices, request b needs the first two.  The scheduler's search
    gives a the first devices and backtracks through thousands of orderings before b fits."""
    devices = [{"name": f"d{i}", "attributes": {"slot": {"int": i}}} for i in range(10)]
    docs = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "c"}, "spec": {}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "d.example.com", "allNodes": True,
                  "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1}, "devices": devices}},
    ]
    objects = read_objects(docs)
    inventory = Inventory.build(objects.classes, objects.slices)
    first_two = [{"cel": {"expression": "device.attributes['d.example.com'].slot < 2"}}]
    claim = spec([gpu(4, cls="c", name="a"), gpu(2, cls="c", name="b", selectors=first_two)])
    small = allocate([claim], inventory, None, step_budget=200)
    assert (small.fits, small.exact) == (False, False)
    assert any("stopped after 200 steps" in note for note in small.notes)
    full = allocate([claim], inventory, None)
    assert (full.fits, full.exact) == (True, True)
    assert {d.device for _, r, d in full.assignment if r == "b"} == {"d0", "d1"}


def test_network_attached_pools_reach_every_node_and_no_node() -> None:
    docs = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "c"}, "spec": {}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "net"},
         "spec": {"driver": "d.example.com", "allNodes": True,
                  "pool": {"name": "fabric", "generation": 0, "resourceSliceCount": 1}, "devices": [{"name": "x"}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "rack"},
         "spec": {"driver": "d.example.com",
                  "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "rack", "operator": "In", "values": ["r1"]}]}]},
                  "pool": {"name": "rack-r1", "generation": 0, "resourceSliceCount": 1}, "devices": [{"name": "y"}]}},
    ]
    objects = read_objects(docs)
    inventory = Inventory.build(objects.classes, objects.slices)
    two = spec([gpu(2, cls="c")])
    assert allocate([two], inventory, None).fits is False
    assert allocate([two], inventory, NodeFacts("n1", {"rack": "r1"}, (), {})).fits is True
    assert allocate([two], inventory, NodeFacts("n2", {"rack": "r2"}, (), {})).fits is False


def test_extended_resource_class_lookup() -> None:
    inventory, _ = cluster(NVIDIA)
    found = inventory.class_for_extended_resource("nvidia.com/gpu")
    assert found is not None and found.name == "gpu.nvidia.com"
    implicit = inventory.class_for_extended_resource("deviceclass.resource.kubernetes.io/mig.nvidia.com")
    assert implicit is not None and implicit.name == "mig.nvidia.com"
    newer = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
             "metadata": {"name": "gpu-v2.example.com", "creationTimestamp": "2026-03-01T00:00:00Z"},
             "spec": {"extendedResourceName": "nvidia.com/gpu"}}
    inventory, _ = cluster(NVIDIA, [newer])
    assert inventory.class_for_extended_resource("nvidia.com/gpu").name == "gpu-v2.example.com"  # type: ignore[union-attr]


def test_published_attributes_show_what_selectors_may_name() -> None:
    inventory, _ = cluster(NVIDIA)
    published = inventory.published_attributes("gpu.nvidia.com")
    assert published["gpu.nvidia.com/driverVersion"] == {"version"}
    assert published["resource.kubernetes.io/pciBusID"] == {"string"}
    assert "gpu.nvidia.com/index" not in published
    assert "gpu.nvidia.com/memory" in inventory.published_capacities("gpu.nvidia.com")


@pytest.mark.parametrize("node", ["a100-0", "h100-0", "mig-0"])
def test_verdicts_never_raise_on_malformed_claims(node: str) -> None:
    inventory, nodes = cluster(NVIDIA)
    broken = parse_claim_spec({"devices": {"requests": [{"name": "x"}, {"exactly": "nope"}, 7]}}, "/spec")
    assert broken.problems
    verdict = allocate([ClaimToAllocate("broken", broken)], inventory, nodes[node])
    assert verdict.fits in (True, False, None)
