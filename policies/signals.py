"""Signals that a pod reaches GPUs without a GPU resource request: one list, used everywhere.

The engine's pre-filter, ``gpu-device-access-bypass`` and the webhook ``matchConditions`` all read
these, so a pod the rule would judge always reaches the webhook.

* ``NVIDIA_VISIBLE_DEVICES`` / ``NVIDIA_DRIVER_CAPABILITIES``: the NVIDIA container runtime exposes
  the listed devices to any container on a node whose default runtime is ``nvidia``
  (NVIDIA/k8s-device-plugin README; NVIDIA Container Toolkit docs, "Environment variables").
* ``hostPath`` volumes of ``/dev/nvidia*`` (NVIDIA device nodes: nvidia0…, nvidiactl,
  nvidia-uvm, nvidia-caps/…) or of ``/dev/dri`` and below (DRM render nodes used by AMD and Intel GPUs).
"""

from __future__ import annotations

import posixpath

DEVICE_ENV_NAMES: tuple[str, ...] = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
# Values of NVIDIA_VISIBLE_DEVICES that expose no device (NVIDIA Container Toolkit docs; NVIDIA/nvidia-docker#583).
NO_DEVICE_VALUES = frozenset({"void", "none", ""})
NVIDIA_DEVICE_PREFIX = "/dev/nvidia"  # a name prefix: /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm
DRI_DIRECTORY = "/dev/dri"  # a directory: /dev/dri and what is below it, not /dev/driver
# A coarse test for filters that cannot normalise paths (the webhook's CEL matchConditions): every
# path ``is_device_host_path`` accepts contains one of these, however it is spelt (``//dev/./nvidia0``).
HOST_PATH_MARKERS: tuple[str, ...] = (posixpath.basename(NVIDIA_DEVICE_PREFIX), posixpath.basename(DRI_DIRECTORY))


def normal_host_path(path: str) -> str:
    """The path as the kernel resolves it lexically: ``//dev/./nvidia0`` → ``/dev/nvidia0``."""
    if not path:
        return path
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def is_device_host_path(path: str) -> bool:
    """Whether a hostPath of ``path`` mounts GPU device nodes."""
    normal = normal_host_path(path)
    return normal.startswith(NVIDIA_DEVICE_PREFIX) or normal == DRI_DIRECTORY or normal.startswith(DRI_DIRECTORY + "/")
