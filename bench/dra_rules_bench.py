"""Cost of the DRA rules at cluster scale, as the webhook pays it per facts snapshot and per review.

    .venv/bin/python bench/dra_rules_bench.py [--nodes 1000] [--gpus 8]

Builds ClusterFacts from Nodes and one ResourceSlice per node shaped like NVIDIA's DRA driver output
(full GPUs; NVIDIA/k8s-dra-driver-gpu deviceinfo.go) plus the chart's gpu.nvidia.com DeviceClass with
``extendedResourceName: nvidia.com/gpu``, then times, in order, what a fresh snapshot costs:

* building the facts (DRA objects parsed) and the DRA-served extended-resource capacity (every
  device against every class, once per snapshot);
* the first and a repeated evaluation of a pod whose claim fits (NVIDIA's gpu-test1 pod);
* a template no node can satisfy (NVIDIA's tests/bats/specs/gpu-cel-nomatch.yaml: every node searched),
  first and repeated;
* a plain ``nvidia.com/gpu: 1`` pod, served by DRA.

Baseline: ``ClusterFacts.from_objects`` of the same Nodes without DRA objects.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from policies.facts_build import facts_from_objects

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies import Config, evaluate  # noqa: E402
from policies.dra.cel import compile_selector  # noqa: E402
from policies.effective_facts import effective_facts  # noqa: E402

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                  "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
             "extendedResourceName": "nvidia.com/gpu"},
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"namespace": "gpu-test1", "name": "single-gpu"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
}
NOMATCH_CEL = 'device.attributes["gpu.nvidia.com"].productName == "NONEXISTENT-GPU-XYZ"'
NOMATCH = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"namespace": "gpu-test1", "name": "rct-cel-nomatch"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [{"cel": {"expression": NOMATCH_CEL}}],
    }}]}}},
}
CLAIM_POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "gpu-test1", "name": "pod1"},
    "spec": {"containers": [{"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}],
             "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]},
}
PLAIN_POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-full-pod"},
    "spec": {"containers": [{"name": "cuda", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                             "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "1Gi"}}}]},
}


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "63", "memory": "500Gi", "pods": "110"}}}


def resource_slice(name: str, gpus: int) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {
        "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{name}-{i}"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"}, "brand": {"string": "Nvidia"},
        "architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "570.124.6"}, "cudaDriverVersion": {"version": "12.8.0"},
    }, "capacity": {"memory": {"value": "80Gi"}}} for i in range(gpus)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpu"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def timed(what: str, fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``fn``; print and return its CPU time (the machine may be shared: wall time is shown too)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    print(f"{what:<72} {used * 1000:9.1f} ms CPU {elapsed * 1000:9.1f} ms wall")
    return result, used


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    names = [f"h100-{i:05d}" for i in range(args.nodes)]
    nodes = [node(n) for n in names]
    dra = [GPU_CLASS, TEMPLATE, *(resource_slice(n, args.gpus) for n in names)]
    config = Config()
    print(f"{args.nodes} nodes x {args.gpus} GPUs")
    timed("CEL grammar built (once per process; gpuguard serve does it at start)",
          lambda: compile_selector("device.driver == 'x'"))
    _, baseline = timed("baseline: facts from Nodes only", lambda: facts_from_objects(nodes))
    facts, build = timed("facts from Nodes and DRA objects", lambda: facts_from_objects([*nodes, *dra]))
    _, capacity = timed("DRA-served capacity (first evaluation's effective facts)",
                        lambda: effective_facts(facts, config))
    for what, obj in (("pod with a claim that fits", CLAIM_POD), ("template no node satisfies", NOMATCH),
                      ("plain nvidia.com/gpu pod served by DRA", PLAIN_POD)):
        ev, _ = timed(f"{what}: first", lambda obj=obj: evaluate(obj, config, facts))  # type: ignore[misc]
        timed(f"{what}: again (memoised)", lambda obj=obj: evaluate(obj, config, facts))  # type: ignore[misc]
        print(f"  findings: {sorted({f.rule for f in ev.findings}) or 'none'}")
    print(f"snapshot cost vs. baseline: {(build + capacity) / baseline:.1f}x")


if __name__ == "__main__":
    main()
