"""One self-contained HTML file with the look every gpuguard report shares (gpuguard.htmlreport):
summary tiles, one card per pod with its reasons, evidence and hints, the GPU pools and the notes."""

from __future__ import annotations

from collections.abc import Sequence

from gpuguard.htmlreport import Level, badge, escape, page, section, table, tiles
from policies.pending import diagnose as dg
from policies.pending import workloads as wl
from policies.pending.diagnose import PodDiagnosis, PoolView
from policies.pending.workloads import WorkloadDiagnosis
from whypending.report import Report
from whypending.views import (
    age,
    fits_now,
    pending_since,
    pod_facts,
    reason_view,
    workload_heading,
    workload_reason_view,
)

LEVEL: dict[str, Level] = {
    dg.GATED: "muted",
    dg.STATIC: "error",
    dg.SCHEDULER: "info",
    dg.DRA_SERVED: "info",
    dg.INSUFFICIENT: "error",
    dg.FRAGMENTATION: "warning",
    dg.UNHEALTHY: "error",
    dg.PLUGIN_DOWN: "error",
    dg.IDLE_HOLDERS: "warning",
    dg.PREEMPTIBLE: "info",
    dg.GANG: "warning",
    wl.QUEUE: "warning",
    wl.QUOTA: "error",
}


def _level(kind: str, head: str) -> Level:
    """A static finding shows its own severity (whypending.static writes it first); a deadlock is an error."""
    if kind == dg.GANG and head.startswith("deadlock: "):
        return "error"
    if kind == dg.STATIC:
        severity = head.split(" ", 1)[0]
        if severity == "error":
            return "error"
        return "warning" if severity == "warning" else "info"
    return LEVEL.get(kind, "muted")


