"""The live audit in a DRA cluster (the real ``kubernetes`` client against the in-process API server):
ResourceClaims and ResourceClaimTemplates are judged like workloads, and the DRA objects are facts.

Cluster: tests/fixtures/dra/nvidia-mixed-cluster.yaml (NVIDIA's DRA driver beside its device plugin).
Workloads: NVIDIA's imex-test1 demo (NVIDIA/k8s-dra-driver-gpu@22407113
demo/specs/quickstart/v1/imex-test1.yaml, the shared corpus), whose ResourceClaims name
``imex.nvidia.com``, a DeviceClass the driver's chart does not install.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpuguard.audit.auditor import Auditor
from gpuguard.audit.live import audit_workloads, list_facts
from gpuguard.audit.model import AuditResult
from gpuguard.kube.discovery import Discovery, RestClient
from gpuguard.sources.configmodel import load_config
from tests.support.fake_apiserver import ALL_RESOURCES, DRA_RESOURCES, TYPE_META, FakeApiServer, api_client, serving
from tests.support.paths import CORPUS, FIXTURES

pytestmark = pytest.mark.integration

MIXED = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"
IMEX_TEST1 = CORPUS / "real" / "NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__imex-test1.yaml"
RESOURCE_OF = {meta["kind"]: resource for resource, meta in TYPE_META.items()}


def cluster_objects() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load(MIXED.read_text())["items"]
    return items


def demo_objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(IMEX_TEST1.read_text()) if d and d["kind"] != "Namespace"]


def start(dra: bool) -> FakeApiServer:
    state = FakeApiServer((*ALL_RESOURCES, *DRA_RESOURCES) if dra else ALL_RESOURCES)
    for obj in cluster_objects() + demo_objects():
        resource = RESOURCE_OF[obj["kind"]]
        if resource in state.served:
            state.put(resource, obj)
    return state


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = start(dra=True)
    with serving(state):
        yield state


def audit(api: FakeApiServer) -> tuple[AuditResult, list[str], bool]:
    with api_client(api) as c:
        rest = RestClient(c)
        listed = list_facts(rest, Discovery(rest), page_size=3)
        auditor = Auditor(load_config(None), listed.facts)
        audit_workloads(rest, Discovery(rest), auditor, page_size=3)
    return auditor.finish(), listed.notes, listed.facts.dra is not None


def test_claims_are_judged_against_the_clusters_device_classes(api: FakeApiServer) -> None:
    result, notes, has_dra = audit(api)
    assert notes == [] and result.errors == [] and has_dra
    wrong_class = sorted((f.ref.kind, f.ref.name) for f in result.findings if f.finding.rule == "gpu-dra-device-class")
    # the claims themselves, the Deployments whose pods use them (resolved through the cluster's
    # claims), and the fixture's gpu-test-vfiopci template (vfio.gpu.nvidia.com is not installed either)
    assert wrong_class == [
        *(("Deployment", f"deployment{i}") for i in range(4)),
        *(("ResourceClaim", f"deployment{i}-imex-channel") for i in range(4)),
        ("ResourceClaimTemplate", "single-gpu"),
    ]
    assert api.list_calls["resourceclaims"] >= 2 and api.list_calls["resourceclaimtemplates"] >= 2  # facts + judged


def test_without_dra_served_nothing_of_it_is_listed_or_noted() -> None:
    state = start(dra=False)
    with serving(state):
        result, notes, has_dra = audit(state)
    assert notes == [] and result.errors == [] and not has_dra
    assert all(f.ref.kind not in ("ResourceClaim", "ResourceClaimTemplate") for f in result.findings)


def test_a_dra_list_that_fails_drops_all_dra_facts_and_says_so(api: FakeApiServer) -> None:
    api.forbidden.add("resourceslices")
    result, notes, has_dra = audit(api)
    assert not has_dra and result.errors == []
    assert any("resourceslices.resource.k8s.io not listed" in n for n in notes)
    assert any("judged without any of them" in n for n in notes)
