"""Parse kube-scheduler's ``FailedScheduling`` text into reasons with node counts and plain words.

Grammar (kubernetes/kubernetes pkg/scheduler/framework/types.go ``FitError.Error``; see
../shared/reference/pending-gpus.md §1.2 [K-types]):

    0/<N> nodes are available:[ <PreFilterMsg>.][ <c1> <reason1>, <c2> <reason2>, ….][ <PostFilterMsg>]

* ``<N>`` is the number of nodes in the scheduler's snapshot.
* Each entry counts the nodes whose Filter status carried that reason.  One node can carry several
  reasons (NodeResourcesFit returns one per short resource), so **the counts may add up to more
  than N**.  Entries are sorted with Go's ``sort.Strings`` on the whole ``"<count> <reason>"``
  string and joined with ``", "``.
* A PreFilter rejection replaces the per-node list with its own message.
* DefaultPreemption's PostFilter message is ``"preemption: "`` followed by its own message, which
  is itself a FitError (``0/<N> nodes are available: …``) or ``not eligible due to …``
  (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go [K-dp],
  pkg/scheduler/framework/preemption/preemption.go [K-pre]).
* Events are cut to 1024 bytes (``message[:1020] + " ..."``); the PodScheduled condition message
  is not cut (pkg/scheduler/schedule_one.go ``truncateMessage`` [K-s1], NoteLengthLimit [K-val]).

Reason strings and whether preemption can resolve them come from the plugins' sources as listed in
pending-gpus.md §1.4.  A reason this module does not know is kept verbatim (``known=False``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from policies import patterns

# NoNodeAvailableMsg = "0/%v nodes are available" [K-types]
_HEAD = patterns.compile(r"^0/(\d+) nodes are available:")
_ENTRY = patterns.compile(r"(?s)^(\d+) (.+)$")
_PREEMPTION_PREFIX = "preemption: "  # DefaultPreemption.PostFilter [K-dp]
TRUNCATION_SUFFIX = " ..."  # schedule_one.go truncateMessage [K-s1]
NOTE_LENGTH_LIMIT = 1024  # pkg/apis/core/validation/events.go NoteLengthLimit [K-val]
_OPEN, _CLOSE = "[{(", "]})"

# Categories: what kind of fix a reason calls for.
RESOURCES = "resources"
TAINT = "taint"
NODE_AFFINITY = "node-affinity"
CORDON = "cordon"
PORTS = "ports"
VOLUME = "volume"
POD_AFFINITY = "pod-affinity"
TOPOLOGY_SPREAD = "topology-spread"
DRA = "dynamic-resources"
PLUGINS = "plugins"
SIDECAR = "sidecar"
PREEMPTION = "preemption"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ReasonInfo:
    """What one reason string means.

    ``preemptible``: True when the plugin returns plain ``Unschedulable`` (the node stays a
    preemption candidate), False for ``UnschedulableAndUnresolvable`` (preemption never helps
    there; pkg/scheduler/framework/preemption/preemption.go ``findCandidates`` [K-pre]), None
    when unknown.
    """

    plugin: str
    category: str
    plain: str
    preemptible: bool | None
    known: bool = True
    resource: str | None = None  # for Insufficient <resource>
    taint: tuple[str, str] | None = None  # (key, value) for untolerated taints


@dataclass(frozen=True, slots=True)
class ReasonCount:
    count: int
    reason: str  # verbatim
    info: ReasonInfo
    partial: bool = False  # the last entry of a truncated event message


@dataclass(frozen=True, slots=True)
class PostFilter:
    """A PostFilter plugin's message; ``nested`` holds a parsed FitError (DefaultPreemption)."""

    plugin: str  # "DefaultPreemption" when it carries the "preemption: " prefix, else ""
    text: str
    nested: SchedulerMessage | None = None
    eligible: bool = True  # False for "not eligible due to …"
    plain: str = ""


