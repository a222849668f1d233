"""Effective GPU requests of a pod template.

The scheduler's effective request per resource is max(sum over app containers and restartable
init containers, max over each plain init container plus the sidecars started before it)
(KEP-753, k8s.io/component-helpers resource.PodRequests), plus ``spec.overhead``, which the
RuntimeClass admission plugin copies from the pod's RuntimeClass (``PodRequests`` adds
``pod.Spec.Overhead``).  For extended resources requests equal limits, and Pods default missing
requests from limits, so we read requests and fall back to limits.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from policies.podspec import ContainerRef, PodTemplate
from policies.quantity import try_parse
from policies.resources import is_extended


def container_requests(c: ContainerRef, is_resource: Callable[[str], bool]) -> dict[str, Fraction]:
    """The positive requests (else limits) of the resources ``is_resource`` accepts, by name.

    Several rules ask for the same container and predicate in one evaluation: the answer is kept
    on the ContainerRef (a pure function of its resources and of the predicate), and each caller
    gets its own copy.
    """
    cached: dict[str, Fraction] | None = c.requests_cache.get(is_resource)
    if cached is None:
        cached = c.requests_cache[is_resource] = _container_requests(c, is_resource)
    return dict(cached)


def _container_requests(c: ContainerRef, is_resource: Callable[[str], bool]) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    limits = c.resource_map("limits")
    requests = c.resource_map("requests")
    for name in {*limits, *requests}:
        if not isinstance(name, str) or not is_resource(name):
            continue
        raw = requests.get(name, limits.get(name))
        q = try_parse(raw)
        if q is not None and q > 0:
            out[name] = q
    return out


def pod_requests(
    pod: PodTemplate, is_resource: Callable[[str], bool], *, overhead: bool = True
) -> dict[str, Fraction]:
    """``overhead=False``: without ``spec.overhead`` (a caller that applies pod-level resources first)."""
    total: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    sidecars: dict[str, Fraction] = {}
    for c in pod.containers:
        if c.kind == "ephemeralContainer":
            continue
        req = container_requests(c, is_resource)
        if c.kind == "initContainer" and not c.is_sidecar:
            for k, v in req.items():
                init_peak[k] = max(init_peak.get(k, Fraction(0)), v + sidecars.get(k, Fraction(0)))
            continue
        for k, v in req.items():
            # Not Fraction(0) + v: a Fraction sum costs microseconds, and most pods have one container.
            total[k] = total[k] + v if k in total else v
            if c.is_sidecar:
                sidecars[k] = sidecars[k] + v if k in sidecars else v
    for k, v in init_peak.items():
        if v > total.get(k, Fraction(0)):
            total[k] = v
    extra = pod.spec.get("overhead") if overhead and pod.shape != "component" else None
    if isinstance(extra, dict):
        for k, raw in extra.items():
            q = try_parse(raw) if isinstance(k, str) and is_resource(k) else None
            if q is not None and q > 0:
                total[k] = total.get(k, Fraction(0)) + q
    return total


def extended_resource_names(pod: PodTemplate) -> tuple[str, ...]:
    """Sorted extended resources the containers and init containers request (or limit: Pods
    default requests from limits), whatever the quantity — what ExtendedResourceToleration reads."""
    names: set[str] = set()
    for c in pod.containers:
        if c.kind == "ephemeralContainer":
            continue
        for which in ("requests", "limits"):
            names.update(n for n in c.resource_map(which) if isinstance(n, str) and is_extended(n))
    return tuple(sorted(names))
