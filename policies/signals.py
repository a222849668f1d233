"""How a container reaches GPUs that the kubelet did not allocate to it: one list, used everywhere.

The engine's pre-filter, ``gpu-device-access-bypass`` and the webhook ``matchConditions`` all read
these, so a pod the rule would judge always reaches the webhook.  Sources (read at the tags named;
line numbers refer to them):

* **Environment.** The NVIDIA runtime injects the devices ``NVIDIA_VISIBLE_DEVICES`` names
  (``all``, indexes, UUIDs, CDI names) into any container it runs, in legacy, ``cdi`` and
  ``jit-cdi`` mode alike, for unprivileged containers too unless the node's toolkit sets
  ``accept-nvidia-visible-devices-envvar-when-unprivileged = false`` (default ``true``;
  NVIDIA/nvidia-container-toolkit v1.20.0 ``internal/config/image/cuda_image.go`` ``VisibleDevices``:
  ``if i.isPrivileged || i.acceptEnvvarUnprivileged { return envVarDeviceRequests }``;
  ``api/config/v1/config.go`` ``AcceptEnvvarUnprivileged: true``).  "Privileged" there means
  ``CAP_SYS_ADMIN`` in the bounding set (``internal/config/image/privileged.go``), so
  ``capabilities.add: [SYS_ADMIN]`` counts.  ``void``, ``none`` and the empty value select no
  device (``devices.go``; "void or empty or unset — nvidia-container-runtime has the same behavior
  as runc", container-toolkit docs, docker-specialized.md).  The AMD runtime reads
  ``AMD_VISIBLE_DEVICES`` and any ``DOCKER_RESOURCE_*`` variable, with no privilege check
  (ROCm/container-toolkit 192fe8e9 ``internal/oci/oci.go`` ``getAMDEnv``); Intel's GPU plugin hands
  out device nodes only, and no Intel runtime reads a variable (intel-device-plugins-for-kubernetes
  94a91bc9 ``cmd/gpu_plugin/gpu_plugin.go``).
* **The container's value wins over the allocation.** The kubelet puts the device plugin's
  variables first and the container's own after them (kubernetes ``pkg/kubelet/cm/
  container_manager_linux.go`` ``GetResources``, then ``kubelet_pods.go``
  ``GenerateRunContainerOptions``: ``opts.Envs = append(opts.Envs, envs...)``), and the NVIDIA
  runtime keeps the last value of a name (``internal/config/image/builder.go`` ``WithEnv``).  So under
  the device plugin's default ``envvar`` strategy (k8s-device-plugin v0.20.0
  ``cmd/nvidia-device-plugin/main.go``) a container that requests one GPU and sets
  ``NVIDIA_VISIBLE_DEVICES=all`` gets them all (NVIDIA/gpu-operator#1693).
* **The image's own value.** CUDA base images set ``NVIDIA_VISIBLE_DEVICES=all`` ("the default
  value in base CUDA container images", docker-specialized.md); a container that requests no GPU
  keeps it unless it sets ``void`` itself (``IMAGE_DEFAULTS`` below).
* **Mounts.** With ``accept-nvidia-visible-devices-as-volume-mounts``, the runtime reads device
  requests from mounts of ``/dev/null`` under ``/var/run/nvidia-container-devices``
  (``cuda_image.go`` ``requestsFromMounts``).
* **CDI annotations.** The toolkit's NRI plugin injects the CDI devices a pod's
  ``nvidia.cdi.k8s.io`` annotations name (``cmd/nvidia-ctk-installer/container/runtime/nri/
  plugin.go``: ``nriCDIAnnotationDomain``), and CDI-aware runtimes read ``cdi.k8s.io/`` annotations
  (``tags.cncf.io/container-device-interface`` ``AnnotationPrefix``).
* **Device nodes.** ``hostPath`` volumes of ``/dev/nvidia*`` (nvidia0…, nvidiactl, nvidia-uvm,
  nvidia-caps/…) or of ``/dev/dri`` and below (DRM nodes of AMD and Intel GPUs), directly or as a
  ``subPath`` of a mount of ``/dev``; and privileged containers, which get every device node of
  the host (containerd ``internal/cri/server/container_create.go``: ``oci.WithHostDevices`` unless
  ``privileged_without_host_devices``; NVIDIA/nvidia-docker#764).

``NVIDIA_DRIVER_CAPABILITIES`` is no signal: it chooses driver libraries, not devices.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from policies.cuda.image import parse_image

Vendor = Literal["nvidia", "amd"]

# Variables a runtime reads to inject devices; the NVIDIA one is subject to the node toolkit's
# accept-nvidia-visible-devices-envvar-when-unprivileged.
NVIDIA_DEVICE_ENV = "NVIDIA_VISIBLE_DEVICES"
DEVICE_ENV_NAMES: tuple[str, ...] = (NVIDIA_DEVICE_ENV, "AMD_VISIBLE_DEVICES")
DEVICE_ENV_PREFIXES: tuple[str, ...] = ("DOCKER_RESOURCE_",)  # the AMD runtime reads every one
# Values that select no device (NVIDIA: devices.go; AMD: an unknown token selects none).
NO_DEVICE_VALUES = frozenset({"void", "none", ""})


def device_env(name: object) -> Vendor | None:
    """The vendor whose runtime injects devices from a variable of this name, if any."""
    if not isinstance(name, str):
        return None
    if name == NVIDIA_DEVICE_ENV:
        return "nvidia"
    if name == "AMD_VISIBLE_DEVICES" or name.startswith(DEVICE_ENV_PREFIXES):
        return "amd"
    return None


def exposes_devices(value: str) -> bool:
    return value.strip().lower() not in NO_DEVICE_VALUES


def env_from_may_set(prefix: object) -> bool:
    """Whether an ``envFrom`` source with this ``prefix`` could define a device variable: the
    kubelet names each key ``prefix + key`` (kubelet_pods.go ``makeEnvironmentVariables``)."""
    if prefix is None:
        return True
    if not isinstance(prefix, str):
        return False
    names = (*DEVICE_ENV_NAMES, *DEVICE_ENV_PREFIXES)
    return any(n.startswith(prefix) for n in names) or prefix.startswith(DEVICE_ENV_PREFIXES)


def env_from_key(name: str, prefix: str | None) -> str | None:
    """The ConfigMap key that becomes the variable ``name`` under ``prefix``, if any."""
    p = prefix or ""
    return name[len(p):] if name.startswith(p) and len(name) > len(p) else None


def env_from_keys(prefix: str | None) -> tuple[str, ...]:
    """The ConfigMap keys that become a device variable under ``prefix`` (exact names only)."""
    return tuple(k for n in DEVICE_ENV_NAMES if (k := env_from_key(n, prefix)) is not None)


# --- images -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImageDefault:
    """Images whose config sets NVIDIA_VISIBLE_DEVICES to a device value."""

    repository: str  # path without registry, matched as a suffix (mirrors keep it)
    certain: bool  # False: built on CUDA base images, but the value is not confirmed per image
    source: str
    tag_marker: str = ""  # only tags containing this (TensorFlow's GPU images end in -gpu)


IMAGE_DEFAULTS: tuple[ImageDefault, ...] = (
    ImageDefault("nvidia/cuda", True, "CUDA base images set it to all (NVIDIA Container Toolkit docs)"),
    ImageDefault(
        "nvidia/k8s-device-plugin", True,
        "the device plugin's image sets ENV NVIDIA_VISIBLE_DEVICES=all "
        "(k8s-device-plugin v0.20.0 deployments/container/Dockerfile)",
    ),
    ImageDefault("pytorch/pytorch", True, "the pytorch/pytorch Dockerfile sets ENV NVIDIA_VISIBLE_DEVICES all"),
    ImageDefault("vllm/vllm-openai", True, "vLLM's image is built FROM nvidia/cuda (vllm docker/Dockerfile)"),
    ImageDefault(
        "tensorflow/tensorflow", True, "TensorFlow's -gpu images are built FROM nvidia/cuda (gpu.Dockerfile)", "gpu"
    ),
)
# NGC images are built on CUDA base images; their Dockerfiles are not public, so the value is
# only likely (a registry lookup reads it from the image config).
NGC_REGISTRY = "nvcr.io"
NGC_NAMESPACE = "nvidia/"


def image_default(image: object) -> ImageDefault | None:
    """What offline knowledge says of the image's own NVIDIA_VISIBLE_DEVICES."""
    if not isinstance(image, str):
        return None
    ref = parse_image(image)
    if ref is None:
        return None
    for known in IMAGE_DEFAULTS:
        if ref.path_endswith(known.repository) and (not known.tag_marker or known.tag_marker in (ref.tag or "")):
            return known
    if ref.registry == NGC_REGISTRY and ref.repository.startswith(NGC_NAMESPACE):
        return ImageDefault(ref.repository, False, "NGC images are built on CUDA base images, which set it to all")
    return None


