"""gpu-device-access-bypass: GPU access that goes around the device plugin's allocation.

The device plugin gives a container the GPUs the kubelet allocated to it; three things hand out
GPUs that nobody allocated, so the scheduler and the kubelet believe they are free:

* ``NVIDIA_VISIBLE_DEVICES`` on a container that requests no GPU: the NVIDIA container runtime
  exposes the listed devices, ``all`` included, to any container of a node whose default runtime is
  ``nvidia`` (NVIDIA/k8s-device-plugin README: "If you do not request GPUs when you use the device
  plugin, the plugin exposes all the GPUs on the machine inside your container"; issue #87).
  ``void``, ``none`` and the empty string expose no device (NVIDIA Container Toolkit docs,
  NVIDIA/nvidia-docker#583).  A value taken from ``valueFrom`` is unknown here and is reported.
  ``NVIDIA_DRIVER_CAPABILITIES`` alone selects no device (it picks driver libraries), so it is not
  reported.
* a ``hostPath`` volume of ``/dev/nvidia*`` or ``/dev/dri`` device nodes;
* a privileged container in a pod that uses GPUs: privileged mode allows every device of the host
  ("this is by design of the --privileged option of Docker, it whitelists all devices",
  NVIDIA/nvidia-docker#764), so it sees every GPU of the node, not just the allocated ones.

A container with DRA ``resources.claims`` counts as requesting devices.

GPU infrastructure is not a bypass: a pod that mounts a kubelet directory only node agents use
(``/var/lib/kubelet/device-plugins``, ``plugins_registry`` or ``pod-resources``; see
``policies.signals``) is a device plugin, a DRA driver or a GPU monitor such as DCGM exporter,
which see every GPU by design.  Its findings are kept as **info**, wherever it runs, so the
webhook never blocks an operator install or upgrade.

Failing::

    containers:
    - name: tool
      image: nvidia/cuda:12.4.1-base-ubuntu22.04
      env:
      - {name: NVIDIA_VISIBLE_DEVICES, value: all}      # no nvidia.com/gpu requested

Passing::

    containers:
    - name: tool
      image: nvidia/cuda:12.4.1-base-ubuntu22.04
      env:
      - {name: NVIDIA_VISIBLE_DEVICES, value: void}     # opt out of the image's default "all"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from policies.applicability import Applies, Profile
from policies.podspec import ContainerRef
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import uses_gpu
from policies.shapes import as_dict, as_list, text
from policies.signals import DEVICE_ENV_NAMES, NO_DEVICE_VALUES, infrastructure_dir, is_device_host_path
from policies.types import Severity, Violation

ID = "gpu-device-access-bypass"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False


def _applies(profile: Profile) -> bool:
    """Every finding below is an env entry named in DEVICE_ENV_NAMES, a device hostPath volume or a
    privileged container."""
    t = profile.template
    return t.device_env or t.device_host_path or t.privileged


APPLIES: Applies = _applies
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "A container gets GPU access that bypasses the device plugin's allocation."
REMEDIATION = (
    "Request GPUs through resources.limits (or DRA claims); remove NVIDIA_VISIBLE_DEVICES from containers "
    "without GPUs (or set it to void), hostPath volumes of /dev/nvidia* and /dev/dri, and privileged mode from "
    "GPU pods."
)
OPTIONS: tuple[Option, ...] = ()



def _requests_devices(ctx: RuleContext, c: ContainerRef) -> bool:
    return uses_gpu(ctx, c) or bool(c.resources.get("claims"))


def _env_violations(ctx: RuleContext, c: ContainerRef) -> Iterator[Violation]:
    env = c.container.get("env")
    if not isinstance(env, list) or _requests_devices(ctx, c):
        return
    for i, var in enumerate(env):
        if not isinstance(var, dict) or var.get("name") not in DEVICE_ENV_NAMES:
            continue
        name = var["name"]
        value = var.get("value")
        if "valueFrom" in var and value is None:
            shown = "a value from valueFrom"
        else:
            text = "" if value is None else str(value)
            if name == "NVIDIA_VISIBLE_DEVICES" and text.strip().lower() in NO_DEVICE_VALUES:
                continue
            shown = repr(text)
        yield Violation(
            message=(
                f"container {c.name!r} requests no GPU but sets {name} to {shown}; the NVIDIA runtime then exposes "
                f"GPUs that the device plugin did not allocate: request nvidia.com/gpu in resources.limits or "
                f"remove {name}"
            ),
            path=(*c.path, "env", i),
        )


def _volume_violations(ctx: RuleContext) -> Iterator[Violation]:
    if ctx.pod.shape == "component":
        return
    volumes = ctx.pod.spec.get("volumes")
    if not isinstance(volumes, list):
        return
    for i, vol in enumerate(volumes):
        host = vol.get("hostPath") if isinstance(vol, dict) else None
        if not isinstance(host, dict) or not isinstance(host.get("path"), str):
            continue
        if is_device_host_path(host["path"]):
            yield Violation(
                message=(
                    f"volume {text(vol.get('name'), 63)!r} mounts the host's GPU device nodes "
                    f"({text(host['path'])}) by hostPath, "
                    f"bypassing the device plugin: request GPUs in resources.limits instead"
                ),
                path=("volumes", i, "hostPath", "path"),
            )


def _infrastructure(ctx: RuleContext) -> str | None:
    """The kubelet infrastructure directory the pod mounts, if it is GPU infrastructure."""
    if ctx.pod.shape == "component":
        return None
    for vol in as_list(ctx.pod.spec.get("volumes")):
        path = as_dict(as_dict(vol).get("hostPath")).get("path")
        if isinstance(path, str) and (directory := infrastructure_dir(path)) is not None:
            return directory
    return None


def check(ctx: RuleContext) -> Iterator[Violation]:
    infrastructure = _infrastructure(ctx)
    for v in _violations(ctx):
        if infrastructure is None:
            yield v
        else:
            note = f" (the pod mounts {infrastructure}: GPU infrastructure, which sees every GPU by design)"
            yield dataclasses.replace(v, message=v.message + note, severity=Severity.INFO)


def _violations(ctx: RuleContext) -> Iterator[Violation]:
    for c in ctx.pod.containers:
        yield from _env_violations(ctx, c)
    yield from _volume_violations(ctx)
    if not ctx.gpu_requests():
        return
    for c in ctx.pod.containers:
        security = c.container.get("securityContext")
        if isinstance(security, dict) and security.get("privileged") is True:
            yield Violation(
                message=(
                    f"container {c.name!r} is privileged in a pod that uses GPUs; privileged containers see every "
                    f"GPU of the node, not only the allocated ones: remove securityContext.privileged"
                ),
                path=(*c.path, "securityContext", "privileged"),
            )
