"""``gpuguard serve`` admitting DRA claims and pods over real TLS, with cluster facts watched live.

The server is a real subprocess (``--kubeconfig`` pointing at the in-process API server, which serves
tests/fixtures/dra/nvidia-mixed-cluster.yaml: NVIDIA's DRA driver on H100 and MIG nodes, the device
plugin on an A100 node, both on an L4 node, the quickstart demos' templates).  Reviews are shaped as
kube-apiserver sends them (tests/support/admission.py); objects come from NVIDIA's demos
(NVIDIA/k8s-dra-driver-gpu@22407113 demo/specs/quickstart/v1, tests/bats/specs, demo/specs/extended-resources).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from certs.tls import Bundle, generate_bundle
from tests.support.admission import review
from tests.support.fake_apiserver import DRA_RESOURCES, FakeApiServer, serving
from tests.support.kubeconfig import write_kubeconfig
from tests.support.paths import CORPUS
from tests.support.webhook_server import LOCAL_SANS, Server, call, start_server, stop_server, wait_for
from tests.webhook.test_live_dra import serve_cluster

pytestmark = pytest.mark.integration

DEMOS = CORPUS / "real"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("dra-serve")
    bundle: Bundle = generate_bundle("gpuguard", "gpuguard", tmp / "certs", extra_sans=LOCAL_SANS)
    api = FakeApiServer(("nodes", "runtimeclasses", "nodepools", *DRA_RESOURCES))
    serve_cluster(api)
    with serving(api):
        kubeconfig = tmp / "kubeconfig"
        write_kubeconfig(kubeconfig, f"http://127.0.0.1:{api.port}", token="t")
        srv = start_server(tmp / "srv", bundle, "--kubeconfig", str(kubeconfig))
        try:
            with srv.client() as client:
                wait_for("live facts", lambda: client.get("/readyz").status_code == 200, srv.log_text)
            yield srv
        finally:
            stop_server(srv)


def demo(name: str, kind: str, index: int = 0) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((DEMOS / name).read_text()) if isinstance(d, dict) and d.get("kind") == kind]
    found: dict[str, Any] = docs[index]
    return found


def validate(server: Server, obj: dict[str, Any]) -> dict[str, Any]:
    with server.client() as client:
        return call(client, "validate", review("CREATE", obj))


def test_a_claim_naming_a_missing_class_is_denied(server: Server) -> None:
    claim = demo("NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__imex-test1.yaml", "ResourceClaim")
    answer = validate(server, claim)
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "[gpu-dra-device-class] spec.devices.requests[0].exactly.deviceClassName" in message
    assert "device class imex.nvidia.com does not exist" in message


# NVIDIA/k8s-dra-driver-gpu@22407113 tests/bats/specs/gpu-cel-nomatch.yaml (not in the shared corpus)
CEL_NOMATCH: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "rct-cel-nomatch", "labels": {"env": "batssuite"}},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "NONEXISTENT-GPU-XYZ"'}}],
    }}]}}},
}


def test_a_template_no_node_can_satisfy_is_denied_naming_the_selector(server: Server) -> None:
    template = copy.deepcopy(CEL_NOMATCH)
    template["metadata"]["namespace"] = "default"
    answer = validate(server, template)
    assert answer["allowed"] is False
    assert "[gpu-dra-unsatisfiable] spec.spec.devices.requests[0].exactly.selectors[0].cel.expression" in (
        answer["status"]["message"]
    )


def test_quickstart_objects_are_admitted(server: Server) -> None:
    for name in ("gpu-test1", "gpu-test4"):
        path = f"NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__{name}.yaml"
        template = demo(path, "ResourceClaimTemplate")
        assert validate(server, template)["allowed"] is True, name
    pod = demo("NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__gpu-test1.yaml", "Pod")
    pod["spec"]["nodeSelector"] = {"pool": "h100"}  # off the node that runs both the plugin and DRA
    answer = validate(server, pod)
    assert answer["allowed"] is True and "warnings" not in answer, answer


def test_a_pod_asking_for_a_request_its_cluster_template_lacks_is_denied(server: Server) -> None:
    deployment = demo("NVIDIA__k8s-dra-driver-gpu__demo__specs__quickstart__v1__gpu-test4.yaml", "Deployment")
    bad = copy.deepcopy(deployment)
    bad["spec"]["template"]["spec"]["containers"][2]["resources"]["claims"][0]["request"] = "mig-2g-10gb-0"
    answer = validate(server, bad)
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "[gpu-dra-request-reference] spec.template.spec.containers[2].resources.claims[0].request" in message
    assert "did you mean 'mig-2g-10gb'" in message


def test_an_extended_resource_served_by_dra_is_capacity(server: Server) -> None:
    """demo/specs/extended-resources/gpu-full.yaml: no node of the H100 pool advertises nvidia.com/gpu
    through a device plugin, but the gpu.nvidia.com DeviceClass serves it there."""
    pod = demo("NVIDIA__k8s-dra-driver-gpu__demo__specs__extended-resources__gpu-full.yaml", "Pod")
    pod["spec"]["nodeSelector"] = {"pool": "h100"}
    answer = validate(server, pod)
    assert answer["allowed"] is True, answer
    assert not any(w.startswith(("gpu-resource-unknown", "gpu-unschedulable")) for w in answer.get("warnings", []))
    too_many = copy.deepcopy(pod)
    too_many["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 5
    answer = validate(server, too_many)
    assert answer["allowed"] is False
    # the H100 node counts its four DRA GPUs; the A100 node's eight come from the device plugin
    message = answer["status"]["message"]
    assert "[gpu-unschedulable]" in message and "has 4 nvidia.com/gpu allocatable" in message


def test_a_mixed_node_is_no_warning_per_pod_and_a_guarded_removed_attribute_warns(server: Server) -> None:
    # The mixed node is the cluster's problem (said once, by audit, on the Node): a pod that may land
    # there gets an info finding, logged, not one more admission warning per pod.
    pod = demo("NVIDIA__k8s-dra-driver-gpu__demo__specs__extended-resources__gpu-full.yaml", "Pod")
    answer = validate(server, pod)
    assert answer["allowed"] is True
    assert not any(w.startswith("gpu-dra-mixed-allocation") for w in answer.get("warnings", [])), answer
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"namespace": "gpu-test1", "name": "by-bus"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression": 'has(device.attributes["gpu.nvidia.com"].pcieBusID)'}}],
        }}]}}},
    }
    answer = validate(server, template)
    # the has() guard makes the removed attribute a warning; no device has it, so nothing can be allocated
    assert any(w.startswith("gpu-dra-selector") for w in answer.get("warnings", [])), answer
    assert answer["allowed"] is False and "[gpu-dra-unsatisfiable]" in answer["status"]["message"]


def test_claims_are_never_patched(server: Server) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": "gpu-test1", "name": "x"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    with server.client() as client:
        answer = call(client, "mutate", review("CREATE", claim))
    assert answer["allowed"] is True and "patch" not in answer
