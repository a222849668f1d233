"""Which containers of a pod template the CUDA rule judges: those that use a GPU (or DRA claims).

The same definition as ``policies.rulekit.uses_gpu`` over ``runnable_containers``, without a rule
context, for ``policies.engine.images_in`` (which faces call before any rule runs).
"""

from __future__ import annotations

from collections.abc import Callable

from policies.podresources import container_requests
from policies.podspec import ContainerRef, PodTemplate, runnable_containers

RULE_ID = "gpu-cuda-driver-mismatch"


def gpu_containers(pod: PodTemplate, is_gpu: Callable[[str], bool]) -> list[ContainerRef]:
    """Runnable containers requesting a GPU resource (``nvidia.com/gpu: 0`` gets none)."""
    return [c for c in runnable_containers(pod) if container_requests(c, is_gpu)]


def judged_containers(pod: PodTemplate, is_gpu: Callable[[str], bool]) -> list[ContainerRef]:
    """The containers whose images the rule may judge: those requesting a GPU resource and those using
    DRA claims (``resources.claims``; judged on the claims' devices, policies.cuda.dra)."""
    return [c for c in runnable_containers(pod) if container_requests(c, is_gpu) or c.resources.get("claims")]
