"""Memoisation: the typed per-snapshot keys, and the lazily computed analysis of one pod template.

Two levels, both invisible to rules:

* per evaluation, ``TemplateAnalysis`` computes a pod template's GPU requests, its scheduling
  verdicts and its diagnosis once, however many rules ask;
* per cluster-facts snapshot, ``ClusterFacts.memoised`` keeps the verdicts, diagnoses and rule
  results under the frozen keys below, so identical pods (a Deployment's replicas, one team's
  jobs) are analysed once per snapshot.  A key holds everything the memoised function reads;
  keys of different kinds never compare equal, so one kind cannot serve another's value.

The scheduler model (``policies.scheduling``) stays pure functions; only this module caches.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from policies.digest import digest
from policies.facts import ClusterFacts
from policies.podresources import extended_resource_names, pod_requests
from policies.podspec import PodTemplate
from policies.resources import is_gpu_share_resource
from policies.scheduling import Diagnosis, GroupVerdict, analyse, diagnose

ConstraintsKey = tuple[Hashable, ...]


@dataclass(frozen=True, slots=True)
class AnalysisKey:
    """``analyse`` depends on the fields of ``constraints_key`` and the snapshot."""

    constraints: ConstraintsKey


@dataclass(frozen=True, slots=True)
class EligibleNodesKey:
    """The nodes a pod's constraints let it run on (``policies.cuda.dra``): ``constraints_key`` without
    requests, and the snapshot."""

    constraints: ConstraintsKey


@dataclass(frozen=True, slots=True)
class DiagnosisKey:
    """``diagnose`` also depends on which names are GPUs: the config's predicate, by identity."""

    predicate: int
    constraints: ConstraintsKey


@dataclass(frozen=True, slots=True)
class RulePlanKey:
    """The rules a config runs, in order, with their settings: the config by identity (owner)."""

    config: int


@dataclass(frozen=True, slots=True)
class OldDriverLabelsKey:
    """gpu-cuda-driver-mismatch: whether some node has only the deprecated GFD driver labels (reads
    only the snapshot)."""


@dataclass(frozen=True, slots=True)
class EffectiveFactsKey:
    """policies.effective_facts: the snapshot with a config's declared pools and DRA capacity (the
    config by identity, checked as owner)."""

    config_id: int


@dataclass(frozen=True, slots=True)
class GpuNodeArchesKey:
    """The architectures of the GPU nodes a config's GPU predicate selects (the config by identity,
    checked as owner), for registry lookups."""

    config_id: int


@dataclass(frozen=True, slots=True)
class SnapshotProfileKey:
    """policies.applicability.snapshot_profile reads only the snapshot itself."""


@dataclass(frozen=True, slots=True)
class RuleResultsKey:
    """The rules' violations for one pod template under one config (identity, checked as owner):
    ``content`` is the digest of the template's ``TemplateInputs`` (policies.template_inputs.inputs_key,
    16 bytes however large they are), ``images`` what the image facts say of its images."""

    config: int
    content: bytes
    images: Hashable = None


@dataclass(frozen=True, slots=True)
class DraCapacityKey:
    """The snapshot with DRA-served extended resources in the nodes' allocatable (one per snapshot)."""


@dataclass(frozen=True, slots=True)
class DraVerdictKey:
    """Whether claims (a digest of their specs and of the input's DeviceClasses) can be allocated on
    the nodes a pod's constraints admit (a digest of those constraints; empty: every node)."""

    claims: bytes
    constraints: bytes


@dataclass(frozen=True, slots=True)
class ImageUsesKey:
    """The images a template's rules look up (policies.image_uses.image_uses): the config by identity
    (checked as owner) and the digest of the template's ``TemplateInputs``."""

    config: int
    content: bytes


@dataclass(frozen=True, slots=True)
class CudaJudgementKey:
    """gpu-cuda-driver-mismatch's judgement of one container's needs (per architecture) on its
    candidate node verdicts: identities of objects the memoised value holds."""

    needs: tuple[tuple[str, int], ...]
    candidates: tuple[int, ...]




def constraints_key(
    pod: PodTemplate, requests: Mapping[str, Fraction], extended_tolerations: bool = False
) -> ConstraintsKey:
    """Everything ``analyse`` reads from a pod, as a hashable key (a digest of user data).

    ``extended_tolerations``: the cluster runs ExtendedResourceToleration, so the tolerations
    also depend on every extended resource the pod names.
    """
    spec = pod.spec
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    fields = (spec.get("nodeSelector"), node_affinity, spec.get("tolerations"), spec.get("runtimeClassName"),
              spec.get("nodeName"))
    content = digest(*fields)
    return (
        content if content is not None else object(),
        tuple(sorted(requests.items())),
        extended_resource_names(pod) if extended_tolerations else (),
    )


@functools.lru_cache(maxsize=64)
def is_gpu_device(is_gpu: Callable[[str], bool]) -> Callable[[str], bool]:
    """GPU resources that count devices (whole GPUs, MIG instances, shared replicas), not quotas.

    One predicate per ``is_gpu`` (cached), so answers kept per predicate are found again."""
    return lambda name: is_gpu(name) and not is_gpu_share_resource(name)


class TemplateAnalysis:
    """The scheduling view of one pod template in one evaluation, each part computed at most once."""

    __slots__ = ("_constraints", "_diagnosis", "_requests", "_verdicts", "facts", "is_gpu", "pod")

    def __init__(self, pod: PodTemplate, facts: ClusterFacts, is_gpu: Callable[[str], bool]) -> None:
        self.pod = pod
        self.facts = facts
        self.is_gpu = is_gpu
        self._requests: dict[str, Fraction] | None = None
        self._constraints: ConstraintsKey | None = None
        self._verdicts: list[GroupVerdict] | None = None
        self._diagnosis: Diagnosis | None = None

    def gpu_requests(self) -> dict[str, Fraction]:
        """Effective pod requests of GPU devices (quota-like share resources excluded)."""
        if self._requests is None:
            self._requests = pod_requests(self.pod, is_gpu_device(self.is_gpu))
        return self._requests

    def _constraints_key(self) -> ConstraintsKey:
        if self._constraints is None:
            self._constraints = constraints_key(
                self.pod, self.gpu_requests(), self.facts.tolerates_extended_resources
            )
        return self._constraints

    def verdicts(self) -> list[GroupVerdict]:
        """One verdict per node group (read-only: shared by every pod with the same constraints)."""
        if self._verdicts is None:
            requests = self.gpu_requests()
            self._verdicts = self.facts.memoised(
                AnalysisKey(self._constraints_key()), lambda: analyse(self.pod, requests, self.facts)
            )
        return self._verdicts

    def diagnosis(self) -> Diagnosis | None:
        """The shared scheduling diagnosis of a GPU pod; None without GPU requests or nodes."""
        if self._diagnosis is None:
            requests = self.gpu_requests()
            if not requests or not self.facts.groups:
                return None
            is_gpu = self.is_gpu
            self._diagnosis = self.facts.memoised(
                DiagnosisKey(id(is_gpu), self._constraints_key()),
                lambda: diagnose(self.pod, requests, self.facts, is_gpu, self.verdicts()),
                owner=is_gpu,
            )
        return self._diagnosis