@dataclass(frozen=True, slots=True)
class SchedulerMessage:
    """A parsed scheduler message.  ``nodes`` is None when the text is not a FitError at all
    (a SchedulerError such as an API or bind failure); the text is then in ``unparsed``."""

    raw: str
    nodes: int | None = None
    prefilter: str | None = None
    prefilter_info: ReasonInfo | None = None
    reasons: tuple[ReasonCount, ...] = ()
    postfilter: tuple[PostFilter, ...] = ()
    truncated: bool = False
    unparsed: str = ""

    @property
    def is_fit_error(self) -> bool:
        return self.nodes is not None

    @property
    def preemption(self) -> PostFilter | None:
        return next((p for p in self.postfilter if p.plugin == "DefaultPreemption"), None)

    def by_category(self) -> dict[str, int]:
        """Node counts per category (a node with two reasons of one category counts twice)."""
        out: dict[str, int] = {}
        for r in self.reasons:
            out[r.info.category] = out.get(r.info.category, 0) + r.count
        return out

    def insufficient(self) -> dict[str, int]:
        """``Insufficient <resource>`` node counts by resource name."""
        return {r.info.resource: r.count for r in self.reasons if r.info.resource is not None}


# --- reason table ------------------------------------------------------------------------------

_EXACT: dict[str, ReasonInfo] = {}


def _exact(reason: str, plugin: str, category: str, preemptible: bool | None, plain: str) -> None:
    _EXACT[reason] = ReasonInfo(plugin, category, plain, preemptible)


# NodeResourcesFit [K-fit]
_exact("Too many pods", "NodeResourcesFit", RESOURCES, True, "the node already runs as many pods as it allows")
_exact(
    "Pod has a restartable init container and the SidecarContainers feature is disabled",
    "NodeResourcesFit", SIDECAR, False,
    "the pod has a sidecar (restartable init container) but the SidecarContainers feature gate is off",
)
# TaintToleration [K-taint] (older constant)
_exact("node(s) had taints that the pod didn't tolerate", "TaintToleration", TAINT, False,
       "the node has a taint the pod does not tolerate")
# NodeAffinity [K-na]
_exact("node(s) didn't match Pod's node affinity/selector", "NodeAffinity", NODE_AFFINITY, False,
       "the node's labels do not match the pod's nodeSelector or required node affinity")
_exact("node(s) didn't match scheduler-enforced node affinity", "NodeAffinity", NODE_AFFINITY, False,
       "the node does not match the scheduler profile's added node affinity")
_exact("pod affinity terms conflict", "NodeAffinity", NODE_AFFINITY, False,
       "the pod's node affinity terms contradict each other, so no node can match")
# NodeUnschedulable [K-nu]
_exact("node(s) were unschedulable", "NodeUnschedulable", CORDON, False, "the node is cordoned (spec.unschedulable)")
_exact("node(s) had unknown conditions", "NodeUnschedulable", CORDON, False,
       "the node's conditions are unknown to the scheduler")
# NodePorts [K-np]
_exact("node(s) didn't have free ports for the requested pod ports", "NodePorts", PORTS, True,
       "a host port the pod asks for is taken on the node")
# VolumeBinding [K-vb]
for _reason, _plain in (
    ("pod has unbound immediate PersistentVolumeClaims", "a PersistentVolumeClaim with Immediate binding is not bound"),
    ("node(s) had volume node affinity conflict", "a volume the pod needs can only be used from other nodes"),
    ("node(s) didn't find available persistent volumes to bind", "no free PersistentVolume fits the claim on the node"),
    ("node(s) did not have enough free storage", "the node lacks free storage for a volume the pod needs"),
    ("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
     "a claim is bound to a PersistentVolume that does not exist"),
):
    _exact(_reason, "VolumeBinding", VOLUME, False, _plain)
# InterPodAffinity [K-ipa]
_exact("node(s) didn't match pod affinity rules", "InterPodAffinity", POD_AFFINITY, False,
       "no pod the pod wants to be near runs in the node's topology domain")
_exact("node(s) didn't match pod anti-affinity rules", "InterPodAffinity", POD_AFFINITY, True,
       "a pod the pod must stay away from runs in the node's topology domain")
_exact("node(s) didn't satisfy existing pods anti-affinity rules", "InterPodAffinity", POD_AFFINITY, True,
       "a pod already running there refuses this pod as a neighbour (its anti-affinity)")
_exact("node(s) didn't match pod affinity/anti-affinity", "InterPodAffinity", POD_AFFINITY, None,
       "pod (anti-)affinity rules exclude the node")