# Strings the webhook's CEL matchConditions look for in an image (a superset of image_default).
IMAGE_MARKERS: tuple[str, ...] = (*(d.repository for d in IMAGE_DEFAULTS), f"{NGC_REGISTRY}/{NGC_NAMESPACE}")


# --- GPU shares another scheduler allocates ---------------------------------------------------

# KAI Scheduler's GPU sharing (kai-scheduler/KAI-Scheduler v0.17.0): a pod with schedulerName
# kai-scheduler (constants.go ``DefaultSchedulerName``) and the annotation gpu-fraction (0 < x < 1)
# or gpu-memory (MiB; gpu_request_validator.go) gets a share of a GPU that a reservation pod holds
# (resource_reservation.go requests nvidia.com/gpu: 1).  KAI's webhook gives the "fraction
# container" (containers[0], or the one gpu-fraction-container-name names; gpu_access.go
# GetFractionContainerRef) NVIDIA_VISIBLE_DEVICES from a ConfigMap (configMapKeyRef) that its
# binder fills with that GPU's UUID.  Without KAI (or with spec.nodeName set, which skips every
# scheduler) no share is allocated.
KAI_SCHEDULER = "kai-scheduler"
KAI_FRACTION = "gpu-fraction"
KAI_MEMORY = "gpu-memory"
KAI_CONTAINER = "gpu-fraction-container-name"


