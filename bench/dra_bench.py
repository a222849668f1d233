"""Cost of the DRA model at cluster scale: parsing slices, building the inventory, allocating.

    .venv/bin/python bench/dra_bench.py [--nodes 1000] [--gpus 8]

Generates one ResourceSlice per node shaped like NVIDIA's DRA driver output (8 full GPUs), then
times reading them, building the inventory, compiling a selector, and running the allocator for a
two-GPU claim with a CEL selector on every node (every device's selectors evaluated once).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies.dra import ClaimToAllocate, Inventory, allocate, read_objects  # noqa: E402
from policies.dra.cel import compile_selector  # noqa: E402
from policies.dra.claims import parse_claim_spec  # noqa: E402
from policies.facts import NodeFacts  # noqa: E402

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                }
            }
        ]
    },
}
SELECTOR = (
    'device.attributes["gpu.nvidia.com"].productName.lowerAscii().matches("^.*h100.*$") && '
    'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("570.0.0")) >= 0'
)


def _slice(node: str, gpus: int, product: str) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": f"GPU-{node}-{i}"},
                "productName": {"string": product},
                "brand": {"string": "Nvidia"},
                "architecture": {"string": "Hopper"},
                "cudaComputeCapability": {"version": "9.0.0"},
                "driverVersion": {"version": "570.124.6"},
                "cudaDriverVersion": {"version": "12.8.0"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    names = [f"node-{i}" for i in range(args.nodes)]
    docs = [GPU_CLASS] + [
        _slice(n, args.gpus, "NVIDIA H100 80GB HBM3" if i % 2 else "NVIDIA A100 80GB PCIe") for i, n in enumerate(names)
    ]

    started = time.perf_counter()
    objects = read_objects(docs)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    inventory = Inventory.build(objects.classes, objects.slices)
    build_s = time.perf_counter() - started

    started = time.perf_counter()
    long_selector = " || ".join(["device.driver == 'x'"] * 420) + " || true"
    compiled = compile_selector(long_selector)
    compile_s = time.perf_counter() - started

    spec = parse_claim_spec(
        {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2,
                                                              "selectors": [{"cel": {"expression": SELECTOR}}]}}]}},
        "/spec",
    )
    claim = ClaimToAllocate("bench/claim", spec)
    started = time.perf_counter()
    fits = sum(allocate([claim], inventory, NodeFacts(n, {}, (), {})).fits is True for n in names)
    allocate_s = time.perf_counter() - started

    devices = args.nodes * args.gpus
    print(f"{args.nodes} nodes, {devices} devices")
    print(f"read slices:        {read_s:.2f} s ({read_s / devices * 1e6:.0f} µs per device)")
    print(f"build inventory:    {build_s:.3f} s")
    print(f"compile {len(long_selector)}-byte selector: {compile_s * 1000:.0f} ms (ok={compiled.ok})")
    per_node = allocate_s / args.nodes * 1000
    print(f"allocate per node:  {allocate_s:.2f} s total, {per_node:.2f} ms per node, fits on {fits}")


if __name__ == "__main__":
    main()
