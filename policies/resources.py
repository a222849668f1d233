"""Resource-name classification, after kubernetes/kubernetes pkg/apis/core/helper/helpers.go."""

from __future__ import annotations

from collections.abc import Iterable

from policies import patterns
from policies.boundedcache import small_key_cache

# validation.IsQualifiedName (apimachinery pkg/util/validation): an optional DNS-1123 subdomain
# prefix of at most 253 characters and "/", then a name of at most 63.
_PREFIX = patterns.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_NAME = patterns.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
MAX_QUALIFIED_NAME = 253 + 1 + 63

# Extended-resource name prefixes of GPU vendors' device plugins (domain-facts.md §C.2):
# NVIDIA k8s-device-plugin (gpu, mig-*, gpu.shared), AMD ROCm device plugin, Intel GPU plugin.
DEFAULT_GPU_PREFIXES: tuple[str, ...] = ("nvidia.com/", "amd.com/gpu", "gpu.intel.com/")


def is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_qualified_name(name: str) -> bool:
    if len(name) > MAX_QUALIFIED_NAME:
        return False
    prefix, slash, rest = name.rpartition("/")
    if slash and (len(prefix) > 253 or _PREFIX.fullmatch(prefix) is None):
        return False
    return len(rest) <= 63 and _NAME.fullmatch(rest) is not None


@small_key_cache(maxsize=4096, max_key_chars=MAX_QUALIFIED_NAME + 16)
def is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: not native, no ``requests.`` prefix, qualified."""
    if is_native(name) or name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name)


# Resources that meter a share of a GPU rather than count devices: HAMi's memory/core quotas
# (Project-HAMi/HAMi docs: nvidia.com/gpumem, gpumem-percentage, gpucores) and the Intel GPU
# plugin's shared-dev resources (intel-device-plugins-for-kubernetes cmd/gpu_plugin).
GPU_SHARE_RESOURCES = frozenset(
    {
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores",
        "gpu.intel.com/millicores",
        "gpu.intel.com/memory.max",
        "gpu.intel.com/tiles",
    }
)


# GPU shares served by device plugins of their own, outside the GPU vendors' resource names: the
# plugin picks the GPU at Allocate and sets NVIDIA_VISIBLE_DEVICES to it, which overrides the
# image's value.  Volcano's GPU-share plugin (volcano-sh/devices@95b591b6 pkg/plugin/nvidia/const.go:
# volcano.sh/gpu-memory, volcano.sh/gpu-number; server.go sets VisibleDevice, NVIDIA_VISIBLE_DEVICES)
# and Alibaba's GPU sharing (AliyunContainerService/gpushare-scheduler-extender@c0b61411
# pkg/utils/const.go: aliyun.com/gpu-mem, aliyun.com/gpu-count, EnvNVGPU NVIDIA_VISIBLE_DEVICES).
PLUGIN_SHARE_RESOURCES = frozenset(
    {"volcano.sh/gpu-memory", "volcano.sh/gpu-number", "aliyun.com/gpu-mem", "aliyun.com/gpu-count"}
)


def is_plugin_share_resource(name: str) -> bool:
    """A GPU share whose device plugin allocates a GPU and names it in NVIDIA_VISIBLE_DEVICES."""
    return name in PLUGIN_SHARE_RESOURCES


# The Intel GPU plugin's monitoring resources: one per node that gives a container every Intel GPU
# of it, "to allow the container to monitor the GPUs" — ``gpu.intel.com/monitoring`` (i915 and xe
# together, the default), or ``i915_monitoring`` and ``xe_monitoring`` with ``-monitoring-mode=split``
# (intel/intel-device-plugins-for-kubernetes@94a91bc cmd/gpu_plugin/gpu_plugin.go monitorSuffix,
# monitorResourceCombined; cmd/gpu_plugin/monitoring.md).
INTEL_MONITORING_RESOURCES = frozenset(
    {"gpu.intel.com/monitoring", "gpu.intel.com/i915_monitoring", "gpu.intel.com/xe_monitoring"}
)


def is_monitoring_resource(name: str) -> bool:
    return name in INTEL_MONITORING_RESOURCES or name.endswith("_monitoring")


def is_gpu_share_resource(name: str) -> bool:
    """True for quota-like GPU resources (not device counts), incl. the monitoring resources."""
    return name in GPU_SHARE_RESOURCES or is_monitoring_resource(name)


class GpuResourceNames:
    """Decides which resource names are GPUs: vendor prefixes plus configured extra names."""

    __slots__ = ("_exact", "_prefixes")

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self._prefixes = DEFAULT_GPU_PREFIXES
        self._exact = frozenset(extra)

    def __call__(self, name: str) -> bool:
        if name in self._exact:
            return True
        if not is_extended(name):
            return False
        # nvidia.com/* covers gpu, gpu.shared and the mig-* profiles.
        return name.startswith(self._prefixes)
