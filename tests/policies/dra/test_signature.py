"""Selector answers shared between devices that read the same (policies.dra.signature): never a wrong
answer — a device differing in anything the selector reads, or malformed, is evaluated on its own."""

from __future__ import annotations

from typing import Any

from policies.dra.cel import compile_selector
from policies.dra.objects import Device
from policies.dra.signature import evaluate, reads, signature


def gpu(uuid: str, **attributes: Any) -> Device:
    """A full GPU as NVIDIA's DRA driver publishes it (deviceinfo.go GpuInfo.Attributes())."""
    attrs = {"type": {"string": "gpu"}, "uuid": {"string": uuid}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
             "driverVersion": {"version": "570.124.6"}, **attributes}
    return Device("gpu-0", "gpu.nvidia.com", attrs, {"memory": {"value": "80Gi"}}, (), False)


CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


def test_what_a_selector_reads() -> None:
    assert set(reads(compile_selector(CLASS)) or ()) == {("driver",), ("attributes", "gpu.nvidia.com", "type")}
    assert reads(compile_selector('has(device.attributes["gpu.nvidia.com"].pcieBusID)')) == (
        ("attributes", "gpu.nvidia.com", "pcieBusID"),
    )
    # the whole domain map, computed names and bindings are not followed: every device is evaluated
    assert reads(compile_selector('size(device.attributes["gpu.nvidia.com"]) > 3')) is None
    assert reads(compile_selector('device.attributes["gpu.nvidia.com"]["ty" + "pe"] == "gpu"')) is None
    assert reads(compile_selector('cel.bind(a, device.attributes["gpu.nvidia.com"], a.type == "gpu")')) is None


def test_devices_that_differ_only_in_what_is_not_read_share_a_signature() -> None:
    compiled = compile_selector(CLASS)
    device_reads = reads(compiled)
    assert device_reads is not None
    a, b = gpu("GPU-a"), gpu("GPU-b")
    assert signature(device_reads, a) == signature(device_reads, b)
    by_uuid = compile_selector('device.attributes["gpu.nvidia.com"].uuid == "GPU-a"')
    uuid_reads = reads(by_uuid)
    assert uuid_reads is not None and signature(uuid_reads, a) != signature(uuid_reads, b)
    assert evaluate(by_uuid, a, 1_000_000).matched is True
    assert evaluate(by_uuid, b, 1_000_000).matched is False


def test_a_malformed_device_never_shares_an_answer() -> None:
    """A version that is not semver makes every selector fail on the device (compile.go getAttributeValue)."""
    compiled = compile_selector(CLASS)
    sound, broken = gpu("GPU-a"), gpu("GPU-b", driverVersion={"version": "570.124.06"})
    assert evaluate(compiled, sound, 1_000_000).matched is True
    result = evaluate(compiled, broken, 1_000_000)
    assert result.matched is None and result.error is not None and "driverVersion" in result.error
