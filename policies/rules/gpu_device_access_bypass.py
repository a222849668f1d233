"""gpu-device-access-bypass: GPU access that goes around the device plugin's allocation.

The device plugin (or a DRA driver) gives a container the GPUs the kubelet allocated to it; these
hand out GPUs nobody allocated, so the scheduler and the kubelet believe they are free (sources in
``policies.signals``):

* **a device variable in the container's env** — ``NVIDIA_VISIBLE_DEVICES``,
  ``AMD_VISIBLE_DEVICES`` or ``DOCKER_RESOURCE_*`` set to anything but ``void``, ``none`` or empty,
  or taken from ``valueFrom``.  On a container *without* GPUs the runtime exposes what it names
  (``all`` included); on a container *with* GPUs (device plugin or DRA claims) its own value comes
  after the device plugin's and wins, so ``all`` gets every GPU of the node, not the allocated
  ones.  ``void`` on a GPU container hides the GPUs it asked for: a warning.  A value the HiveD
  scheduler allocates (the downward API's view of the annotation it sets when it binds the pod, in
  a pod that goes to it and names no node) is that scheduler's allocation: info.
* **the image's own value** — CUDA base images (and ``pytorch/pytorch``, vLLM, TensorFlow's
  ``-gpu`` images, NGC) set ``NVIDIA_VISIBLE_DEVICES=all``; a container that requests no GPU gets
  every GPU of the node it lands on unless it sets ``void``.  An error when cluster facts show GPU
  nodes it can land on, a warning without facts (or for images where the value is only likely),
  nothing when no GPU node admits it.  With a registry lookup the image config decides.  Not for
  a Kubeflow Trainer runtime's ``node`` containers: the TrainJob that runs the runtime sets their
  image and their GPUs (``resourcesPerNode``), so the template's defaults decide neither.
* **``envFrom``** a ConfigMap or Secret whose keys (with the ``prefix``) may define a device
  variable.  In a run of manifests (``lint``: ``TemplateInputs.env_from``, policies.env_sources) a
  source the run carries is read — an error when it sets ``NVIDIA_VISIBLE_DEVICES`` to devices,
  nothing when it does not — and one it does not carry is info.  Where no run is known (admission,
  audit), a tenant controls the sources of its namespace and gpuguard cannot read them: a warning
  (GPU containers, or pods that can land on GPU nodes; info without facts).
* **a mount under ``/var/run/nvidia-container-devices``**, where the runtime reads device requests
  from mounts; **CDI annotations** on the pod (``cdi.k8s.io/…``, ``nvidia.cdi.k8s.io…``);
* **``hostPath`` volumes of device nodes** (``/dev/nvidia*``, ``/dev/dri``), also as a ``subPath`` of
  a mount of ``/dev`` (a ``subPathExpr`` there is reported too);
* **privileged containers** get every device node of the host: an error in a pod that uses GPUs,
  a warning in one that does not but can land on GPU nodes (info without facts).  A GPU pod that
  requests every GPU of each node it can land on (cluster facts), or without known nodes 8 or more
  (a whole HGX/DGX server), gets info: it sees nothing it was not allocated, unless its nodes have
  more GPUs.  So does one whose GPU count is still a placeholder (``"<number_of_gpus>"``, an input
  error of its own): what it sees beyond its allocation is known once the count is filled in.

Node configuration that closes a path (rule options): ``envvarWhenUnprivileged: false`` when the
nodes' NVIDIA Container Toolkit sets ``accept-nvidia-visible-devices-envvar-when-unprivileged =
false`` (the NVIDIA variable then counts only in privileged or ``SYS_ADMIN`` containers), and
``nvidiaDefaultRuntime: false`` when the NVIDIA runtime is not the nodes' default runtime (GPU
Operator v25.10 and later with CDI): the NVIDIA variable then counts only in pods whose
``runtimeClassName`` runs it.

GPU infrastructure (the GPU Operator's operands, device plugins, DRA drivers, DCGM exporter) sees
every GPU by design.  In the namespaces of the option ``infrastructureNamespaces`` every finding is
kept as **info**.  An object that names no namespace (a chart's manifests, the GPU Operator's
``assets/``) is infrastructure when it mounts kubelet directories only node agents use
(device-plugins, plugins_registry, pod-resources), when its images are all GPU infrastructure
images (policies.signals: operands, device plugins, AKS's driver installer), when it is a GPU
monitor (every container that sets ``NVIDIA_VISIBLE_DEVICES`` asks the NVIDIA runtime for the
``utility`` driver capability alone: "required for using nvidia-smi and NVML", not ``compute``,
"required for CUDA and OpenCL applications", NVIDIA Container Toolkit, Specialized Configurations
with Docker, Driver Capabilities; none privileged or mounting device nodes) or a privileged container
asks for the MIG monitor capability (``NVIDIA_MIG_MONITOR_DEVICES=all``, which node agents request), or a container
requests the Intel GPU plugin's monitoring resource (``gpu.intel.com/monitoring``, ``i915_monitoring``,
``xe_monitoring``: every Intel GPU of the node, for monitoring), or when it is a GPU
Operator operand by image and shape (policies.operands:
infrastructure images, or the operator's ``FILLED BY THE OPERATOR`` placeholder, and pods that
select nodes by ``nvidia.com/gpu.deploy.<operand>``); anywhere else, none of these is an exemption
a tenant could claim by copying it.  In any other namespace only an operand DaemonSet that the GPU
Operator's ClusterPolicy controls is infrastructure (a copied owner reference names no existing
ClusterPolicy, so the garbage collector deletes the copy, and the Pods it creates are judged as
before); an object that merely looks like an operand keeps its findings, which say so and name the
namespace to declare.

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
from collections.abc import Generator, Iterator, Mapping
from typing import Any

from policies.applicability import Applies, Profile
from policies.dra.objects import dns_label_ok
from policies.images import lookup_archs
from policies.operands import operand
from policies.placeholders import requests_by_placeholder
from policies.podresources import container_requests
from policies.podspec import ContainerRef
from policies.resources import INTEL_MONITORING_RESOURCES, is_plugin_share_resource
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import uses_gpu
from policies.shapes import as_dict, as_list, text
from policies.signals import (
    NVIDIA_DEVICE_ENV,
    Vendor,
    cdi_annotation_grants,
    device_env,
    env_from_may_set,
    exposes_devices,
    holds_device_nodes,
    image_default,
    infrastructure_dir,
    is_cdi_annotation,
    is_device_host_path,
    is_device_list_mount,
    is_infrastructure_image,
    kai_share_container,
    mounted_device_path,
    runai_share_containers,
    scheduler_allocated,
)
from policies.types import RelPath, Severity, Violation

ID = "gpu-device-access-bypass"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "partly"
NEEDS_SCHEDULING: bool = False


def _applies(profile: Profile) -> bool:
    """Every finding below comes from a device variable, an envFrom source, an image, a mount, a
    CDI annotation, a device hostPath or a privileged container (policies.applicability)."""
    t = profile.template
    return t.device_access


APPLIES: Applies = _applies
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "A container gets GPU access that bypasses the device plugin's allocation."
REMEDIATION = (
    "Request GPUs through resources.limits (or DRA claims); do not set NVIDIA_VISIBLE_DEVICES (or AMD_VISIBLE_DEVICES) "
    "yourself, set it to void in containers without GPUs whose image enables all GPUs, and remove device hostPaths, "
    "CDI annotations and privileged mode."
)
DEFAULT_INFRASTRUCTURE_NAMESPACES = (
    "gpu-operator", "nvidia-gpu-operator", "nvidia-device-plugin", "nvidia-dra-driver-gpu"
)


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        return ["expected a list of namespace names"]
    return []


OPTIONS: tuple[Option, ...] = (
    Option("envvarWhenUnprivileged", (bool,), True,
           "The nodes' NVIDIA Container Toolkit honours NVIDIA_VISIBLE_DEVICES in unprivileged containers "
           "(accept-nvidia-visible-devices-envvar-when-unprivileged, true by default); false: only privileged "
           "and SYS_ADMIN containers are judged on it."),
    Option("nvidiaDefaultRuntime", (bool,), True,
           "The NVIDIA runtime is the nodes' default runtime (the toolkit installer's default); false (GPU Operator "
           "v25.10+ with CDI): NVIDIA_VISIBLE_DEVICES counts only in pods whose runtimeClassName runs it."),
    Option("infrastructureNamespaces", (list,), list(DEFAULT_INFRASTRUCTURE_NAMESPACES),
           "Namespaces where GPU infrastructure (pods that mount kubelet device-plugin, plugin-registry or "
           "pod-resources directories) is reported as info. Trusted by name: leave it empty where tenants "
           "may create namespaces, and exempt infrastructure by namespace label instead.", check=_names),
)


def check(ctx: RuleContext) -> Iterator[Violation]:
    infrastructure, resembles = _infrastructure(ctx)
    for v in _violations(ctx):
        if infrastructure is not None:
            yield dataclasses.replace(v, message=f"{v.message} ({infrastructure})", severity=Severity.INFO)
        elif resembles is not None:
            yield dataclasses.replace(v, message=f"{v.message} ({resembles})")
        else:
            yield v


_BY_DESIGN = "GPU infrastructure, which sees every GPU by design"


def _infrastructure(ctx: RuleContext) -> tuple[str | None, str | None]:
    """(Why the pod is GPU infrastructure, which sees every GPU by design, or None; what it resembles
    without being taken for it, or None).

    A namespace that is no DNS label (``FILLED BY THE OPERATOR`` in the GPU Operator's assets) is a
    placeholder, so as unknown as none; the API server never sends one.  A GPU Operator operand is
    recognised by its images and shape (policies.operands); in a real namespace only a DaemonSet the
    operator's ClusterPolicy controls, except in a run of manifests (lint), where the images and
    mounts decide as they do without a namespace."""
    namespace = ctx.object.namespace
    if isinstance(namespace, str) and dns_label_ok(namespace):
        if namespace in ctx.options["infrastructureNamespaces"]:
            return f"namespace {namespace!r} holds GPU infrastructure, which sees every GPU by design", None
        found = operand(ctx.object.kind, ctx.object.cluster_policy_owned, ctx.pod, unrendered=False)
        if found is not None and found.owned:
            return f"{found.what}, which its ClusterPolicy controls: {_BY_DESIGN}", None
        if ctx.inputs.of_run:
            # Manifests linted by whoever keeps them (NVIDIA's standalone MIG and vGPU managers deploy
            # into `default`): what the pod is decides.  At admission a tenant could copy the images
            # into its own namespace, so there only the namespace or a ClusterPolicy is trusted.
            why = _unnamed_infrastructure(ctx)
            if why is not None:
                return f"{why}; at admission only infrastructureNamespaces or a ClusterPolicy make it so", None
        if found is None:
            return None, None
        return None, (
            f"it looks like {found.what}, but no ClusterPolicy controls it: if the GPU Operator runs in namespace "
            f"{namespace!r}, list it in infrastructureNamespaces"
        )
    return _unnamed_infrastructure(ctx), None


def _unnamed_infrastructure(ctx: RuleContext) -> str | None:
    """Why a pod of an object without a (real) namespace is GPU infrastructure, or None."""
    if ctx.pod.shape == "component":
        return None
    found = operand(ctx.object.kind, ctx.object.cluster_policy_owned, ctx.pod, unrendered=True)
    if found is not None:
        return f"{found.what}: {_BY_DESIGN}"
    for path in _host_paths(ctx):
        if (directory := infrastructure_dir(path)) is not None:
            return f"the pod mounts {directory}: GPU infrastructure, which sees every GPU by design"
    monitor = _monitor_only(ctx) or _mig_monitor(ctx) or _intel_monitor(ctx)
    if monitor is not None:
        return monitor
    images = [c.container.get("image") for c in ctx.pod.containers]
    if images and all(is_infrastructure_image(i) for i in images):
        return ("its images are GPU infrastructure (GPU Operator operands, device plugins, driver installers), "
                "which sees every GPU by design")
    return None


def _monitor_only(ctx: RuleContext) -> str | None:
    """Why the pod is a GPU monitor, or None: each container that sets NVIDIA_VISIBLE_DEVICES itself asks
    for the ``utility`` driver capability only (NVML, nvidia-smi: no CUDA library), and no container is
    privileged or mounts device nodes (raw device access needs no library from the runtime)."""
    if any(is_device_host_path(p) for p in _host_paths(ctx)):
        return None
    named = False
    for c in ctx.pod.containers:
        if as_dict(c.container.get("securityContext")).get("privileged") is True:
            return None
        env = _literal_env(c)
        if env.get(NVIDIA_DEVICE_ENV) in (None, "", "void", "none"):
            continue
        capabilities = env.get("NVIDIA_DRIVER_CAPABILITIES")
        if not isinstance(capabilities, str) or {p.strip() for p in capabilities.split(",") if p.strip()} != {
            "utility"
        }:
            return None
        named = True
    if not named:
        return None
    return ("NVIDIA_DRIVER_CAPABILITIES=utility gives it NVML and nvidia-smi, no CUDA: a GPU monitor, which sees "
            "every GPU by design")


def _mig_monitor(ctx: RuleContext) -> str | None:
    """Why the pod is a GPU monitoring agent, or None: a privileged container asks the NVIDIA runtime for
    the MIG monitor capability (``NVIDIA_MIG_MONITOR_DEVICES=all``, which the runtime grants to privileged
    containers only: NVIDIA/nvidia-container-toolkit's TestMigCapsValidate, "errors when requested in a
    non-privileged container"), as node agents that watch every MIG device do (the device plugin, GFD,
    DCGM exporter, Kepler).  The toolkit counts a container as privileged when CAP_SYS_ADMIN is in its
    bounding set (internal/config/image/privileged.go, IsPrivileged), as ``privileged: true`` and an
    added ``SYS_ADMIN`` both put it there."""
    for c in ctx.pod.containers:
        if _literal_env(c).get("NVIDIA_MIG_MONITOR_DEVICES") == "all" and _privileged(c):
            return (f"container {c.name!r} asks for the MIG monitor capability (NVIDIA_MIG_MONITOR_DEVICES=all, "
                    "privileged): a GPU monitoring agent, which sees every GPU by design")
    return None


def _intel_monitor(ctx: RuleContext) -> str | None:
    """Why the pod is a GPU monitoring agent, or None: a container requests the Intel GPU plugin's
    monitoring resource, which the plugin answers with every Intel GPU of the node so that the
    container can monitor them (policies.resources.INTEL_MONITORING_RESOURCES)."""
    for c in ctx.pod.containers:
        for name in (*c.resource_map("limits"), *c.resource_map("requests")):
            if isinstance(name, str) and name in INTEL_MONITORING_RESOURCES:
                return (f"container {c.name!r} requests {name}, which Intel's GPU plugin answers with every Intel "
                        "GPU of the node for monitoring: a GPU monitoring agent, which sees every GPU by design")
    return None


def _literal_env(c: ContainerRef) -> dict[str, Any]:
    """The container's ``env`` as name → value (None where the value comes from ``valueFrom``); entries
    whose name is no string (the API server refuses them) are left out."""
    return {
        name: e.get("value")
        for e in as_list(c.container.get("env"))
        if isinstance(e, dict) and isinstance(name := e.get("name"), str)
    }


def _host_paths(ctx: RuleContext) -> Iterator[str]:
    for vol in as_list(ctx.pod.spec.get("volumes")):
        path = as_dict(as_dict(vol).get("hostPath")).get("path")
        if isinstance(path, str):
            yield path


class _Reach:
    """Whether the pod can land on a node with GPUs, computed once: True, False or None (unknown:
    no facts, or a component whose pod an operator builds)."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self._value: bool | str | None = "unset"

    def get(self) -> bool | None:
        if self._value == "unset":
            self._value = _gpu_nodes_reachable(self.ctx)
        return self._value  # type: ignore[return-value]

    def grade(self, certain: Severity, uncertain: Severity) -> Severity | None:
        """``certain`` when GPU nodes admit the pod, ``uncertain`` when unknown, None when none do."""
        reach = self.get()
        return None if reach is False else certain if reach else uncertain


def _gpu_nodes_reachable(ctx: RuleContext) -> bool | None:
    if not ctx.has_facts or not ctx.pod.scheduling_known:
        return None
    for verdict in ctx.verdicts():
        rep = verdict.group.representative
        if not (verdict.selector_ok and verdict.taints_ok and verdict.schedulable):
            continue
        if rep.may_offer or rep.dra_served or any(ctx.is_gpu(n) and q > 0 for n, q in rep.allocatable.items()):
            return True
    return False


def _runtime_runs_nvidia(ctx: RuleContext) -> bool:
    """Whether the NVIDIA runtime runs this pod's containers (options and runtimeClassName)."""
    if ctx.options["nvidiaDefaultRuntime"]:
        return True
    name = ctx.pod.spec.get("runtimeClassName")
    if not isinstance(name, str):
        return False
    rc = ctx.facts.runtime_classes.get(name)
    handler = rc.handler if rc is not None else name
    return handler.startswith("nvidia")


def _privileged(c: ContainerRef) -> bool:
    security = as_dict(c.container.get("securityContext"))
    if security.get("privileged") is True:
        return True
    adds = as_list(as_dict(security.get("capabilities")).get("add"))
    return any(isinstance(a, str) and a.upper().removeprefix("CAP_") == "SYS_ADMIN" for a in adds)


def _honoured(ctx: RuleContext, c: ContainerRef, vendor: Vendor) -> bool:
    """Whether the runtime acts on a device variable of ``vendor`` in this container."""
    if vendor != "nvidia":
        return True  # the AMD runtime has no such switches (policies.signals)
    if not _runtime_runs_nvidia(ctx):
        return False
    return bool(ctx.options["envvarWhenUnprivileged"]) or _privileged(c)


def _requests_devices(ctx: RuleContext, c: ContainerRef) -> bool:
    """Whether the container asks for devices: GPUs, DRA claims, a GPU share whose own device plugin
    allocates the GPU (Volcano's, Alibaba's), or a GPU whose quantity is an unrendered placeholder
    (an input error; once rendered it asks for GPUs)."""
    return (uses_gpu(ctx, c) or bool(as_list(c.resources.get("claims")))
            or requests_by_placeholder(c.resources, ctx.is_gpu)
            or bool(container_requests(c, is_plugin_share_resource)))


def _violations(ctx: RuleContext) -> Iterator[Violation]:
    reach = _Reach(ctx)
    component = ctx.pod.shape == "component"
    shared = kai_share_container(ctx.pod.spec, ctx.pod.annotations) if not component else None
    runai = runai_share_containers(ctx.pod.spec, ctx.pod.annotations) if not component else frozenset()
    for c in ctx.pod.containers:
        share = ((shared is not None and c.name == shared) or c.name in runai) and c.kind != "ephemeralContainer"
        with_gpus = share or _requests_devices(ctx, c)
        set_by_env = yield from _env_violations(ctx, c, with_gpus, share)
        if NVIDIA_DEVICE_ENV not in set_by_env:
            yield from _env_from_violations(ctx, c, with_gpus, reach)
            if not with_gpus and c.path not in ctx.pod.owner_supplied:
                yield from _image_violations(ctx, c, reach)
        yield from _mount_violations(ctx, c)
    yield from _annotation_violations(ctx)
    yield from _volume_violations(ctx)
    yield from _privileged_violations(ctx, reach, shared is not None)


def _env_violations(
    ctx: RuleContext, c: ContainerRef, with_gpus: bool, share: bool = False
) -> Generator[Violation, None, frozenset[str]]:
    """Findings on device variables of ``env``; returns the device variables the env sets (the last
    entry of a name is the one the kubelet keeps, and env overrides envFrom and the image).  A KAI
    GPU share's container takes NVIDIA_VISIBLE_DEVICES from the ConfigMap KAI fills: that is its
    allocation (policies.signals)."""
    last: dict[str, int] = {}
    env = as_list(c.container.get("env"))
    for i, var in enumerate(env):
        if isinstance(var, dict) and device_env(var.get("name")) is not None:
            last[var["name"]] = i
    for name, i in last.items():
        vendor = device_env(name)
        assert vendor is not None
        if not _honoured(ctx, c, vendor):
            continue
        var = env[i]
        value = var.get("value")
        path = (*c.path, "env", i)
        if "valueFrom" in var and value is None:
            from_config_map = isinstance(as_dict(var["valueFrom"]).get("configMapKeyRef"), dict)
            if share and name == NVIDIA_DEVICE_ENV and from_config_map:
                continue
            allocator = scheduler_allocated(var, ctx.pod.spec)
            if allocator is not None:
                yield Violation(
                    message=(
                        f"container {c.name!r} takes {name} from the annotation the {allocator} scheduler sets when it "
                        "binds the pod: the GPUs it allocates, not the device plugin's"
                    ),
                    path=path,
                    severity=Severity.INFO,
                )
                continue
            shown = "a value from valueFrom, which gpuguard cannot see"
        else:
            shown = repr(text("" if value is None else str(value), 60))
            if not exposes_devices("" if value is None else str(value)):
                if with_gpus and name == NVIDIA_DEVICE_ENV:
                    yield Violation(
                        message=(
                            f"container {c.name!r} requests GPUs but sets {name} to {shown}, which hides them: "
                            f"remove {name} and let the device plugin set it"
                        ),
                        path=path,
                        severity=Severity.WARNING,
                    )
                continue
        if with_gpus:
            message = (
                f"container {c.name!r} sets {name} to {shown}; its own value comes after the device plugin's and wins, "
                "so it gets the GPUs it names, not the ones allocated to it: remove it"
            )
        else:
            message = (
                f"container {c.name!r} requests no GPU but sets {name} to {shown}; the runtime then exposes "
                f"GPUs that the device plugin did not allocate: request GPUs in resources.limits or remove {name}"
            )
        yield Violation(message=message, path=path, scope=_scope(value))
    return frozenset(last)


def _scope(value: object) -> int:
    """How many devices a variable's value reaches: 2 for all of them (``all`` anywhere in the list,
    or a value gpuguard cannot see), 1 for a list of devices."""
    if not isinstance(value, str) or "all" in (part.strip().lower() for part in value.split(",")):
        return 2
    return 1


def _env_from_violations(ctx: RuleContext, c: ContainerRef, with_gpus: bool, reach: _Reach) -> Iterator[Violation]:
    for i, source in enumerate(as_list(c.container.get("envFrom"))):
        if not isinstance(source, dict):
            continue
        prefix = source.get("prefix")
        if not env_from_may_set(prefix):
            continue
        for kind, ref in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if not isinstance(source.get(ref), dict):
                continue
            if not with_gpus and not _honoured(ctx, c, "nvidia"):
                continue
            name = text(as_dict(source[ref]).get("name"), 63)
            keyed = f" with prefix {text(prefix, 40)!r}" if isinstance(prefix, str) and prefix else ""
            known = ctx.inputs.env_source(tuple(c.path), i)
            if known is not None and known[2] == "read":
                found = _read_source_violation(c, i, kind, name, keyed, known[3], with_gpus, reach)
                if found is not None:
                    yield found
                continue
            if known is not None:  # a run of manifests that does not carry this source
                yield Violation(
                    message=(
                        f"container {c.name!r} takes its environment from {kind} {name!r}{keyed}, which is not among "
                        f"the inputs: if it sets {NVIDIA_DEVICE_ENV}, that value overrides the device plugin's"
                    ),
                    path=(*c.path, "envFrom", i),
                    severity=Severity.INFO,
                    remediation=(f"Lint the {kind} with the workload, or set {NVIDIA_DEVICE_ENV} in env so that the "
                                 "source cannot override it."),
                )
                continue
            severity = Severity.WARNING if with_gpus else reach.grade(Severity.WARNING, Severity.INFO)
            if severity is None:
                continue
            yield Violation(
                message=(
                    f"container {c.name!r} takes its environment from {kind} {name!r}{keyed}, which may set "
                    f"{NVIDIA_DEVICE_ENV} (gpuguard cannot read it); a value there would expose GPUs the device "
                    f"plugin did not allocate: set {NVIDIA_DEVICE_ENV} in env"
                    + ("" if with_gpus else " to void")
                    + " so that the source cannot override it"
                ),
                path=(*c.path, "envFrom", i),
                severity=severity,
            )


def _read_source_violation(
    c: ContainerRef, i: int, kind: str, name: str, keyed: str, value: str | None, with_gpus: bool, reach: _Reach
) -> Violation | None:
    """An envFrom source the run carries: only a value it really gives NVIDIA_VISIBLE_DEVICES counts."""
    if value is None or not exposes_devices(value):
        return None
    severity = Severity.ERROR if with_gpus else reach.grade(Severity.ERROR, Severity.WARNING)
    if severity is None:
        return None
    shown = text(value, 40)
    message = (
        f"container {c.name!r} takes {NVIDIA_DEVICE_ENV}={shown} from {kind} {name!r}{keyed}; "
        + ("that value comes after the device plugin's and wins, so it gets the GPUs it names, not the ones "
           "allocated to it" if with_gpus else "the runtime then exposes GPUs that the device plugin did not allocate")
        + f": remove the key from the {kind}"
    )
    return Violation(message=message, path=(*c.path, "envFrom", i), severity=severity)


def _image_violations(ctx: RuleContext, c: ContainerRef, reach: _Reach) -> Iterator[Violation]:
    if not _honoured(ctx, c, "nvidia"):
        return
    image = c.container.get("image")
    value, source, certain = _image_value(ctx, image)
    if value is None or not exposes_devices(value):
        return
    severity = reach.grade(Severity.ERROR if certain else Severity.WARNING, Severity.WARNING)
    if severity is None:
        return
    where = "" if reach.get() is None else " on the GPU nodes it can land on"
    yield Violation(
        message=(
            f"container {c.name!r} requests no GPU, but its image sets {NVIDIA_DEVICE_ENV}={text(value, 40)} "
            f"({source}), so it gets every GPU of the node{where}: set {NVIDIA_DEVICE_ENV} to void in its env"
        ),
        path=(*c.path, "image"),
        severity=severity,
    )


def _image_value(ctx: RuleContext, image: Any) -> tuple[str | None, str, bool]:
    """The image's NVIDIA_VISIBLE_DEVICES: (value or None, where that is known from, certain)."""
    if not isinstance(image, str):
        return None, "", False
    archs = lookup_archs(ctx.facts)
    for arch in archs:
        found = ctx.images.lookup(image, arch)
        if found is not None and found.config is not None:
            env: Mapping[str, str] = dict(found.config.env)
            if NVIDIA_DEVICE_ENV in env:
                return env[NVIDIA_DEVICE_ENV], f"image config, {found.config.source or 'registry'}", True
            if "CUDA_VERSION" in env and "NVIDIA_REQUIRE_CUDA" not in env:
                # A legacy CUDA image: the runtime defaults the variable to all (cuda_image.go IsLegacy).
                return "all", "a legacy CUDA image without NVIDIA_REQUIRE_CUDA, which the runtime treats as all", True
            return None, "", True
    known = image_default(image)
    if known is None:
        return None, "", False
    return "all", known.source, known.certain


def _mount_violations(ctx: RuleContext, c: ContainerRef) -> Iterator[Violation]:
    volumes = {
        v.get("name"): as_dict(v.get("hostPath")).get("path")
        for v in as_list(ctx.pod.spec.get("volumes"))
        if isinstance(v, dict) and isinstance(v.get("name"), str)
    }
    for i, mount in enumerate(as_list(c.container.get("volumeMounts"))):
        if not isinstance(mount, dict):
            continue
        path = (*c.path, "volumeMounts", i)
        if is_device_list_mount(mount.get("mountPath")):
            yield Violation(
                message=(
                    f"container {c.name!r} mounts a volume at {text(mount.get('mountPath'))}, where the NVIDIA runtime "
                    "reads device requests from mounts: remove it and request GPUs in resources.limits"
                ),
                path=(*path, "mountPath"),
            )
            continue
        name = mount.get("name")
        host = volumes.get(name) if isinstance(name, str) else None
        if not isinstance(host, str):
            continue
        device = mounted_device_path(host, mount.get("subPath"))
        if device is not None:
            yield Violation(
                message=(
                    f"container {c.name!r} mounts the host's {text(device)} (hostPath {text(host)} with subPath "
                    f"{text(mount.get('subPath'))}), bypassing the device plugin: request GPUs in resources.limits"
                ),
                path=(*path, "subPath"),
            )
        elif mount.get("subPathExpr") and holds_device_nodes(host):
            yield Violation(
                message=(
                    f"container {c.name!r} mounts the host's {text(host)} with a subPathExpr, which may reach GPU "
                    "device nodes chosen at run time: use a fixed subPath or request GPUs in resources.limits"
                ),
                path=(*path, "subPathExpr"),
            )


def _annotation_violations(ctx: RuleContext) -> Iterator[Violation]:
    if ctx.pod.shape == "component":
        return
    for key, value in as_dict(ctx.pod.metadata.get("annotations")).items():
        if is_cdi_annotation(key) and cdi_annotation_grants(key, value):
            yield Violation(
                message=(
                    f"the pod annotation {text(key, 80)!r} asks the container runtime to inject CDI devices, which "
                    "the device plugin did not allocate: remove it and request GPUs in resources.limits"
                ),
                path=("annotations", key),
                anchor="metadata",
            )


def _volume_violations(ctx: RuleContext) -> Iterator[Violation]:
    if ctx.pod.shape == "component":
        return
    for i, vol in enumerate(as_list(ctx.pod.spec.get("volumes"))):
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


# The largest GPU servers in common use hold 8 GPUs: NVIDIA's HGX H100/H200/B200 systems
# (mlcommons/inference_results_v4.1 closed/NVIDIA/systems/H200-SXM-141GBx8*.json:
# "accelerators_per_node": 8) and, among EC2's GPU instance types, no more than 8
# (policies/data/aws_gpu_instance_types.json: p4de, p5, p5e, p5en, p6-b200, p6-b300), so a pod asking
# for that many usually holds a whole node; a larger one (16-GPU machines exist) is why it stays info.
WHOLE_SERVER_GPUS = 8


def _holds_every_gpu(ctx: RuleContext) -> bool | None:
    """Whether the pod's GPU requests cover every GPU resource of each GPU node its selectors admit
    (then privileged mode exposes nothing it was not allocated); None when no such node is known."""
    requests = ctx.gpu_requests()
    if not requests or not ctx.has_facts or not ctx.pod.scheduling_known:
        return None
    verdicts = []
    for verdict in ctx.verdicts():
        rep = verdict.group.representative
        gpus = {n: q for n, q in rep.allocatable.items() if ctx.is_gpu(n) and q > 0}
        # Taints aside: a pod that does not tolerate them yet is meant for these nodes all the same.
        # Nodes that offer none of the GPU resources it requests (NVIDIA nodes, for a pod asking for
        # amd.com/gpu) can never run it, so what they hold says nothing of what it sees.
        if not (verdict.selector_ok and verdict.schedulable) or not gpus.keys() & requests.keys():
            continue
        verdicts.append(not rep.dra_served and all(requests.get(n, 0) >= q for n, q in gpus.items()))
    return all(verdicts) if verdicts else None


def _privileged_with_gpus(ctx: RuleContext, c: ContainerRef, path: RelPath) -> Violation:
    if any(requests_by_placeholder(other.resources, ctx.is_gpu) for other in ctx.pod.containers):
        # How many GPUs the pod holds is decided when it is rendered (the placeholder is the input
        # error); a whole-node tool such as a bug reporter is written with the node's GPU count there.
        return Violation(
            message=(
                f"container {c.name!r} is privileged and sees every GPU of its node; the pod's GPU count is still a "
                "placeholder, so whether it sees GPUs it was not allocated is known once the count is filled in "
                "(every GPU of the node: nothing)"
            ),
            path=path,
            severity=Severity.INFO,
        )
    holds = _holds_every_gpu(ctx)
    most = max((int(q) for q in ctx.gpu_requests().values()), default=0)
    if holds:
        return Violation(
            message=(
                f"container {c.name!r} is privileged and sees every GPU of its node, but the pod requests all of "
                "them on every GPU node it can land on: nothing it was not allocated"
            ),
            path=path,
            severity=Severity.INFO,
        )
    if holds is None and most >= WHOLE_SERVER_GPUS:
        return Violation(
            message=(
                f"container {c.name!r} is privileged and sees every GPU of its node; the pod requests {most}, all "
                f"of an {WHOLE_SERVER_GPUS}-GPU server, but on a node with more it sees GPUs it was not allocated "
                "(lint with --cluster to know)"
            ),
            path=path,
            severity=Severity.INFO,
        )
    return Violation(
        message=(
            f"container {c.name!r} is privileged in a pod that uses GPUs; privileged containers see every "
            f"GPU of the node, not only the allocated ones: remove securityContext.privileged"
        ),
        path=path,
    )


def _privileged_violations(ctx: RuleContext, reach: _Reach, shared: bool) -> Iterator[Violation]:
    uses_gpus = shared or bool(ctx.gpu_requests()) or any(_requests_devices(ctx, c) for c in ctx.pod.containers)
    for c in ctx.pod.containers:
        security = c.container.get("securityContext")
        if not (isinstance(security, dict) and security.get("privileged") is True):
            continue
        path = (*c.path, "securityContext", "privileged")
        if uses_gpus:
            yield _privileged_with_gpus(ctx, c, path)
            continue
        severity = reach.grade(Severity.WARNING, Severity.INFO)
        if severity is None:
            continue
        where = "the GPU nodes it can land on" if reach.get() else "a GPU node, if it lands on one"
        yield Violation(
            message=(
                f"container {c.name!r} is privileged, so it sees every GPU of {where}, although it requests none: "
                "keep it off GPU nodes (a nodeSelector or taint) or drop privileged mode"
            ),
            path=path,
            severity=severity,
        )
