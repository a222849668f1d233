"""Which pods to explain: Pending GPU pods the scheduler has tried (``PodScheduled=False``, or a
FailedScheduling event when the condition is missing) and scheduling-gated ones, in a namespace,
in all namespaces, or by name.

Names follow kubectl: ``NAME`` in the chosen namespace, or ``NAMESPACE/NAME``; with ``-A`` a bare
name matches that pod in every namespace.  A named pod that is not pending is said so, not dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from policies.pending.objects import PodInfo
from policies.pending.state import ClusterState
from policies.wording import noun, plural


@dataclass(frozen=True, slots=True)
class Scope:
    namespace: str | None  # None: all namespaces
    names: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.names:
            return noun(len(self.names), "pod") + " " + ", ".join(self.names)
        return "all namespaces" if self.namespace is None else f"namespace {self.namespace}"

    def event_namespace(self) -> str | None:
        """The one namespace every pod to explain lives in, if there is one (events are listed there)."""
        if self.namespace is None:
            return None
        spaces = {n.partition("/")[0] for n in self.names if "/" in n}
        if not spaces or spaces == {self.namespace}:
            return self.namespace
        return None


@dataclass(slots=True)
class Selection:
    pods: list[PodInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # named pods that are not pending, untried pods
    missing: list[str] = field(default_factory=list)  # named pods not in the input
    untried: int = 0  # unbound GPU pods in scope the scheduler has not tried yet


def tried(state: ClusterState, pod: PodInfo) -> bool:
    """The scheduler has looked at the pod: a gate holds it, PodScheduled=False, or it has events."""
    return pod.gated or pod.unschedulable or bool(state.events.for_pod(pod))


def _why_not_pending(pod: PodInfo) -> str | None:
    if pod.terminal:
        return f"has finished ({pod.phase})"
    if pod.bound:
        phase = f", phase {pod.phase}" if pod.phase else ""
        return f"is not pending: it is bound to node {pod.node_name}{phase}"
    if not pod.gpus:
        return "requests no GPUs (why-pending explains GPU pods; `kubectl describe pod` shows the scheduler's message)"
    return None


# The default scheduler's name, which API defaulting writes into spec.schedulerName (kubernetes.io
# docs, "Configure Multiple Schedulers", example pod2.yaml: `schedulerName: default-scheduler` is the
# explicit form of leaving it out; kubernetes/website content/en/examples/admin/sched/pod2.yaml).
DEFAULT_SCHEDULER = "default-scheduler"


def _other_schedulers(pods: list[PodInfo]) -> str | None:
    """A note when pods name another scheduler (Volcano, a second profile…), whose filters and
    messages may differ from kube-scheduler's, which the analysis models."""
    names: dict[str, int] = {}
    for pod in pods:
        name = pod.spec.get("schedulerName")
        if isinstance(name, str) and name and name != DEFAULT_SCHEDULER:
            names[name] = names.get(name, 0) + 1
    if not names:
        return None
    which = ", ".join(f"{n} ({plural(c, 'pod')})" for n, c in sorted(names.items()))
    return (f"some pods name another scheduler: {which}; the analysis models kube-scheduler's "
            "default filters and preemption")


def select(state: ClusterState, scope: Scope, *, live: bool) -> Selection:
    out = _select(state, scope, live)
    note = _other_schedulers(out.pods)
    if note:
        out.notes.append(note)
    return out


def _select(state: ClusterState, scope: Scope, live: bool) -> Selection:
    out = Selection()
    if not scope.names:
        for pod in state.pending_gpu_pods():
            if scope.namespace is not None and pod.namespace != scope.namespace:
                continue
            if tried(state, pod):
                out.pods.append(pod)
            else:
                out.untried += 1
        if out.untried:
            out.notes.append(f"{plural(out.untried, 'unbound GPU pod')} {noun(out.untried, 'has', 'have')} no "
                             "scheduling attempt recorded yet "
                             "(no PodScheduled=False condition, no FailedScheduling event): name one to analyse it")
        return out
    seen: set[str] = set()
    for name in dict.fromkeys(scope.names):
        found = _lookup(state, scope, name)
        if not found:
            where = f" in namespace {scope.namespace}" if scope.namespace and "/" not in name else ""
            gone = " (Succeeded and Failed pods are not listed)" if live else ""
            out.missing.append(f"pod {name} not found{where}{gone}")
            continue
        for pod in found:
            if pod.key in seen:
                continue
            seen.add(pod.key)
            why = _why_not_pending(pod)
            if why is not None:
                out.notes.append(f"{pod.key} {why}")
                continue
            if not tried(state, pod):
                out.notes.append(f"{pod.key}: no scheduling attempt recorded yet (no PodScheduled=False "
                                 "condition, no FailedScheduling event); analysed against the current allocation")
            out.pods.append(pod)
    return out


def _lookup(state: ClusterState, scope: Scope, name: str) -> list[PodInfo]:
    if "/" in name:
        namespace, _, bare = name.partition("/")
        pod = state.pod(namespace, bare)
        return [pod] if pod is not None else []
    if scope.namespace is None:
        return sorted((p for p in state.pods if p.name == name), key=lambda p: p.key)
    pod = state.pod(scope.namespace, name)
    return [pod] if pod is not None else []


def parse_names(names: Sequence[str]) -> tuple[str, ...]:
    """Names as given, checked: ``NAME`` or ``NAMESPACE/NAME``; ValueError names a bad one."""
    out = []
    for name in names:
        parts = name.split("/")
        if len(parts) > 2 or not all(parts):
            raise ValueError(f"{name!r} is not a pod name (NAME or NAMESPACE/NAME)")
        out.append(name)
    return tuple(out)
