"""What to do about each kind of reason: one short line, shown under the reason in text and HTML.

Facts behind them (../shared/reference/pending-gpus.md): NodeResourcesFit's ``MostAllocated``
scoring packs nodes (§3, [K-fit]); the NVIDIA device plugin marks devices unhealthy on critical XID
errors and clears the mark only when it restarts (§4, [N-health]); the scheduler preempts by
itself, PodDisruptionBudgets are best effort and not in gpuguard's input (§6, [K-dp]); scheduling
gates are removed by the controller that set them (§1.1, [W-gates]).
"""

from __future__ import annotations

from policies.pending import diagnose as dg
from policies.pending import workloads as wl

HINTS: dict[str, str] = {
    dg.GATED: "the controller that set the gate (Kueue, for example) removes it when it admits the pod",
    dg.STATIC: "fix the pod spec; `gpuguard rules RULE` explains each rule",
    dg.DRA_SERVED: "the static findings (gpu-dra-*) and the scheduler's message say whether the devices "
    "can be allocated; `kubectl get resourceslices` lists them",
    dg.INSUFFICIENT: "free GPUs on the nodes listed (see idle holders and preemption), add nodes, "
    "or ask for fewer GPUs per pod",
    dg.FRAGMENTATION: "free GPUs are spread over several nodes: move smaller pods off one of the best nodes, "
    "or pack nodes (NodeResourcesFit scoringStrategy MostAllocated)",
    dg.UNHEALTHY: "check `kubectl describe node` and the device plugin's log on these nodes (XID errors); "
    "uncordon nodes that are fit to take work",
    dg.PLUGIN_DOWN: "check the device plugin pod on these nodes: "
    "`kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`",
    dg.IDLE_HOLDERS: "these pods hold GPUs they do not use: stop or scale them down through their owners",
    dg.PREEMPTIBLE: "the scheduler evicts lower-priority pods by itself; if it does not, a PodDisruptionBudget "
    "(not in gpuguard's input) may protect them",
    dg.GANG: "a gang runs only whole: make room for all its pods at once, or run it through gang scheduling "
    "(Kueue, a coscheduling plugin) so that no part of it holds GPUs while the rest waits",
    wl.QUEUE: "Kueue admits it once the ClusterQueue can reserve quota for all of it: ask for less, raise the "
    "ClusterQueue's nominalQuota or borrowingLimit, or a cohort member's lendingLimit",
    wl.QUOTA: "`kubectl describe resourcequota -n NAMESPACE` shows what is used; the controller retries by itself "
    "once the quota has room",
}

DEADLOCK_PREFIX = "deadlock: "
DEADLOCK_HINT = ("neither gang can complete while the other holds its GPUs: delete one of them (its controller "
                 "recreates it later), and run both through gang scheduling so it does not happen again")


WAITING_PREFIX = "preemption is under way"  # diagnose's message while victims terminate
WAITING_HINT = ("room is being made: the victims are within their termination grace period, and the "
                "scheduler places the pod once they are gone")


# policies.pending.fit FitReport.message heads of the two insufficient cases that are not a count
STRANDED_PREFIX = "no GPU node fits the pod apart from GPUs"
STRANDED_HINT = ("GPUs are free only on nodes the pod cannot use: each node listed says why "
                 "(cpu, memory or pod slots, taints, cordon, selector)")
NO_NODE_PREFIX = "no node offers"
NO_NODE_HINT = "no node offers the resource: check its name, or add nodes that have it"


NO_QUEUE = "does not exist, so it is never admitted"
NO_QUEUE_HINT = ("create the queue Kueue is asked for (`kubectl get localqueues -n NAMESPACE`, `kubectl get "
                 "clusterqueues`), or name an existing LocalQueue in kueue.x-k8s.io/queue-name")


def hint(kind: str, message: str = "") -> str | None:
    if kind == wl.QUEUE and NO_QUEUE in message:
        return NO_QUEUE_HINT
    if kind == dg.GANG and message.startswith(DEADLOCK_PREFIX):
        return DEADLOCK_HINT
    if kind == dg.PREEMPTIBLE and message.startswith(WAITING_PREFIX):
        return WAITING_HINT
    if kind == dg.INSUFFICIENT and message.startswith(STRANDED_PREFIX):
        return STRANDED_HINT
    if kind == dg.INSUFFICIENT and message.startswith(NO_NODE_PREFIX):
        return NO_NODE_HINT
    return HINTS.get(kind)
