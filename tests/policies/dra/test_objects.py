"""Typed views of DeviceClasses, ResourceSlices, claims and templates, with the API server's
validation messages (kubernetes pkg/apis/resource/validation/validation.go)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policies.dra import read_objects
from policies.dra.claims import parse_claim_spec
from policies.dra.inventory import Inventory
from tests.support.paths import CORPUS, FIXTURES, load_yaml_docs


def problems(spec: dict[str, Any], api_version: str = "resource.k8s.io/v1") -> set[tuple[str, str]]:
    return {(p.pointer, p.message) for p in parse_claim_spec(spec, "/spec", api_version).problems}


def request(**exactly: Any) -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", **exactly}}]}}


def test_valid_claim_has_no_problems() -> None:
    assert problems(request(count=2, selectors=[{"cel": {"expression": "true"}}])) == set()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (request(allocationMode="All", count=1), ("/spec/devices/requests/0/exactly/count",
                                                  "must not be specified when allocationMode is 'All'")),
        (request(count=0), ("/spec/devices/requests/0/exactly/count", "must be greater than zero")),
        (request(allocationMode="Some"), ("/spec/devices/requests/0/exactly/allocationMode",
                                          'Unsupported value: supported values: "All", "ExactCount"')),
        (request(selectors=[{}]), ("/spec/devices/requests/0/exactly/selectors/0/cel", "Required value")),
        (request(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
         ("/spec/devices/requests/0/exactly/tolerations/0/value", "must be empty for operator `Exists`")),
        ({"devices": {"requests": [{"name": "gpu"}]}},
         ("/spec/devices/requests/0", "exactly one of `exactly` or `firstAvailable` is required")),
        ({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"},
                                    "firstAvailable": [{"name": "a", "deviceClassName": "c"}]}]}},
         ("/spec/devices/requests/0",
          "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set")),
        ({"devices": {"requests": [{"name": "gpu", "exactly": {}}]}},
         ("/spec/devices/requests/0/exactly/deviceClassName", "Required value")),
        ({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}],
                      "constraints": [{"requests": ["gpu", "nope"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]}},
         ("/spec/devices/constraints/0/requests/1",
          "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'")),
        ({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}],
                      "constraints": [{"matchAttribute": "parentUUID"}]}},
         ("/spec/devices/constraints/0/matchAttribute",
          "a fully qualified name must be a domain and a name separated by a slash")),
        ({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}], "constraints": [{}]}},
         ("/spec/devices/constraints/0/matchAttribute", "Required value")),
        ({"devices": {"requests": [{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(33)]}},
         ("/spec/devices/requests", "Too many: 33: must have at most 32 items")),
        ({"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "c"}},
                                   {"name": "g", "exactly": {"deviceClassName": "c"}}]}},
         ("/spec/devices/requests/1/name", 'Duplicate value: "g"')),
    ],
)
def test_validation_messages(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    assert expected in problems(spec)


def test_subrequests_and_their_references() -> None:
    spec = {"devices": {
        "requests": [{"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": "c", "count": 2},
            {"name": "small", "deviceClassName": "c"},
        ]}],
        "constraints": [{"requests": ["gpu/big"], "matchAttribute": "d.io/x"}],
    }}
    parsed = parse_claim_spec(spec, "/spec")
    assert parsed.problems == ()
    (req,) = parsed.requests
    assert [a.qualified_name for a in req.alternatives] == ["gpu/big", "gpu/small"]
    assert parsed.request_names == {"gpu", "gpu/big", "gpu/small"}


def test_v1beta1_flat_requests_are_read_as_exactly() -> None:
    spec = {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}]}}
    parsed = parse_claim_spec(spec, "/spec", "resource.k8s.io/v1beta1")
    assert parsed.problems == ()
    exact = parsed.requests[0].exactly
    assert exact is not None and (exact.device_class_name, exact.count) == ("gpu.nvidia.com", 2)
    # Under v1 the same fields are unknown: the request has neither exactly nor firstAvailable.
    assert ("/spec/devices/requests/0", "exactly one of `exactly` or `firstAvailable` is required") in problems(spec)


def test_resource_slice_checks() -> None:
    bad = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n",
            "allNodes": True,
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 0},
            "devices": [{"name": "gpu-0", "attributes": {"a/b/c": {"string": "x"}, "empty": {}}}],
        },
    }
    (parsed,) = read_objects([bad]).slices
    found = {(p.pointer, p.message) for p in parsed.problems}
    assert found == {
        ("/spec/pool/resourceSliceCount", "must be greater than zero"),
        ("/spec", "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"),
        ("/spec/devices/0/attributes/a~1b~1c", "must not contain more than one slash"),
        ("/spec/devices/0/attributes/empty", "exactly one value must be specified"),
    }


def test_unparseable_version_attribute_fails_selectors_like_the_scheduler() -> None:
    """compile.go getAttributeValue: ``parse semantic version: ...`` for every selector on the device."""
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"driverVersion": {"version": "570.124.06"}}}],
        },
    }
    (parsed,) = read_objects([doc]).slices
    prepared = parsed.devices[0].prepared
    assert prepared.value is None
    assert prepared.error == 'attribute driverVersion: parse semantic version: Patch number must not contain leading zeroes "06"'


def test_v1beta1_slices_unwrap_basic() -> None:
    doc = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n",
            "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-3", "basic": {"attributes": {"index": {"int": 3}}, "capacity": {"memory": {"value": "80Gi"}}}}],
        },
    }
    objects = read_objects([doc])
    inventory = Inventory.build([], objects.slices)
    assert inventory.published_attributes("gpu.nvidia.com") == {"gpu.nvidia.com/index": {"int"}}
    assert objects.slices[0].devices[0].prepared.value is not None


DRA_CORPUS = sorted(p for p in (CORPUS / "real").glob("*.yaml") if "resource.k8s.io" in p.read_text(errors="replace")) \
    if (CORPUS / "real").exists() else []


# Real manifests the API server rejects, and why.
BROKEN = {
    # The selector's ``expression`` is indented as a sibling of ``cel``, so ``cel`` is null
    # (kubernetes/website content/en/examples/dra/resourceclaim.yaml @ 36162b11).
    "kubernetes__website__content__en__examples__dra__resourceclaim.yaml": {
        ("/spec/devices/requests/0/exactly/selectors/0/cel", "Required value")
    },
}


@pytest.mark.parametrize("path", DRA_CORPUS, ids=lambda p: p.name)
def test_real_dra_manifests_read_cleanly(path: Path) -> None:
    """Every public DRA manifest in the corpus is read without exceptions; those on a served API
    version have no validation problems except the known-broken ones."""
    objects = read_objects(load_yaml_docs(path))
    found = {(p.pointer, p.message) for t in objects.templates for p in t.problems}
    found |= {(p.pointer, p.message) for c in objects.claims for p in c.problems}
    if "resource.k8s.io/v1alpha2" in path.read_text():
        assert found, path.name
        return
    assert found == BROKEN.get(path.name, set()), path.name


def test_stale_v1alpha2_selector_demo_is_reported() -> None:
    """NVIDIA demo/specs/selectors/claims.yaml still uses resource.k8s.io/v1alpha2 (dra.md §5.4)."""
    path = CORPUS / "real" / "NVIDIA__k8s-dra-driver-gpu__demo__specs__selectors__claims.yaml"
    objects = read_objects(load_yaml_docs(path))
    assert objects.templates
    for template in objects.templates:
        assert template.problems[0].pointer == "/apiVersion"
        assert "is not served since Kubernetes 1.31" in template.problems[0].message


def test_fixture_clusters_are_valid() -> None:
    for name in ("nvidia-cluster.yaml", "example-driver-cluster.yaml"):
        objects = read_objects(load_yaml_docs(FIXTURES / "dra" / name))
        assert objects.classes and objects.slices
        assert all(c.problems == () for c in objects.classes), name
        assert all(s.problems == () for s in objects.slices), name
        assert all(d.prepared.value is not None for s in objects.slices for d in s.devices)