def kai_share_container(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> str | None:
    """The name of the container KAI gives a GPU share to, or None when the pod asks for none."""
    if spec.get("schedulerName") != KAI_SCHEDULER or spec.get("nodeName"):
        return None
    if not (_fraction(annotations.get(KAI_FRACTION)) or _positive_int(annotations.get(KAI_MEMORY))):
        return None
    named = annotations.get(KAI_CONTAINER)
    if isinstance(named, str) and named:
        return named
    containers = spec.get("containers")
    first = containers[0] if isinstance(containers, list) and containers else None
    name = first.get("name") if isinstance(first, dict) else None
    return name if isinstance(name, str) else None


# Run:ai's scheduler (the commercial predecessor of KAI) does the same after it has allocated: it
# schedules pods with schedulerName runai-scheduler, records what it gave them in runai-allocated-gpus,
# runai-allocated-mig-gpus and runai-allocated-gpu-memory annotations, and its containers take
# NVIDIA_VISIBLE_DEVICES from the ConfigMap it fills (configMapKeyRef key RUNAI-VISIBLE-DEVICES); as
# Run:ai's own pods show them (run-ai/fake-gpu-operator@3a3f6441 design/samples/<2.9 and >=2.9
# mig/pod/*.yaml, dumps of scheduled pods).
RUNAI_SCHEDULER = "runai-scheduler"
RUNAI_ALLOCATED = ("runai-allocated-gpus", "runai-allocated-mig-gpus", "runai-allocated-gpu-memory")
RUNAI_VISIBLE_DEVICES_KEY = "RUNAI-VISIBLE-DEVICES"


def runai_share_containers(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> frozenset[str]:
    """The containers whose NVIDIA_VISIBLE_DEVICES Run:ai's scheduler fills with what it allocated
    (none unless it scheduled the pod and recorded an allocation)."""
    if spec.get("schedulerName") != RUNAI_SCHEDULER or not any(_positive(annotations.get(k)) for k in RUNAI_ALLOCATED):
        return frozenset()
    names = set()
    containers = spec.get("containers")
    for c in containers if isinstance(containers, list) else ():
        env = c.get("env") if isinstance(c, dict) else None
        for var in env if isinstance(env, list) else ():
            source = var.get("valueFrom") if isinstance(var, dict) else None
            ref = source.get("configMapKeyRef") if isinstance(source, dict) else None
            if (isinstance(ref, dict) and isinstance(var, dict) and var.get("name") == NVIDIA_DEVICE_ENV
                    and ref.get("key") == RUNAI_VISIBLE_DEVICES_KEY and isinstance(c.get("name"), str)):
                names.add(c["name"])
    return frozenset(names)


def _positive(value: object) -> bool:
    if not isinstance(value, str) or len(value) > 32:
        return False
    try:
        return float(value) > 0
    except ValueError:
        return False


def _fraction(value: object) -> bool:
    if not isinstance(value, str) or len(value) > 32:
        return False
    try:
        return 0 < float(value) < 1
    except ValueError:
        return False


def _positive_int(value: object) -> bool:
    return isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19 and int(value) > 0


# --- annotations, mounts, device nodes ---------------------------------------------------------

CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
NRI_CDI_DOMAIN = "nvidia.cdi.k8s.io"


# The NRI plugin injects management devices only into pods of its configured namespaces
# (plugin.go: ``if strings.Contains(cdiDeviceNames, "management.nvidia.com/gpu") { if
# !slices.Contains(p.namespaces, pod.Namespace) {``): the GPU Operator's own validator asks for them.
NRI_RESTRICTED_KIND = "management.nvidia.com/"


def is_cdi_annotation(key: object) -> bool:
    """A pod annotation that asks a runtime (or the NRI plugin) to inject CDI devices."""
    return isinstance(key, str) and (
        key.startswith(CDI_ANNOTATION_PREFIX) or key == NRI_CDI_DOMAIN or key.startswith(NRI_CDI_DOMAIN + "/")
    )


def cdi_annotation_grants(key: str, value: object) -> bool:
    """Whether a CDI annotation can give a tenant's pod devices: not when it names only management
    devices through the NRI plugin, which refuses them outside its own namespaces."""
    if key.startswith(CDI_ANNOTATION_PREFIX) or not isinstance(value, str):
        return True
    names = [n.strip() for n in value.split(",") if n.strip()]
    return not names or not all(n.startswith(NRI_RESTRICTED_KIND) for n in names)


DEVICE_LIST_MOUNT_DIR = "/var/run/nvidia-container-devices"  # k8s-device-plugin server.go


def is_device_list_mount(mount_path: object) -> bool:
    if not isinstance(mount_path, str):
        return False
    normal = normal_host_path(mount_path)
    return normal == DEVICE_LIST_MOUNT_DIR or normal.startswith(DEVICE_LIST_MOUNT_DIR + "/")


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


def mounted_device_path(host_path: str, sub_path: object) -> str | None:
    """The device path a mount of ``host_path`` at ``sub_path`` reaches (``/dev`` + ``nvidia0``),
    when it is one; a ``subPath`` never leaves its volume (API validation refuses ``..`` and
    absolute paths: kubernetes pkg/apis/core/validation ``validateLocalDescendingPath``)."""
    if not isinstance(sub_path, str) or not sub_path:
        return None
    joined = normal_host_path(posixpath.join(normal_host_path(host_path) or "/", sub_path.lstrip("/")))
    return joined if is_device_host_path(joined) else None


def holds_device_nodes(host_path: str) -> bool:
    """Whether ``host_path`` is ``/dev`` or above it: a ``subPathExpr`` there may reach a GPU node."""
    normal = normal_host_path(host_path)
    return normal in ("/", "/dev")


# HiveD, a scheduler that allocates GPUs itself: "The scheduler directly delivers GPU isolation decision to
# nvidia-container-runtime through Pod Env NVIDIA_VISIBLE_DEVICES" (or AMD_VISIBLE_DEVICES), taken with the
# downward API from this annotation, which "will be populated by scheduler when bind the pod"
# (microsoft/hivedscheduler@66f26ac4 doc/user-manual.md, Scheduling GPUs; its examples' schedulerName).
HIVED_SCHEDULER_NAME = "hivedscheduler"
HIVED_ISOLATION_FIELD = "metadata.annotations['hivedscheduler.microsoft.com/pod-leaf-cell-isolation']"


def scheduler_allocated(var: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    """Who allocates the devices a device variable taken from the downward API names, when a GPU
    scheduler does: the pod goes to that scheduler and names no node itself (a pod bound by its
    author would keep whatever value its author wrote into the annotation)."""
    value_from = var.get("valueFrom")
    field_ref = value_from.get("fieldRef") if isinstance(value_from, Mapping) else None
    path = field_ref.get("fieldPath") if isinstance(field_ref, Mapping) else None
    if path == HIVED_ISOLATION_FIELD and spec.get("schedulerName") == HIVED_SCHEDULER_NAME and not spec.get("nodeName"):
        return "HiveD"
    return None


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


# Images of GPU infrastructure: NVIDIA's GPU Operator's operands (NVIDIA/gpu-operator v26.7.0
# deployments/gpu-operator/values.yaml: gpu-operator, driver, cloud-native/*, k8s/container-toolkit,
# k8s/dcgm-exporter, k8s-device-plugin (also GPU feature discovery's), kubevirt-gpu-device-plugin,
# dra-driver-nvidia-gpu), as repository paths on any registry.
INFRASTRUCTURE_IMAGE_PATHS: tuple[str, ...] = (
    "nvidia/gpu-operator", "nvidia/driver", "nvidia/k8s/container-toolkit", "nvidia/k8s/dcgm-exporter",
    "nvidia/k8s-device-plugin", "nvidia/kubevirt-gpu-device-plugin", "nvidia/dra-driver-nvidia-gpu",
    # GPU Feature Discovery before it moved into k8s-device-plugin's image (NVIDIA/gpu-feature-discovery@47a1ea68
    # deployments/static: nvcr.io/nvidia/gpu-feature-discovery).
    "nvidia/gpu-feature-discovery",
    # NVIDIA's GPUd node daemon, "actively monitoring GPUs" (leptonai/gpud@4a8de33a README.md; its chart's
    # image, deployments/helm/gpud/values.yaml: nvcr.io/nvidia/lepton/gpud): a privileged DaemonSet that
    # reads every GPU of its node, as DCGM exporter does.
    "nvidia/lepton/gpud",
    # Azure's GPU driver installer for AKS nodes ("Run an image as a privileged container in the host PID
    # namespace. It enters the host mount namespace, installs the selected GPU driver": Azure/aks-gpu@0338d1c3
    # README.md; its DaemonSet, Azure/aks-gpu@dde32393 manifests.yaml: mcr.microsoft.com/aks/aks-gpu, privileged,
    # hostPID).
    "aks/aks-gpu",
    # The AMD GPU Operator's operand images (ROCm/gpu-operator@6df13c17 helm-charts-k8s/values.yaml:
    # the operator, its utils, device plugin and node labeller, metrics exporter, test runner,
    # device config manager and DRA driver).
    "rocm/amd-gpu-operator", "rocm/amd-gpu-operator-utils", "rocm/k8s-device-plugin", "rocm/device-metrics-exporter",
    "rocm/test-runner", "rocm/device-config-manager", "rocm/k8s-gpu-dra-driver",
)
INFRASTRUCTURE_IMAGE_DIRS: tuple[str, ...] = ("nvidia/cloud-native/",)


def is_infrastructure_image(image: object) -> bool:
    """Whether ``image`` is one of the GPU infrastructure images above (GPU Operator operands, device
    plugins, driver installers), for manifests that name no namespace; a namespace decides where one
    is named."""
    ref = parse_image(image) if isinstance(image, str) else None
    if ref is None:
        return False
    path = ref.repository
    return any(path == p or path.endswith("/" + p) for p in INFRASTRUCTURE_IMAGE_PATHS) or any(
        path.startswith(d) or f"/{d}" in path for d in INFRASTRUCTURE_IMAGE_DIRS
    )


def infrastructure_dir(path: str) -> str | None:
    """The kubelet infrastructure directory a hostPath of ``path`` mounts (or lies in), if any."""
    normal = normal_host_path(path)
    for directory in KUBELET_INFRASTRUCTURE_DIRS:
        if normal == directory or normal.startswith(directory + "/"):
            return directory
    return None
