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
from policies.podspec import PodTemplate
from policies.shapes import as_dict, as_list
from policies.signals import DEVICE_ENV_NAMES, is_device_host_path


@dataclass(frozen=True, slots=True)
class TemplateProfile:
    """Features of one pod template (any container kind, ephemeral ones included)."""

    # ``spec.resourceClaims`` or some container's ``resources.claims`` is a non-empty list.
    dra_claims: bool
    # Some container's ``env`` list has an entry named in policies.signals.DEVICE_ENV_NAMES.
    device_env: bool
    # Some ``spec.volumes`` entry mounts a GPU device node by hostPath (policies.signals).
    device_host_path: bool
    # Some container sets ``securityContext.privileged: true``.
    privileged: bool


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


def template_profile(pod: PodTemplate) -> TemplateProfile:
    dra_claims = _nonempty_list(pod.spec.get("resourceClaims"))
    device_env = privileged = False
    for c in pod.containers:
        if not dra_claims and _nonempty_list(c.resources.get("claims")):
            dra_claims = True
        if not device_env:
            device_env = any(
                isinstance(var, dict) and var.get("name") in DEVICE_ENV_NAMES for var in as_list(c.container.get("env"))
            )
        if not privileged:
            security = c.container.get("securityContext")
            privileged = isinstance(security, dict) and security.get("privileged") is True
    device_host_path = False
    for vol in as_list(pod.spec.get("volumes")):
        path = as_dict(as_dict(vol).get("hostPath")).get("path")
        if isinstance(path, str) and is_device_host_path(path):
            device_host_path = True
            break
    return TemplateProfile(dra_claims, device_env, device_host_path, privileged)


def snapshot_profile(facts: ClusterFacts) -> SnapshotProfile:
    return SnapshotProfile(dra_conflicts=any(n.dra_conflicts for n in facts.nodes))


def never(profile: Profile) -> bool:
    """For rules whose ``check`` judges no pod template (the engine or ``check_object`` reports them)."""
    return False


def has_dra_claims(profile: Profile) -> bool:
    return profile.template.dra_claims
