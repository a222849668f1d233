"""``gpuguard rules [ID]``: the rule catalogue, or one rule's documentation."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.rule import RuleModule


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rule_id", nargs="?", metavar="ID", help="show this rule's documentation")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


def _entry(module: RuleModule) -> dict[str, Any]:
    from policies.rule import rule_doc

    return {
        "id": module.ID,
        "severity": str(module.DEFAULT_SEVERITY),
        "needs_facts": module.NEEDS_FACTS,
        "fixable": bool(module.FIXABLE),
        "summary": module.SUMMARY,
        "remediation": module.REMEDIATION,
        "options": [
            {"name": o.name, "type": o.type_names(), "default": o.default, "doc": o.doc} for o in module.OPTIONS
        ],
        "doc": rule_doc(module),
    }


def _catalogue(rules: dict[str, RuleModule]) -> str:
    rows = [("ID", "SEVERITY", "FACTS", "FIX", "SUMMARY")]
    for rule_id, module in rules.items():
        fixable = "yes" if module.FIXABLE else "no"
        rows.append((rule_id, str(module.DEFAULT_SEVERITY), module.NEEDS_FACTS, fixable, module.SUMMARY))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in rows]
    lines.append("")
    lines.append("FACTS: whether the rule needs cluster facts (gpuguard lint --cluster FILE).")
    lines.append("gpuguard rules ID shows a rule's documentation.")
    return "\n".join(lines) + "\n"


def _detail(module: RuleModule) -> str:
    e = _entry(module)
    out = [
        e["id"],
        f"  default severity: {e['severity']}    needs cluster facts: {e['needs_facts']}    "
        f"fixable: {'yes' if e['fixable'] else 'no'}",
        "",
        e["doc"],
        "",
        "Options:",
    ]
    if e["options"]:
        for o in e["options"]:
            out.append(f"  {o['name']} ({o['type']}, default: {o['default']!r})")
            out.append(f"      {o['doc']}")
    else:
        out.append("  none")
    out += ["", f"Remediation: {e['remediation']}", ""]
    out.append(f"Configure it in .gpuguard.yaml under rules: {{{e['id']}: {{severity: error|warning|info|off}}}}")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    import json

    from policies.registry import RULES
    from policies.wording import did_you_mean, suggest

    if args.rule_id is None:
        if args.format == "json":
            sys.stdout.write(json.dumps([_entry(m) for m in RULES.values()], indent=2) + "\n")
        else:
            sys.stdout.write(_catalogue(RULES))
        return 0
    module = RULES.get(args.rule_id)
    if module is None:
        close = suggest(args.rule_id, RULES, limit=3, cutoff=0.5)
        hint = f"; {did_you_mean(close)}" if close else "; `gpuguard rules` lists them"
        sys.stderr.write(f"gpuguard rules: unknown rule {args.rule_id!r}{hint}\n")
        return 2
    if args.format == "json":
        sys.stdout.write(json.dumps(_entry(module), indent=2, default=str) + "\n")
    else:
        sys.stdout.write(_detail(module))
    return 0