# PodTopologySpread [K-pts]
_exact("node(s) didn't match pod topology spread constraints", "PodTopologySpread", TOPOLOGY_SPREAD, True,
       "placing the pod there would break a topology spread constraint")
_exact("node(s) didn't match pod topology spread constraints (missing required label)", "PodTopologySpread",
       TOPOLOGY_SPREAD, False, "the node lacks the topology label a spread constraint needs")
# DynamicResources [K-dra] (v1alpha3-era strings)
for _reason, _plain in (
    ("cannot allocate all claims", "the pod's ResourceClaims cannot all be allocated on the node"),
    ("resourceclaim not available on the node", "an allocated ResourceClaim cannot be used from the node"),
    ("resourceclaim in use", "a ResourceClaim is reserved by other pods"),
    ("resourceclaim must be reallocated", "a ResourceClaim must be deallocated and allocated again"),
    ("excluded by device class node filter", "the DeviceClass excludes the node"),
):
    _exact(_reason, "DynamicResources", DRA, False, _plain)
# DefaultPreemption's own per-node reasons in its nested FitError [K-pre][K-dp].  "Preemption is not
# helpful for scheduling" is the status nodesWherePreemptionMightHelp (preemption.go [K-pre]) gives a
# node whose Filter status was UnschedulableAndUnresolvable: it failed for a reason that removing pods
# cannot fix (taint, node selector or affinity, cordon, …), so preemption never tried it.  It is not
# a count of pods: the nested list counts nodes like the outer one.
_exact("Preemption is not helpful for scheduling", "DefaultPreemption", PREEMPTION, None,
       "not tried, as evicting pods cannot fix what rejected the node (a taint, the node selector or "
       "affinity, cordon…)")
_exact("No preemption victims found for incoming pod", "DefaultPreemption", PREEMPTION, None,
       "the node has no lower-priority pods whose eviction would make room")


def _insufficient(reason: str) -> ReasonInfo | None:
    # "Insufficient " + resource name, one per short resource [K-fit]
    if not reason.startswith("Insufficient ") or " " in reason[len("Insufficient "):]:
        return None
    resource = reason[len("Insufficient "):]
    return ReasonInfo(
        "NodeResourcesFit", RESOURCES,
        f"not enough {resource} left: the requests of pods already on the node leave less than the pod asks",
        True, resource=resource,
    )


_TAINT = patterns.compile(r"^node\(s\) had untolerated taint \{(?P<key>[^:{}]*): (?P<value>[^{}]*)\}$")


def _taint(reason: str) -> ReasonInfo | None:
    # "node(s) had untolerated taint {<key>: <value>}" [K-taint].  A copy of the plugin seen in the
    # code index (not the upstream commit cited) says "node(s) had untolerated taint(s)" without
    # naming the taint; it is matched as a prefix so both forms mean the same.
    m = _TAINT.match(reason)
    if m:
        key, value = m.group("key"), m.group("value")
        shown = f"{key}={value}" if value else key
        return ReasonInfo("TaintToleration", TAINT, f"the node has taint {shown} and the pod does not tolerate it",
                          False, taint=(key, value))
    if reason.startswith("node(s) had untolerated taint"):
        return ReasonInfo("TaintToleration", TAINT, "the node has a taint the pod does not tolerate", False)
    return None


def _absent(reason: str) -> ReasonInfo | None:
    # Nodes a PreFilter result left out: "node(s) didn't satisfy plugin(s) [A B]" (schedule_one.go
    # SetAbsentNodesStatus [K-s1]); a PreFilter-level variant ends in " simultaneously".
    if reason.startswith("node(s) didn't satisfy plugin"):
        which = reason[len("node(s) didn't satisfy "):]
        return ReasonInfo("framework", PLUGINS, f"PreFilter plugins narrowed the candidates to other nodes ({which})",
                          False)
    return None


def _dra_patterns(reason: str) -> ReasonInfo | None:
    # "request <r>: device class <c> does not exist", "resource claim <ns/name> is in the process of
    # being allocated" [K-dra]
    if reason.startswith("request ") and reason.endswith(" does not exist") and ": device class " in reason:
        return ReasonInfo("DynamicResources", DRA, "a claim names a DeviceClass that does not exist", False)
    if reason.startswith("resource claim ") and reason.endswith(" is in the process of being allocated"):
        return ReasonInfo("DynamicResources", DRA, "a ResourceClaim is still being allocated", False)
    return None


