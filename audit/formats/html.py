"""``--format html``: one self-contained page for a change ticket (the look is ``gpuguard.htmlreport``).

Top to bottom: summary tiles; with ``--cluster-after`` what the change breaks (introduced, then
resolved, unchanged folded); totals by severity and rule; the GPU pools; a table of findings per
namespace; the node-pool matrix (rows: workloads, columns: node groups, cells: fits, runs only in
a compatibility mode, CUDA too new for the driver, or the scheduler filter that rules it out);
notes and input errors.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import TextIO

from gpuguard import htmlreport as h
from gpuguard.audit.model import AuditFinding, AuditResult, Matrix
from policies import pointer
from policies.placement import Cell
from policies.types import Severity
from policies.wording import plural

LEVEL: dict[Severity, h.Level] = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "info"}
# Rows per findings table, most severe first: the page stays one a browser and a ticket can hold;
# the JSON and SARIF outputs list every finding.
MAX_CHANGE_ROWS = 200
MAX_NAMESPACE_ROWS = 25
CELL: dict[str, tuple[str, h.Level]] = {
    "fits": ("fits", "ok"),
    "compat": ("compat mode", "warning"),
    "cuda": ("CUDA too new", "error"),
    "no": ("no", "muted"),
}


def _severity(f: AuditFinding) -> str:
    out = h.badge(str(f.severity), LEVEL[f.severity])
    if f.previous_severity is not None:
        out += f"<small>was {h.escape(f.previous_severity)}</small>"
    return out


def _object(f: AuditFinding, result: AuditResult, namespace: bool = True) -> str:
    name = f.ref.qualified() if namespace else f.ref.label()
    out = f"<strong>{h.escape(name)}</strong>"
    owned = result.pods_through(f.ref)
    if owned:
        out += f"<small>{plural(owned, 'owned object')} (pods, ReplicaSets…) reported with it</small>"
    if f.origin.file is not None:
        where = f"{f.origin.file}:{f.origin.line}" if f.origin.line else f.origin.file
        out += f"<small>{h.escape(where)}</small>"
    return out


def _field(f: AuditFinding) -> str:
    return f"<small>at <code>{h.escape(pointer.to_dotted(f.finding.path))}</code></small>" if f.finding.path else ""


def _message(f: AuditFinding) -> str:
    return f"{h.escape(f.finding.message)}<small>Fix: {h.escape(f.finding.remediation)}</small>"


def _findings_table(findings: list[AuditFinding], result: AuditResult, *, namespace: bool = True,
                    limit: int = MAX_CHANGE_ROWS) -> str:
    rows = [[_severity(f), f"<code>{h.escape(f.finding.rule)}</code>", _object(f, result, namespace) + _field(f),
             _message(f)] for f in findings[:limit]]
    table = h.table(["Severity", "Rule", "Object and field", "Problem and fix"], rows)
    if len(findings) > limit:
        table += (f'<p class="note">… and {len(findings) - limit} more, less severe '
                  "(<code>--format json</code> lists every finding).</p>")
    return table


def _ordered(findings: list[AuditFinding]) -> list[AuditFinding]:
    return sorted(findings, key=lambda f: (-f.severity, f.ref.namespace, f.ref.kind, f.ref.name, f.finding.rule))


def _diff(result: AuditResult) -> str:
    introduced = _ordered(result.by_change("introduced"))
    resolved = _ordered(result.by_change("resolved"))
    unchanged = _ordered(result.by_change("unchanged"))
    parts = [f'<p class="note">Every workload judged against today\'s cluster '
             f"(<code>{h.escape(result.cluster)}</code>) and the planned one "
             f"(<code>{h.escape(result.cluster_after)}</code>).</p>"]
    if result.matrix is not None and result.matrix.removed:
        parts.append('<p class="note">Node groups the planned cluster no longer has: '
                     + "; ".join(h.escape(r) for r in result.matrix.removed) + "</p>")
    if introduced:
        parts.append("<h3>Introduced by the change</h3>" + _findings_table(introduced, result))
    else:
        parts.append(f"<h3>Introduced by the change</h3><p>{h.badge('none', 'ok')} "
                     "The change breaks nothing gpuguard can see.</p>")
    if resolved:
        parts.append("<h3>Resolved by the change</h3>" + _findings_table(resolved, result))
    if unchanged:
        parts.append(f"<details><summary>{plural(len(unchanged), 'finding')} unchanged by the change</summary>"
                     + _findings_table(unchanged, result) + "</details>")
    return h.section("What the change breaks", "\n".join(parts), anchor="change")


def _totals(result: AuditResult) -> str:
    current = result.current()
    by_rule: Counter[tuple[str, Severity]] = Counter((f.finding.rule, f.severity) for f in current)
    rules = sorted({rule for rule, _ in by_rule}, key=lambda r: (-max(s for (x, s) in by_rule if x == r), r))
    rows = []
    for rule in rules:
        per = [by_rule.get((rule, s), 0) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)]
        rows.append([f"<code>{h.escape(rule)}</code>", *(str(n) if n else "" for n in per), str(sum(per))])
    counts = result.severity_counts()
    rows.append(["<strong>total</strong>", *(f"<strong>{counts[s]}</strong>" for s in ("error", "warning", "info")),
                 f"<strong>{sum(counts.values())}</strong>"])
    return h.section("Totals by severity and rule", h.table(["Rule", "error", "warning", "info", "total"], rows),
                     anchor="totals")


def _pools(result: AuditResult) -> str:
    if not result.pools:
        return ""
    idle = any("idle" in p for p in result.pools)
    rows = []
    for p in result.pools:
        free = int(p["free"])
        row = [h.escape(p["name"]), f"<code>{h.escape(p['resource'])}</code>", str(p["nodes"]), str(p["allocatable"]),
               str(p["allocated"]), h.badge(str(free), "ok" if free else "muted")]
        if idle:
            value = p.get("idle")
            row.append(h.badge(str(value), "warning" if value else "muted") if value is not None else "")
        rows.append(row)
    headers = ["Pool", "Resource", "Nodes", "Allocatable", "Allocated", "Free"] + (["Idle (held, unused)"] if idle
                                                                                    else [])
    caption = ("GPUs per pool: free = allocatable − the requests of the running pods bound there − what pods "
               "nominated by preemption reserve; idle = GPUs held by pods whose DCGM utilization stayed under 1%")
    return h.section("GPU pools", h.table(headers, rows, caption=caption), anchor="pools")


def _namespaces(result: AuditResult) -> str:
    current = result.current()
    if not current:
        return h.section("Findings by namespace", f"<p>{h.badge('clean', 'ok')} No findings.</p>",
                         anchor="namespaces")
    parts = []
    namespaces = sorted({f.ref.namespace for f in current})
    for ns in namespaces:
        found = [f for f in current if f.ref.namespace == ns]
        counts = Counter(f.severity for f in found)
        badges = " ".join(h.badge(f"{counts[s]} {s}", LEVEL[s]) for s in sorted(counts, reverse=True))
        title = ns or "(cluster-scoped)"
        found.sort(key=lambda f: (-f.severity, f.ref.kind, f.ref.name, f.finding.rule))
        parts.append(f"<h3>{h.escape(title)} {badges}</h3>"
                     + _findings_table(found, result, namespace=False, limit=MAX_NAMESPACE_ROWS))
    return h.section("Findings by namespace", "\n".join(parts), anchor="namespaces")


def _cell(cell: Cell, before: Cell | None, compares: bool) -> str:
    text, level = CELL[cell.status]
    out = h.badge(text, level)
    if cell.cuda and cell.status != "no":
        out += f"<small>CUDA: {h.escape(cell.cuda)}</small>"
    if cell.reasons:
        out += "<small>" + h.escape("; ".join(cell.reasons)) + "</small>"
    if compares:
        if before is None:
            out += "<small><em>new node group</em></small>"
        elif before.status != cell.status:
            out += f"<small><strong>was: {h.escape(CELL[before.status][0])}</strong></small>"
    return out


def _matrix(result: AuditResult, matrix: Matrix) -> str:
    if not matrix.columns:
        return h.section("Node-pool matrix", '<p class="note">No GPU node groups in the cluster facts '
                         f"({h.escape(matrix.facts)}).</p>", anchor="matrix")
    if not matrix.rows:
        return h.section("Node-pool matrix", '<p class="note">No GPU workloads to place.</p>', anchor="matrix")
    headers = ["Workload", *(f"{c.label} — {c.detail}" for c in matrix.columns)]
    rows = []
    for row in matrix.rows:
        label = f"<strong>{h.escape(row.ref.qualified())}</strong>"
        if row.template:
            label += f"<small>{h.escape(row.template)}</small>"
        if row.worst is not None:
            label += " " + h.badge(str(row.worst), LEVEL[row.worst])
        cells = [_cell(c, row.before[i] if i < len(row.before) else None, result.compares)
                 for i, c in enumerate(row.cells)]
        rows.append([label, *cells])
    which = "the planned cluster" if result.compares else "the cluster"
    note = (f'<p class="note">Where each GPU workload can run in {which} ({h.escape(matrix.facts)}), by the '
            "scheduler's filters (resources, node selector and affinity, taints, cordon) and the CUDA verdict of "
            "its images on each group's driver. <em>compat mode</em>: it runs only through CUDA minor-version or "
            "forward compatibility.</p>")
    if matrix.omitted:
        note += (f'<p class="note">{plural(matrix.omitted, "more pod template")} not shown; the findings tables '
                 "list every problem.</p>")
    return h.section("Node-pool matrix", note + h.table(headers, rows), anchor="matrix")


def _notes(result: AuditResult) -> str:
    items = [f"<li>{h.badge('input error', 'error')} "
             + (f"<code>{h.escape(where)}</code> " if (where := e.location()) else "")
             + f"{h.escape(e.message)}</li>" for e in result.errors]
    items += [f"<li>{h.escape(n)}</li>" for n in result.notes]
    if not items:
        return ""
    return h.section("Notes and input errors", "<ul>" + "".join(items) + "</ul>", anchor="notes")


def render_page(result: AuditResult, now: dt.datetime | None = None) -> str:
    when = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    counts = result.severity_counts()
    c = result.counts
    tiles: list[tuple[str, str, str]] = []
    if result.compares:
        changes = result.change_counts()
        introduced = result.severity_counts(result.by_change("introduced"))
        tiles += [("introduced by the change", str(changes["introduced"]),
                   "error" if introduced["error"] else "warning" if changes["introduced"] else "ok"),
                  ("resolved by the change", str(changes["resolved"]), "ok" if changes["resolved"] else "muted")]
    tiles += [
        ("errors", str(counts["error"]), "error" if counts["error"] else "ok"),
        ("warnings", str(counts["warning"]), "warning" if counts["warning"] else "ok"),
        ("info", str(counts["info"]), "info" if counts["info"] else "muted"),
        ("GPU workloads judged", str(c.gpu_workloads), "muted"),
        ("objects reported through owners", str(c.through_owners), "muted"),
    ]
    if result.errors:
        tiles.append(("input errors", str(len(result.errors)), "error"))
    body = [h.tiles(tiles)]
    if result.compares:
        body.append(_diff(result))
    body.append(_totals(result))
    body.append(_pools(result))
    body.append(_namespaces(result))
    if result.matrix is not None:
        body.append(_matrix(result, result.matrix))
    body.append(_notes(result))
    facts = f"{result.cluster} → {result.cluster_after}" if result.compares else str(result.cluster or "no facts")
    subtitle = (f"{plural(c.objects, 'object')} judged, {plural(c.gpu_workloads, 'GPU workload')}; "
                f"cluster facts: {facts}; "
                f"generated {when}")
    title = "gpuguard audit: planned change" if result.compares else "gpuguard audit"
    return h.page(title, subtitle, "\n".join(part for part in body if part))


def render(result: AuditResult, stream: TextIO) -> None:
    stream.write(render_page(result))
