"""Which scheduler message to read for a pod: the PodScheduled condition first, events as fallback.

The scheduler writes the same error text to the pod's ``PodScheduled`` condition (``status:
"False"``, reason ``Unschedulable`` or ``SchedulerError``; never truncated) and to a
``FailedScheduling`` Warning event, whose note is cut to 1024 bytes (pending-gpus.md §1.1, §1.3;
pkg/scheduler/schedule_one.go [K-s1]).  Events expire, so old pods may have none.

Events come in two API shapes [K-s1][pending-gpus.md §1.5]: ``events.k8s.io/v1`` (``regarding``,
``note``, ``series.count``, ``deprecatedCount``) and the core/v1 view (``involvedObject``,
``message``, ``count``).  Both are read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from policies.pending.objects import PodInfo
from policies.pending.schedmsg import SchedulerMessage, parse
from policies.shapes import as_dict

FAILED_SCHEDULING = "FailedScheduling"
# A controller that could not create a pod: the built-in controllers record "FailedCreate"
# (kubernetes/kubernetes pkg/controller/controller_utils.go FailedCreatePodReason), the Kubeflow
# training operator "FailedCreatePod" (kubeflow/training-operator pkg/controller.v1/control/
# pod_control.go), both with the message "Error creating: <the API server's error>".
FAILED_CREATE = ("FailedCreate", "FailedCreatePod")


@dataclass(frozen=True, slots=True)
class SchedulingEvent:
    namespace: str
    pod: str
    uid: str
    reason: str
    type: str
    message: str
    count: int
    last_seen: str


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _count(obj: Mapping[str, Any]) -> int:
    series = as_dict(obj.get("series")).get("count")
    for value in (series, obj.get("count"), obj.get("deprecatedCount")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 1


def event_from_object(obj: Mapping[str, Any]) -> SchedulingEvent | None:
    """A Pod event in either API shape; None for events about other kinds or unusable objects."""
    target = as_dict(obj.get("regarding")) or as_dict(obj.get("involvedObject"))
    if _s(target.get("kind")) not in ("Pod", ""):
        return None
    name = _s(target.get("name"))
    if not name:
        return None
    meta = as_dict(obj.get("metadata"))
    series = as_dict(obj.get("series"))
    last = (
        _s(series.get("lastObservedTime"))
        or _s(obj.get("lastTimestamp"))
        or _s(obj.get("deprecatedLastTimestamp"))
        or _s(obj.get("eventTime"))
        or _s(obj.get("firstTimestamp"))
        or _s(meta.get("creationTimestamp"))
    )
    return SchedulingEvent(
        namespace=_s(target.get("namespace")) or _s(meta.get("namespace")) or "default",
        pod=name,
        uid=_s(target.get("uid")),
        reason=_s(obj.get("reason")),
        type=_s(obj.get("type")),
        message=_s(obj.get("note")) or _s(obj.get("message")),
        count=_count(obj),
        last_seen=last,
    )


class EventIndex:
    """FailedScheduling events by pod (namespace, name)."""

    def __init__(self, events: Iterable[SchedulingEvent]) -> None:
        self._by_pod: dict[tuple[str, str], list[SchedulingEvent]] = {}
        for e in events:
            if e.reason == FAILED_SCHEDULING:
                self._by_pod.setdefault((e.namespace, e.pod), []).append(e)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_pod.values())

    def for_pod(self, pod: PodInfo) -> list[SchedulingEvent]:
        """Newest first; events of an earlier pod with the same name (another uid) are left out."""
        found = self._by_pod.get((pod.namespace, pod.name), [])
        mine = [e for e in found if not e.uid or not pod.uid or e.uid == pod.uid]
        return sorted(mine, key=lambda e: e.last_seen, reverse=True)


@dataclass(frozen=True, slots=True)
class SchedulerVerdict:
    source: str  # "condition" | "event" | "none"
    reason: str  # the condition's reason (Unschedulable / SchedulerError) or the event's reason
    message: SchedulerMessage | None
    event_count: int = 0  # how often the event repeated
    last_seen: str = ""


def scheduler_verdict(pod: PodInfo, events: EventIndex) -> SchedulerVerdict:
    cond = pod.scheduled
    if cond is not None and cond.status == "False" and cond.message:
        return SchedulerVerdict("condition", cond.reason, parse(cond.message), last_seen=cond.last_transition)
    found = events.for_pod(pod)
    if found:
        newest = found[0]
        return SchedulerVerdict("event", newest.reason, parse(newest.message), newest.count, newest.last_seen)
    return SchedulerVerdict("none", cond.reason if cond else "", None)


@dataclass(frozen=True, slots=True)
class ControllerEvent:
    """A FailedCreate event about a controller (a Job, a ReplicaSet, a PyTorchJob…), not a pod."""

    namespace: str
    kind: str
    api_version: str
    name: str
    reason: str
    message: str
    count: int
    last_seen: str


def controller_event_from_object(obj: Mapping[str, Any]) -> ControllerEvent | None:
    """A FailedCreate / FailedCreatePod event in either API shape; None for any other."""
    reason = _s(obj.get("reason"))
    if reason not in FAILED_CREATE:
        return None
    target = as_dict(obj.get("regarding")) or as_dict(obj.get("involvedObject"))
    kind, name = _s(target.get("kind")), _s(target.get("name"))
    if not kind or kind == "Pod" or not name:
        return None
    meta = as_dict(obj.get("metadata"))
    series = as_dict(obj.get("series"))
    last = (_s(series.get("lastObservedTime")) or _s(obj.get("lastTimestamp")) or _s(obj.get("deprecatedLastTimestamp"))
            or _s(obj.get("eventTime")) or _s(obj.get("firstTimestamp")) or _s(meta.get("creationTimestamp")))
    return ControllerEvent(
        namespace=_s(target.get("namespace")) or _s(meta.get("namespace")) or "default",
        kind=kind,
        api_version=_s(target.get("apiVersion")),
        name=name,
        reason=reason,
        message=_s(obj.get("note")) or _s(obj.get("message")),
        count=_count(obj),
        last_seen=last,
    )