def _pvc_patterns(reason: str) -> ReasonInfo | None:
    # VolumeBinding PreFilter: persistentvolumeclaim "x" not found [K-vb]
    if reason.startswith('persistentvolumeclaim "') and reason.endswith('" not found'):
        return ReasonInfo("VolumeBinding", VOLUME, "the pod names a PersistentVolumeClaim that does not exist", False)
    return None


_PATTERNS: tuple[Callable[[str], ReasonInfo | None], ...] = (
    _insufficient, _taint, _absent, _dra_patterns, _pvc_patterns,
)


def explain_reason(reason: str) -> ReasonInfo:
    """The meaning of one reason string; unknown reasons come back verbatim with ``known=False``."""
    found = _EXACT.get(reason)
    if found is not None:
        return found
    for pattern in _PATTERNS:
        info = pattern(reason)
        if info is not None:
            return info
    return ReasonInfo("", UNKNOWN, reason, None, known=False)


# --- parsing -----------------------------------------------------------------------------------


def _list_end(text: str) -> int:
    """Index of the '.' that ends a '.'-terminated segment: the first '. ' (or a final '.') outside
    brackets.  Reasons contain dots (``nvidia.com/gpu``) but never a dot followed by a space."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            return i
    return -1


def _split_entries(text: str) -> list[str]:
    """Split ``"2 a, 3 b {x, y}"`` at ', ' outside brackets when a count follows."""
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0 and text.startswith(", ", i):
            j = i + 2
            while j < len(text) and text[j].isdigit():
                j += 1
            if j > i + 2 and j < len(text) and text[j] == " ":
                parts.append(text[start:i])
                start = i + 2
                i += 2
                continue
        i += 1
    parts.append(text[start:])
    return parts


def _entries(text: str, truncated_tail: bool) -> tuple[ReasonCount, ...] | None:
    chunks = _split_entries(text)
    out: list[ReasonCount] = []
    for n, chunk in enumerate(chunks):
        m = _ENTRY.match(chunk)
        if not m:
            return None
        reason = m.group(2)
        partial = truncated_tail and n == len(chunks) - 1
        info = explain_reason(reason) if not partial else ReasonInfo("", UNKNOWN, reason, None, known=False)
        out.append(ReasonCount(int(m.group(1)), reason, info, partial))
    return tuple(out)


def _postfilters(text: str, truncated: bool) -> tuple[PostFilter, ...]:
    text = text.strip()
    if not text:
        return ()
    at = text.find(_PREEMPTION_PREFIX)
    out: list[PostFilter] = []
    if at < 0:
        return (PostFilter("", text, plain=text),)
    before = text[:at].rstrip().rstrip(",").strip()
    if before:  # another PostFilter plugin's message (e.g. DynamicResources) ahead of preemption's
        out.append(PostFilter("", before, plain=before))
    body = text[at + len(_PREEMPTION_PREFIX):]
    out.append(_preemption(body, truncated))
    return tuple(out)


_NOT_ELIGIBLE = {
    # default_preemption.go PodEligibleToPreemptOthers [K-dp]
    "not eligible due to preemptionPolicy=Never.": "the pod has preemptionPolicy: Never, so it never evicts others",
    "not eligible due to a terminating pod on the nominated node.": (
        "a lower-priority pod on the node nominated for this pod is still terminating: "
        "room is already being made, the scheduler waits for it"
    ),
}


def _preemption(body: str, truncated: bool) -> PostFilter:
    if body in _NOT_ELIGIBLE:
        return PostFilter("DefaultPreemption", body, eligible=False, plain=_NOT_ELIGIBLE[body])
    if _HEAD.match(body):
        nested = parse(body, _truncated=truncated)
        return PostFilter("DefaultPreemption", body, nested=nested, plain=_preemption_plain(nested))
    return PostFilter("DefaultPreemption", body, plain=body)


def _preemption_plain(nested: SchedulerMessage) -> str:
    if nested.prefilter is not None:
        return f"preemption found no candidate: {nested.prefilter}"
    # The nested FitError counts nodes, as the outer one does: "7 of 10 nodes: …", never "7 <words>".
    parts = [f"{r.count} of {nested.nodes} nodes: {r.info.plain if r.info.known else r.reason}"
             for r in nested.reasons]
    return "preemption found no node where evicting lower-priority pods helps: " + "; ".join(parts)


def parse(message: str, *, _truncated: bool | None = None) -> SchedulerMessage:
    """Parse a PodScheduled condition message or a FailedScheduling event note."""
    raw = message
    truncated = (
        _truncated
        if _truncated is not None
        else message.endswith(TRUNCATION_SUFFIX) and len(message.encode("utf-8", "replace")) >= NOTE_LENGTH_LIMIT - 4
    )
    text = message[: -len(TRUNCATION_SUFFIX)] if truncated and message.endswith(TRUNCATION_SUFFIX) else message
    text = text.strip()
    head = _HEAD.match(text)
    if not head:
        return SchedulerMessage(raw=raw, unparsed=message, truncated=truncated)
    nodes = int(head.group(1))
    rest = text[head.end():]
    if not rest.strip():
        return SchedulerMessage(raw=raw, nodes=nodes, truncated=truncated)
    if not rest.startswith(" "):
        return SchedulerMessage(raw=raw, nodes=nodes, unparsed=rest, truncated=truncated)
    rest = rest[1:]
    end = _list_end(rest)
    segment = rest if end < 0 else rest[:end]
    after = "" if end < 0 else rest[end + 1:]
    cut_short = end < 0 and truncated  # the list itself was cut by truncation
    if end < 0 and not truncated:
        return SchedulerMessage(raw=raw, nodes=nodes, unparsed=rest, truncated=truncated)
    entries = _entries(segment, cut_short) if segment[:1].isdigit() else None
    if entries is not None:
        return SchedulerMessage(raw=raw, nodes=nodes, reasons=entries,
                                postfilter=_postfilters(after, truncated), truncated=truncated)
    # A PreFilter message replaces the per-node list [K-types]; older releases could follow it
    # with the list as well, so look for one more '.'-terminated segment of counted entries.
    prefilter = segment
    more = after.lstrip()
    reasons: tuple[ReasonCount, ...] = ()
    if more[:1].isdigit():
        end2 = _list_end(more)
        listed = _entries(more if end2 < 0 else more[:end2], end2 < 0 and truncated)
        if listed is not None:
            reasons = listed
            after = "" if end2 < 0 else more[end2 + 1:]
    return SchedulerMessage(raw=raw, nodes=nodes, prefilter=prefilter, prefilter_info=explain_reason(prefilter),
                            reasons=reasons, postfilter=_postfilters(after, truncated), truncated=truncated)


_CATEGORY_ORDER = (RESOURCES, CORDON, TAINT, NODE_AFFINITY, VOLUME, DRA, POD_AFFINITY, TOPOLOGY_SPREAD,
                   PORTS, PLUGINS, SIDECAR, PREEMPTION, UNKNOWN)


def explain(msg: SchedulerMessage) -> list[str]:
    """Plain-words lines, most actionable first: ``"<count> of <N> nodes: <words>"``; unknown
    reasons are shown verbatim."""
    if not msg.is_fit_error:
        return [f"scheduler error: {msg.unparsed.strip()}"]
    lines: list[str] = []
    if msg.prefilter is not None:
        info = msg.prefilter_info or explain_reason(msg.prefilter)
        lines.append(f"all {msg.nodes} nodes: {info.plain if info.known else msg.prefilter}")
    order = {c: i for i, c in enumerate(_CATEGORY_ORDER)}
    for r in sorted(msg.reasons, key=lambda r: (order.get(r.info.category, len(order)), -r.count, r.reason)):
        words = r.info.plain if r.info.known else f"{r.reason} (reason not known to gpuguard, shown verbatim)"
        suffix = " [cut short: the event message was truncated]" if r.partial else ""
        lines.append(f"{r.count} of {msg.nodes} nodes: {words}{suffix}")
    for p in msg.postfilter:
        lines.append(p.plain or p.text)
    if msg.unparsed:
        lines.append(f"unparsed: {msg.unparsed}")
    return lines
