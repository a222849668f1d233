"""Which rules can fire on a pod template at all, decided once per template before any rule runs.

Every rule declares ``APPLIES`` (policies.rule): ``None`` when it may fire on any GPU pod, else a
predicate over the ``Profile`` below.  A predicate must hold whenever the rule's ``check`` could
yield anything (it may hold more often): the engine skips a rule only where its predicate is
false, so a predicate that is too narrow would silently drop findings.  Each predicate is proven
against the rule's code in its own module's comment and by tests/policies/test_applicability.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from policies.facts import ClusterFacts
from policies.podresources import container_requests
from policies.podspec import PodTemplate
from policies.shapes import as_dict, as_list
from policies.signals import (
    device_env,
    env_from_may_set,
    holds_device_nodes,
    image_default,
    is_cdi_annotation,
    is_device_host_path,
    is_device_list_mount,
)


@dataclass(frozen=True, slots=True)
class TemplateProfile:
    """Features of one pod template (any container kind, ephemeral ones included)."""

    # ``spec.resourceClaims`` or some container's ``resources.claims`` is a non-empty list.
    dra_claims: bool
    # Some container's ``env`` list has an entry naming a device variable (policies.signals).
    device_env: bool
    # Some ``spec.volumes`` entry mounts a GPU device node by hostPath (policies.signals).
    device_host_path: bool
    # Some container sets ``securityContext.privileged: true``.
    privileged: bool
    # ``has_device_access``: any of the above, or an envFrom source, an image, a mount or a pod
    # annotation through which a container may reach devices (gpu-device-access-bypass).
    device_access: bool = False


@dataclass(frozen=True, slots=True)
class SnapshotProfile:
    """Features of the cluster facts a template is judged against."""

    # Some node advertises a resource through the device plugin while DRA serves the same GPUs.
    dra_conflicts: bool


@dataclass(frozen=True, slots=True)
class Profile:
    template: TemplateProfile
    snapshot: SnapshotProfile


Applies = Callable[[Profile], bool] | None


def _nonempty_list(value: object) -> bool:
    return isinstance(value, list) and bool(value)


def template_profile(pod: PodTemplate, is_gpu: Callable[[str], bool] | None = None) -> TemplateProfile:
    dra_claims = _nonempty_list(pod.spec.get("resourceClaims"))
    device_env_ = privileged = False
    for c in pod.containers:
        if not dra_claims and _nonempty_list(c.resources.get("claims")):
            dra_claims = True
        if not device_env_:
            env = as_list(c.container.get("env"))
            device_env_ = any(isinstance(var, dict) and device_env(var.get("name")) for var in env)
        if not privileged:
            security = c.container.get("securityContext")
            privileged = isinstance(security, dict) and security.get("privileged") is True
    device_host_path = any(
        isinstance(path := as_dict(as_dict(vol).get("hostPath")).get("path"), str) and is_device_host_path(path)
        for vol in as_list(pod.spec.get("volumes"))
    )
    access = device_env_ or device_host_path or privileged or has_device_access(pod, is_gpu)
    return TemplateProfile(dra_claims, device_env_, device_host_path, privileged, access)


def has_device_access(pod: PodTemplate, is_gpu: Callable[[str], bool] | None = None) -> bool:
    """Whether a container of ``pod`` may reach devices other than through its requests: a device
    variable, an envFrom source that may define one, an image that sets one, a mount where the
    runtime reads device requests, a hostPath that is or holds device nodes, a privileged
    container, or a CDI annotation (policies.signals; a superset of what
    gpu-device-access-bypass reports, and the engine's pre-filter for pods without GPUs).  With
    ``is_gpu``, the images of containers that request devices are not looked at: only a container
    without devices keeps its image's variable."""
    for key in as_dict(pod.metadata.get("annotations")):
        if is_cdi_annotation(key):
            return True
    node_dirs: set[str] = set()
    for vol in as_list(pod.spec.get("volumes")):
        path = as_dict(as_dict(vol).get("hostPath")).get("path")
        if isinstance(path, str):
            if is_device_host_path(path):
                return True
            name = as_dict(vol).get("name")
            if holds_device_nodes(path) and isinstance(name, str):
                node_dirs.add(name)
    for c in pod.containers:
        container = c.container
        for var in as_list(container.get("env")):
            if isinstance(var, dict) and device_env(var.get("name")):
                return True
        for source in as_list(container.get("envFrom")):
            if isinstance(source, dict) and env_from_may_set(source.get("prefix")):
                return True
        if image_default(container.get("image")) is not None and not (
            is_gpu is not None and (container_requests(c, is_gpu) or as_list(c.resources.get("claims")))
        ):
            return True
        for mount in as_list(container.get("volumeMounts")):
            if isinstance(mount, dict) and (
                is_device_list_mount(mount.get("mountPath"))
                or (
                    isinstance(mount.get("name"), str)
                    and mount["name"] in node_dirs
                    and bool(mount.get("subPath") or mount.get("subPathExpr"))
                )
            ):
                return True
        security = container.get("securityContext")
        if isinstance(security, dict) and security.get("privileged") is True:
            return True
    return False


def snapshot_profile(facts: ClusterFacts) -> SnapshotProfile:
    return SnapshotProfile(dra_conflicts=any(n.dra_conflicts for n in facts.nodes))


def never(profile: Profile) -> bool:
    """For rules whose ``check`` judges no pod template (the engine or ``check_object`` reports them)."""
    return False


def has_dra_claims(profile: Profile) -> bool:
    return profile.template.dra_claims
