"""Signals that a pod reaches GPUs without a GPU resource request: one list, used everywhere.

The engine's pre-filter, ``gpu-device-access-bypass`` and the webhook ``matchConditions`` all read
these, so a pod the rule would judge always reaches the webhook.

* ``NVIDIA_VISIBLE_DEVICES``: the NVIDIA container runtime exposes the listed devices to any
  container on a node whose default runtime is ``nvidia`` (NVIDIA/k8s-device-plugin README; NVIDIA
  Container Toolkit docs, "Specialized Configurations with Docker").  ``NVIDIA_DRIVER_CAPABILITIES``
  is not a signal: it chooses which driver libraries are mounted, not which devices ("void/empty/
  unset" NVIDIA_VISIBLE_DEVICES "behaves like runc", the same docs), so alone it exposes no GPU.
* ``hostPath`` volumes of ``/dev/nvidia*`` (NVIDIA device nodes: nvidia0…, nvidiactl,
  nvidia-uvm, nvidia-caps/…) or of ``/dev/dri`` and below (DRM render nodes used by AMD and Intel GPUs).
"""

from __future__ import annotations

import posixpath

DEVICE_ENV_NAMES: tuple[str, ...] = ("NVIDIA_VISIBLE_DEVICES",)
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


# Host directories only node-level GPU infrastructure mounts: the device-plugin registration
# socket ("Device Plugins can expect to find the socket to register themselves on the host at
# /var/lib/kubelet/device-plugins/kubelet.sock", kubernetes/community design-proposals
# resource-management/device-plugin.md), the kubelet plugin registration directory used by DRA
# drivers (kubelet pluginmanager/pluginwatcher: plugins place a socket under plugins_registry), and
# the pod-resources API that GPU monitoring agents read allocations from (DCGM exporter's
# --pod-resources-kubelet-socket, default /var/lib/kubelet/pod-resources/kubelet.sock).
KUBELET_INFRASTRUCTURE_DIRS: tuple[str, ...] = (
    "/var/lib/kubelet/device-plugins",
    "/var/lib/kubelet/plugins_registry",
    "/var/lib/kubelet/pod-resources",
)


def infrastructure_dir(path: str) -> str | None:
    """The kubelet infrastructure directory a hostPath of ``path`` mounts (or lies in), if any."""
    normal = normal_host_path(path)
    for directory in KUBELET_INFRASTRUCTURE_DIRS:
        if normal == directory or normal.startswith(directory + "/"):
            return directory
    return None
