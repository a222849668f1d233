"""Plain text for a terminal: one block per pod, reasons in the order of what fixes them, each with
its evidence and a hint, then the GPU pools and the notes.  Lines wrap to the terminal's width,
and only on a terminal."""

from __future__ import annotations

import sys
import textwrap

from gpuguard import terminal
from policies.pending.diagnose import PodDiagnosis
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

KIND_WIDTH = 18  # the longest kind, device-plugin-down
MIN_WIDTH, MAX_WIDTH, NO_WRAP = terminal.MIN_WIDTH, terminal.MAX_WIDTH, terminal.NO_WRAP


def width() -> int:
    """The terminal's width (within MIN_WIDTH and MAX_WIDTH); no wrapping when stdout is not a
    terminal (a pipe or a file keeps each line whole, for grep)."""
    return terminal.width(sys.stdout)


def _wrap(text: str, first: str, rest: str, cols: int) -> list[str]:
    return textwrap.wrap(text, cols, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def _pod_block(report: Report, pd: PodDiagnosis, cols: int) -> list[str]:
    since = pending_since(pd)
    waited = age(since, report.generated)
    when = f", pending for {waited} (since {since})" if waited else (f", pending since {since}" if since else "")
    lines = _wrap(f"{pd.pod.key}: " + ", ".join(pod_facts(pd)) + when, "", "    ", cols)
    pad = " " * (2 + KIND_WIDTH + 1)
    for reason in pd.reasons:
        view = reason_view(report.state, pd, reason)
        lines += _wrap(view.head, f"  {view.kind:<{KIND_WIDTH}} ", pad, cols)
        for item in view.items:
            lines += _wrap(item, pad + "- ", pad + "  ", cols)
        if view.hint:
            lines += _wrap(view.hint, pad + "> ", pad + "  ", cols)
    room = fits_now(pd)
    if room:
        lines += _wrap(room, f"  {'fits now':<{KIND_WIDTH}} ", pad, cols)
    elif not pd.reasons:
        lines += _wrap("no reason found in the input", f"  {'unknown':<{KIND_WIDTH}} ", pad, cols)
    return lines


def _workload_block(w: WorkloadDiagnosis, cols: int) -> list[str]:
    lines = _wrap(f"{workload_heading(w)}: no pods yet", "", "    ", cols)
    pad = " " * (2 + KIND_WIDTH + 1)
    for reason in w.reasons:
        view = workload_reason_view(reason)
        lines += _wrap(view.head, f"  {view.kind:<{KIND_WIDTH}} ", pad, cols)
        for item in view.items:
            lines += _wrap(item, pad + "- ", pad + "  ", cols)
        if view.hint:
            lines += _wrap(view.hint, pad + "> ", pad + "  ", cols)
    return lines


def _pools(report: Report) -> list[str]:
    pools = report.diagnosis.pools
    if not pools:
        return ["GPU pools: none (no node advertises or is labelled with GPUs)"]
    idle_known = any(p.idle is not None for p in pools)
    headers = ["pool", "resource", "nodes", "allocatable", "allocated", "reserved", "free",
               *(["idle"] if idle_known else []), "unhealthy", "unavailable nodes"]
    rows = []
    for view in pools:
        p = view.pool
        idle = [str(view.idle) if view.idle is not None else "-"] if idle_known else []
        rows.append([p.name, p.resource, str(p.nodes), str(p.allocatable), str(p.allocated), str(p.reserved),
                     str(p.free), *idle, str(p.unhealthy), str(p.unavailable_nodes)])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        out = [c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(out).rstrip()

    return ["GPU pools", line(headers), *(line(r) for r in rows),
            "  reserved: held for pods nominated by preemption; unavailable: cordoned or NotReady"]


def render(report: Report, quiet: bool = False) -> str:
    """The report; ``quiet``: the pods' blocks only (no heading, pools or notes)."""
    cols = width()
    if quiet:
        blocks = ["\n".join(_pod_block(report, pd, cols)) for pd in report.pods]
        blocks += ["\n".join(_workload_block(w, cols)) for w in report.workloads]
        return "\n\n".join(blocks) + "\n" if blocks else ""
    lines = _wrap("gpuguard why-pending: " + report.headline(), "", "    ", cols)
    lines += _wrap(report.input_line(), "", "    ", cols)
    lines += _wrap(report.utilization_line(), "", "    ", cols)
    for pd in report.pods:
        lines.append("")
        lines += _pod_block(report, pd, cols)
    for w in report.workloads:
        lines.append("")
        lines += _workload_block(w, cols)
    lines.append("")
    lines += _pools(report)
    notes = report.all_notes()
    if notes:
        lines += ["", "notes:"]
        for note in notes:
            lines += _wrap(note, "  - ", "    ", cols)
    return "\n".join(lines) + "\n"
