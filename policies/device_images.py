"""Which containers' images ``gpu-device-access-bypass`` reads the NVIDIA_VISIBLE_DEVICES of.

Containers that request no device (no GPU resource, no DRA claim, no GPU share a device plugin of
its own serves: policies.resources.PLUGIN_SHARE_RESOURCES) and do not set the variable in
their own ``env`` keep the image's value (policies.signals).  The engine keys its memo on what the
image facts say of these images, and faces prefetch them, as for the CUDA rule's images.
"""

from __future__ import annotations

from collections.abc import Callable

from policies.placeholders import requests_by_placeholder
from policies.podresources import container_requests
from policies.podspec import ContainerRef, PodTemplate
from policies.resources import is_plugin_share_resource
from policies.shapes import as_list
from policies.signals import NVIDIA_DEVICE_ENV

RULE_ID = "gpu-device-access-bypass"


def image_env_containers(pod: PodTemplate, is_gpu: Callable[[str], bool]) -> list[ContainerRef]:
    out = []
    for c in pod.containers:
        if c.path in pod.owner_supplied:  # its image and its GPUs come from the object that runs it
            continue
        if (container_requests(c, is_gpu) or as_list(c.resources.get("claims"))
                or requests_by_placeholder(c.resources, is_gpu) or container_requests(c, is_plugin_share_resource)):
            continue
        if any(isinstance(v, dict) and v.get("name") == NVIDIA_DEVICE_ENV for v in as_list(c.container.get("env"))):
            continue
        out.append(c)
    return out
