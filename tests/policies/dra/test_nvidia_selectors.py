"""Selectors NVIDIA ships, against devices shaped like its driver publishes them.

Expressions are quoted from NVIDIA/k8s-dra-driver-gpu@22407113785e78c7763b4637689a201eb39c6199:
test/e2e/framework/specs/{product-type,driver-version,memory-size}.yaml.tmpl (template
placeholders filled in here), tests/bats/specs/gpu-cel-nomatch.yaml, and the demo specs in the
public corpus (tests/corpus/real, see SOURCES.tsv).
"""

from __future__ import annotations

import pytest

from policies.dra import Inventory, read_objects
from policies.dra.cel import compile_selector
from policies.dra.inventory import Candidate
from tests.support.paths import CORPUS, FIXTURES, load_yaml_docs

GPU = "gpu.nvidia.com"
PRODUCT = 'device.attributes["gpu.nvidia.com"].productName.lowerAscii().matches("^.*{pattern}.*$")'
DRIVER = 'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("{version}")) >= 0'
MEMORY = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{gi}Gi")) >= 0'
NOMATCH = 'device.attributes["gpu.nvidia.com"].productName == "NONEXISTENT-GPU-XYZ"'


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    objects = read_objects(load_yaml_docs(FIXTURES / "dra" / "nvidia-cluster.yaml"))
    return Inventory.build(objects.classes, objects.slices)


def matching(inventory: Inventory, expression: str) -> set[str]:
    selector = compile_selector(expression)
    assert selector.ok and selector.evaluable and not selector.parity_uncertain, selector
    found = set()
    for pool, _, device in inventory.devices(GPU):
        result = selector.evaluate(device.prepared)
        assert result.error is None, (device.name, result)
        if result.matched:
            found.add(f"{pool.id.name}/{device.name}")
    return found


def test_product_pattern(inventory: Inventory) -> None:
    assert matching(inventory, PRODUCT.format(pattern="h100")) == {"h100-0/gpu-0", "h100-0/gpu-1"}
    assert len(matching(inventory, PRODUCT.format(pattern="a100"))) == 2 + 6  # full A100s and MIG slices


def test_driver_version_floor(inventory: Inventory) -> None:
    # 580.95.5 on the A100 and MIG nodes, 570.124.6 on the H100 node
    assert all(not name.startswith("h100") for name in matching(inventory, DRIVER.format(version="575.0.0")))
    assert len(matching(inventory, DRIVER.format(version="570.124.6"))) == 10


def test_memory_floor(inventory: Inventory) -> None:
    assert len(matching(inventory, MEMORY.format(gi=40))) == 4  # the 80Gi full GPUs; MIG slices are smaller
    assert len(matching(inventory, MEMORY.format(gi=1))) == 10


def test_nomatch_selector_matches_nothing(inventory: Inventory) -> None:
    assert matching(inventory, NOMATCH) == set()


def test_version_attribute_compared_with_a_string_is_visible_and_fails() -> None:
    """NVIDIA normalises driver versions (570.124.06 → 570.124.6, dra.md §5.3); comparing with the
    NVML string can never match.  The references show the comparison, the evaluation the error."""
    selector = compile_selector('device.attributes["gpu.nvidia.com"].driverVersion == "570.124.06"')
    (ref,) = selector.references.attributes
    assert (ref.qualified_name, ref.compared_with) == ("gpu.nvidia.com/driverVersion", ("string",))
    objects = read_objects(load_yaml_docs(FIXTURES / "dra" / "nvidia-cluster.yaml"))
    inventory = Inventory.build(objects.classes, objects.slices)
    assert inventory.published_attributes(GPU)["gpu.nvidia.com/driverVersion"] == {"version"}
    _, _, device = next(inventory.devices(GPU))
    assert selector.evaluate(device.prepared).error == "no such overload"


def test_demo_selectors_compile_and_name_published_attributes(inventory: Inventory) -> None:
    """Every selector in NVIDIA's v1 demos compiles; the only attribute they name that the current
    driver no longer publishes is ``index`` (removed in v25.8.0; gpu-test6.yaml still uses it)."""
    published = set(inventory.published_attributes(GPU))
    unknown: set[str] = set()
    seen = 0
    for path in sorted((CORPUS / "real").glob("NVIDIA__k8s-dra-driver-gpu__*.yaml")):
        objects = read_objects(load_yaml_docs(path))
        specs = [t.spec for t in objects.templates] + [c.spec for c in objects.claims]
        for spec in specs:
            for request in spec.requests:
                for alternative in request.alternatives:
                    for selector in alternative.selectors:
                        compiled = compile_selector(selector.expression)
                        if "v1alpha2" in path.read_text():
                            continue
                        assert compiled.ok, (path.name, compiled.issue)
                        seen += 1
                        for ref in compiled.references.attributes:
                            if ref.kind == "attributes" and ref.domain == GPU and ref.qualified_name not in published:
                                unknown.add(str(ref.qualified_name))
    assert seen >= 5
    assert unknown == {"gpu.nvidia.com/index"}


def test_candidates_are_in_slice_order(inventory: Inventory) -> None:
    reach = inventory.reach(None)
    assert reach.candidates == ()  # no network-attached GPUs
    from policies.facts import NodeFacts

    names = [c.device.name for c in inventory.reach(NodeFacts("mig-0", {}, (), {})).candidates]
    assert names[:2] == ["gpu-1-mig-1g5gb-19-0", "gpu-1-mig-3g20gb-9-4"]
    assert all(isinstance(c, Candidate) for c in inventory.reach(NodeFacts("mig-0", {}, (), {})).candidates)
