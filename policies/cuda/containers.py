"""Which containers of a pod template the CUDA rule judges: those allocated a GPU device."""

from __future__ import annotations

from collections.abc import Callable

from policies.podresources import container_requests
from policies.podspec import ContainerRef, PodTemplate

RULE_ID = "gpu-cuda-driver-mismatch"


def requests_gpu(container: ContainerRef, is_gpu: Callable[[str], bool]) -> bool:
    """Whether the container is allocated a GPU device (``nvidia.com/gpu: 0`` gets none)."""
    if container.kind == "ephemeralContainer":
        return False
    return bool(container_requests(container, is_gpu))


def gpu_containers(pod: PodTemplate, is_gpu: Callable[[str], bool]) -> list[ContainerRef]:
    return [c for c in pod.containers if requests_gpu(c, is_gpu)]
