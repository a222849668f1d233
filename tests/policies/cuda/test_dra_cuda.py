"""gpu-cuda-driver-mismatch on DRA GPUs: the driver read off the devices' attributes.

The cluster has NVIDIA's DRA driver on an H100 node (driverVersion 580.95.5, cudaDriverVersion 13.0.0,
a pair from a real ResourceSlice, kubernetes-sigs/dra-driver-nvidia-gpu#719) and on a GeForce RTX 4090
workstation node on driver 535.230.2 (CUDA 12.2; illustrative), shaped like
tests/fixtures/dra/nvidia-mixed-cluster.yaml.  CUDA 13.0.2 needs driver 580.95.05 natively, and 13.x's
minor-version floor is R580 (policies/data/cuda_toolkit_drivers.json, cuda_mvc_floors.json); forward
compatibility is for data-center GPUs only.
"""

from __future__ import annotations

from typing import Any

from policies import Config, evaluate
from policies.dra.cel import compile_selector, prepare_device
from policies.engine import images_in
from policies.facts import ClusterFacts
from policies.facts_build import facts_from_objects
from policies.images import ImageConfig, ImageLookup
from policies.types import Finding, Severity

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                  "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]},
}


def device(name: str, product: str, brand: str, cc: str, driver: str, cuda: str) -> dict[str, Any]:
    return {"name": name, "attributes": {
        "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{name}"}, "productName": {"string": product},
        "brand": {"string": brand}, "architecture": {"string": "x"}, "cudaComputeCapability": {"version": cc},
        "driverVersion": {"version": driver}, "cudaDriverVersion": {"version": cuda},
    }, "capacity": {"memory": {"value": "24Gi"}}}


def node_slice(node: str, dev: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node,
                                                                                     "kubernetes.io/arch": "amd64"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu"},
         "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                  "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [dev]}},
    ]


H100 = device("gpu-0", "NVIDIA H100 80GB HBM3", "Nvidia", "9.0.0", "580.95.5", "13.0.0")
RTX = device("gpu-0", "NVIDIA GeForce RTX 4090", "GeForce", "8.9.0", "535.230.2", "12.2.0")
FACTS = facts_from_objects([GPU_CLASS, *node_slice("h100-0", H100), *node_slice("rtx-0", RTX)])


def claim_pod(image: str, **env: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "cuda", "image": image, "resources": {"claims": [{"name": "gpu"}]}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "default", "name": "p"},
        "spec": {"containers": [container], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}]},
    }


TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"namespace": "default", "name": "one"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
}


def cuda_findings(obj: dict[str, Any], facts: ClusterFacts = FACTS) -> list[Finding]:
    from policies.dra.facts import DraInputs, input_layer

    inputs = DraInputs((input_layer([TEMPLATE]),))
    return [f for f in evaluate(obj, Config(), facts, dra_inputs=inputs).findings if f.rule == "gpu-cuda-driver-mismatch"]


def test_a_claim_whose_devices_cannot_all_run_the_image_gets_a_checked_selector() -> None:
    (finding,) = cuda_findings(claim_pod("nvidia/cuda:13.0.2-runtime-ubuntu22.04"))
    assert finding.severity is Severity.WARNING
    assert finding.path == "/spec/containers/0/image"
    assert "incompatible: rtx-0 (NVIDIA GeForce RTX 4090, driverVersion 535.230.2, cudaDriverVersion 12.2)" in (
        finding.message
    )
    assert "native: h100-0" in finding.message
    expected = 'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("580.95.5")) >= 0'
    assert expected in finding.remediation
    assert "ResourceClaimTemplate default/one" in finding.remediation
    # the proposed selector really keeps the H100 and drops the RTX
    selector = compile_selector(expected)
    assert selector.ok and not selector.parity_uncertain
    for dev, wanted in ((H100, True), (RTX, False)):
        prepared = prepare_device("gpu.nvidia.com", dev["attributes"], dev["capacity"])
        assert selector.evaluate(prepared).matched is wanted


def test_every_device_running_the_image_natively_is_silent() -> None:
    assert cuda_findings(claim_pod("nvidia/cuda:12.2.2-runtime-ubuntu22.04")) == []


def test_no_device_running_it_is_an_error() -> None:
    rtx_only = facts_from_objects([GPU_CLASS, *node_slice("rtx-0", RTX)])
    (finding,) = cuda_findings(claim_pod("nvidia/cuda:13.0.2-runtime-ubuntu22.04"), rtx_only)
    assert finding.severity is Severity.ERROR and "no DRA GPU it can get runs it" in finding.message
    assert "Upgrade the driver" in finding.remediation


class OneImage:
    """Image facts as a registry lookup gives them: the config of one image."""

    def __init__(self, image: str, env: tuple[tuple[str, str], ...]) -> None:
        self.image, self.env = image, env

    def lookup(self, image: str, arch: str) -> ImageLookup | None:
        if image != self.image:
            return None
        return ImageLookup("found", ImageConfig(env=self.env, source="test registry"))


def test_the_runtime_check_uses_the_devices_cuda_version() -> None:
    """An image whose config says NVIDIA_REQUIRE_CUDA=cuda>=12.4 but CUDA_VERSION=12.2.2: the legacy runtime
    refuses it on the RTX (its cudaDriverVersion is 12.2), though driver 535.230.2 runs CUDA 12.2 natively."""
    from policies.dra.facts import DraInputs, input_layer

    image = "registry.example.com/train:1"
    images = OneImage(image, (("CUDA_VERSION", "12.2.2"), ("NVIDIA_REQUIRE_CUDA", "cuda>=12.4")))
    inputs = DraInputs((input_layer([TEMPLATE]),))
    ev = evaluate(claim_pod(image), Config(), FACTS, images, dra_inputs=inputs)
    (finding,) = [f for f in ev.findings if f.rule == "gpu-cuda-driver-mismatch"]
    assert "incompatible: rtx-0" in finding.message and "native: h100-0" in finding.message
    # the container's image is one the faces look up (policies.image_uses)
    assert [u.image for u in images_in(claim_pod(image))] == [image]


def test_a_tainted_node_the_claim_is_meant_for_is_still_judged() -> None:
    # The RTX node is tainted and the pod tolerates nothing: gpu-dra-unsatisfiable names the taint, and the
    # CUDA verdict is for the devices the pod is meant for, as if it tolerated it (not silence).
    objects = [GPU_CLASS, *node_slice("rtx-0", RTX)]
    objects[1]["spec"] = {"taints": [{"key": "gpu", "value": "rtx", "effect": "NoSchedule"}]}
    (finding,) = cuda_findings(claim_pod("nvidia/cuda:13.0.2-runtime-ubuntu22.04"), facts_from_objects(objects))
    assert finding.severity is Severity.ERROR and "rtx-0" in finding.message