def _list(items: tuple[str, ...] | list[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>" if items else ""


def _names(names: tuple[str, ...]) -> str:
    # node and pod names break at their hyphens otherwise, which reads as two names
    return "<br>".join(f"<code style=\"white-space:nowrap\">{escape(n)}</code>" for n in names)


def _pod_section(report: Report, pd: PodDiagnosis) -> str:
    since = pending_since(pd)
    waited = age(since, report.generated)
    facts = ", ".join(pod_facts(pd))
    when = f"pending for {waited} (since {since})" if waited else (f"pending since {since}" if since else "")
    body = f"<p>{escape(facts)}<br><span class=\"muted\">{escape(when)}</span></p>"
    rows = []
    for reason in pd.reasons:
        view = reason_view(report.state, pd, reason)
        text = f"<p>{escape(view.head)}</p>{_list(view.items)}"
        if view.hint:
            text += f"<p class=\"muted\">&rarr; {escape(view.hint)}</p>"
        rows.append([badge(view.kind, _level(view.kind, view.head)), text, _names(reason.nodes),
                     _names(reason.pods)])
    room = fits_now(pd)
    if room:
        rows.append([badge("fits now", "ok"), f"<p>{escape(room)}</p>", "", ""])
    elif not rows:
        rows.append([badge("unknown", "muted"), "<p>no reason found in the input</p>", "", ""])
    body += table(["reason", "what and why", "nodes", "pods"], rows)
    return section(pd.pod.key, body, anchor=f"pod-{pd.pod.key}")


def _workload_section(w: WorkloadDiagnosis) -> str:
    rows = []
    for reason in w.reasons:
        view = workload_reason_view(reason)
        text = f"<p>{escape(view.head)}</p>{_list(view.items)}"
        if view.hint:
            text += f"<p class=\"muted\">&rarr; {escape(view.hint)}</p>"
        rows.append([badge(view.kind, _level(view.kind, view.head)), text])
    body = f"<p>{escape(w.kind)} with no pods yet</p>" + table(["reason", "what and why"], rows)
    return section(workload_heading(w), body, anchor=f"workload-{w.key}")


def _pools(report: Report) -> str:
    pools = report.diagnosis.pools
    if not pools:
        return section("GPU pools", "<p>No node advertises or is labelled with GPUs.</p>", anchor="pools")
    idle_known = any(p.idle is not None for p in pools)
    headers = ["pool", "resource", "nodes", "allocatable", "allocated", "reserved", "free",
               *(["idle"] if idle_known else []), "unhealthy", "unavailable nodes"]
    rows = []
    for view in pools:
        p = view.pool
        free = badge(str(p.free), "ok" if p.free else "muted")
        idle = [badge(str(view.idle), "warning" if view.idle else "muted") if view.idle is not None else "&ndash;"
                ] if idle_known else []
        unhealthy = badge(str(p.unhealthy), "error") if p.unhealthy else "0"
        unavailable = badge(str(p.unavailable_nodes), "warning") if p.unavailable_nodes else "0"
        rows.append([escape(p.name), f"<code>{escape(p.resource)}</code>", str(p.nodes), str(p.allocatable),
                     str(p.allocated), str(p.reserved), free, *idle, unhealthy, unavailable])
    caption = "reserved: held for pods nominated by preemption; unavailable: cordoned or NotReady nodes"
    return section("GPU pools", table(headers, rows, caption=caption), anchor="pools")


def _by_resource(pools: Sequence[PoolView]) -> list[tuple[str, list[PoolView]]]:
    """The pools grouped by the resource they count, whole GPUs before MIG slices and shares: a
    MIG slice is no GPU, so counts of different resources are never added up."""
    groups: dict[str, list[PoolView]] = {}
    for view in pools:
        groups.setdefault(view.pool.resource, []).append(view)
    return sorted(groups.items(), key=lambda item: ("/mig-" in item[0] or item[0].endswith(".shared"), item[0]))


def _tiles(report: Report) -> str:
    pools = report.diagnosis.pools
    waiting = len(report.pods) - report.gated
    items = [
        ("pending GPU pods (not gated)", str(waiting), "error" if waiting else "ok"),
        ("gated pods", str(report.gated), "muted"),
    ]
    if report.workloads:
        items.append(("workloads without pods (queued, over quota)", str(len(report.workloads)), "warning"))
    groups = _by_resource(pools)
    for resource, views in groups or [("GPUs", [])]:
        free = sum(v.pool.free for v in views)
        allocatable = sum(v.pool.allocatable for v in views)
        items.append((f"{resource} free / allocatable", f"{free} / {allocatable}", "info"))
    if any(p.idle is not None for p in pools):
        for resource, views in groups:
            idle = sum(v.idle or 0 for v in views)
            items.append((f"{resource} held but idle", str(idle), "warning" if idle else "ok"))
    for resource, views in groups or [("GPUs", [])]:
        out_of_service = sum(v.pool.unhealthy for v in views)
        items.append((f"{resource} unhealthy", str(out_of_service), "error" if out_of_service else "ok"))
    return tiles(items)


def render(report: Report) -> str:
    body = _tiles(report)
    overview = (f"<p>{escape(report.input_line())}</p><p>{escape(report.utilization_line())}</p>")
    if report.pods:
        links = ", ".join(f"<a href=\"#pod-{escape(pd.pod.key.replace('/', '-'))}\">{escape(pd.pod.key)}</a>"
                          for pd in report.pods)
        overview += f"<p>Pods: {links}</p>"
    if report.workloads:
        links = ", ".join(f"<a href=\"#workload-{escape(w.key.replace('/', '-'))}\">{escape(workload_heading(w))}</a>"
                          for w in report.workloads)
        overview += f"<p>Workloads without pods: {links}</p>"
    body += section(report.headline()[:1].upper() + report.headline()[1:], overview, anchor="overview")
    body += "".join(_pod_section(report, pd) for pd in report.pods)
    body += "".join(_workload_section(w) for w in report.workloads)
    body += _pools(report)
    notes = report.all_notes()
    if notes:
        body += section("Notes", _list(notes), anchor="notes")
    subtitle = f"{report.source} · {report.scope.describe()} · {report.generated.strftime('%Y-%m-%d %H:%M:%S UTC')}"
    return page("gpuguard why-pending", subtitle, body)
