"""Helpers for rule modules: which containers run, which use GPUs, and the facts-rule preamble.

What "uses a GPU" means, once for every rule:

* ``uses_gpu(ctx, c)``: the container requests any GPU resource with a positive quantity, share
  resources included (HAMi's ``nvidia.com/gpumem`` gives the container a slice of a GPU, so it
  runs CUDA, needs host memory and must not be handed devices by environment variables);
* ``gpu_devices(ctx, c)``: the GPU *devices* it requests (whole GPUs, MIG instances, shared
  replicas), share resources excluded, for rules that count devices (topology, /dev/shm).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from fractions import Fraction
from functools import wraps

from policies.memo import is_gpu_device
from policies.podresources import container_requests
from policies.podspec import ContainerRef
from policies.rule import RuleContext
from policies.scheduling import Diagnosis, GroupVerdict
from policies.types import Severity, Violation


def gpu_resources(ctx: RuleContext, c: ContainerRef) -> dict[str, Fraction]:
    """Every GPU resource the container requests (share resources included), by name."""
    return container_requests(c, ctx.is_gpu)


def uses_gpu(ctx: RuleContext, c: ContainerRef) -> bool:
    return bool(gpu_resources(ctx, c))


def gpu_devices(ctx: RuleContext, c: ContainerRef) -> dict[str, Fraction]:
    """The GPU devices (whole GPUs, MIG instances, shared replicas) a container requests, by resource."""
    return container_requests(c, is_gpu_device(ctx.is_gpu))


FactsCheck = Callable[[RuleContext, Diagnosis], Iterator[Violation]]


def _unknown_shape(verdict: GroupVerdict) -> str:
    rep = verdict.group.representative
    why = rep.pool.shape_note if rep.pool is not None else ""
    return f"{verdict.describe()}{f', whose GPU shape is unknown: {why}' if why else ''}"


def hedge(violation: Violation, hedged_by: tuple[GroupVerdict, ...]) -> Violation:
    """A finding that holds unless capacity of unknown GPU shape turns out to fit: a warning,
    naming that capacity, without a fix (which would change the pod for nodes it may never need)."""
    groups = "; ".join(_unknown_shape(v) for v in hedged_by)
    return dataclasses.replace(
        violation,
        message=f"{violation.message} — only {groups} might run it, and whether it can is not known "
        "in advance, so this is a warning",
        severity=Severity.WARNING,
        fix=(),
    )


def with_diagnosis(check: FactsCheck) -> Callable[[RuleContext], Iterator[Violation]]:
    """The facts-rule preamble: run ``check(ctx, diagnosis)`` only for GPU pods with cluster facts.

    When only capacity of unknown GPU shape could run the pod, the check runs against the
    diagnosis without that capacity and its findings become warnings that name it.
    """

    @wraps(check)
    def run(ctx: RuleContext) -> Iterator[Violation]:
        diagnosis = ctx.diagnosis()
        if diagnosis is None:
            return
        if diagnosis.strict is None:
            yield from check(ctx, diagnosis)
            return
        for violation in check(ctx, diagnosis.strict):
            yield hedge(violation, diagnosis.hedged_by)

    return run
