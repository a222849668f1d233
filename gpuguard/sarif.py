"""SARIF 2.1.0 pieces every face shares: the rule catalogue as ``reportingDescriptor``s and the log.

``gpuguard lint`` places results in files (``physicalLocation``); ``gpuguard audit`` names the
cluster objects they are about (``logicalLocations``) and, for dumps, the file and line the
object was read from.  Both describe the rules the same way: a short and a full description, the
rule's documentation (its module docstring) as ``help.text`` and, converted to GitHub-flavoured
Markdown, as ``help.markdown`` (what GitHub code scanning shows), and a ``helpUri`` at the rule's
row of the README's Rules table in the release that produced the log.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from policies.registry import RULES
from policies.rule import rule_doc
from policies.types import Severity

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


# The project's home, as the README (pipx, pre-commit, git clone), action.yml's users and the Helm
# chart (Chart.yaml home/sources) name it; tests/gpuguard/test_sarif.py checks the README agrees.
REPOSITORY = "https://github.com/gpuguard/gpuguard"
UNKNOWN_VERSION = "0.0.0"


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuguard")
    except PackageNotFoundError:
        return UNKNOWN_VERSION


def rule_anchor(rule_id: str) -> str:
    """The id of the rule's anchor in README.md (an ``<a id>`` in its row of the Rules table)."""
    return f"rule-{rule_id}"


def help_uri(rule_id: str, version: str | None = None) -> str:
    """The rule's row of the README's Rules table at the release tag (``main`` when not installed)."""
    version = tool_version() if version is None else version
    ref = "main" if version == UNKNOWN_VERSION else f"v{version}"
    return f"{REPOSITORY}/blob/{ref}/README.md#{rule_anchor(rule_id)}"


# --- rule docstrings (reStructuredText as the rules write it) to GitHub-flavoured Markdown --------
#
# What the docstrings use (policies/rules/*.py): paragraphs of wrapped lines, ``* `` bullet lists
# with indented continuation lines, literal blocks introduced by a paragraph ending in ``::``,
# ``literal`` text, *emphasis* and **strong** (the same in Markdown).

_RST_LITERAL = re.compile(r"``(.+?)``")
_MD_LITERAL = re.compile(r"`([^`]+)`")
# Punctuation Markdown would read as markup (HTML, links, code, escapes); in rST text it is text.
_MD_PUNCTUATION = re.compile(r"([\\`<>\[\]])")
_MD_EMPHASIS = re.compile(r"([\\`<>\[\]*]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_BULLET = re.compile(r"([*-]) +")


def _code_span(code: str) -> str:
    fence = "`" * (max((len(run) for run in re.findall(r"`+", code)), default=0) + 1)
    pad = " " if code[:1] in "` " or code[-1:] in "` " else ""
    return f"{fence}{pad}{code}{pad}{fence}"


def inline_markdown(text: str, literal: re.Pattern[str] = _RST_LITERAL, emphasis: bool = True) -> str:
    """``text`` with its ``literal`` spans as code spans and everything else escaped where Markdown
    would take it for markup (``*``/``_`` too unless ``emphasis`` keeps them for rST emphasis)."""
    escape = _MD_PUNCTUATION if emphasis else _MD_EMPHASIS
    out, at = [], 0
    for m in literal.finditer(text):
        out += [escape.sub(r"\\\1", text[at : m.start()]), _code_span(m.group(1))]
        at = m.end()
    out.append(escape.sub(r"\\\1", text[at:]))
    return "".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _prose(lines: list[str]) -> list[str]:
    """One paragraph: text, or ``* `` list items (with the text before the first one), as Markdown."""
    base = _indent(lines[0])
    blocks: list[str] = []
    items: list[list[str]] = []
    text: list[str] = []
    for line in lines:
        if _indent(line) == base and _BULLET.match(line.strip()):
            items.append([_BULLET.sub("", line.strip(), count=1)])
        elif items:
            items[-1].append(line.strip())
        else:
            text.append(line.strip())
    if text:
        blocks.append(inline_markdown(" ".join(text)))
    if items:
        blocks.append("\n".join("- " + inline_markdown(" ".join(item)) for item in items))
    return blocks


def _fenced(lines: list[str]) -> str:
    while not lines[0].strip():
        lines = lines[1:]
    while not lines[-1].strip():
        lines = lines[:-1]
    margin = min(_indent(line) for line in lines if line.strip())
    code = "\n".join(line[margin:].rstrip() for line in lines)
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", code)), default=0) + 1)
    return f"{fence}\n{code}\n{fence}"


def docstring_markdown(doc: str) -> str:
    """A rule's docstring as GitHub-flavoured Markdown: paragraphs unwrapped, ``* `` lists as
    ``- `` lists, ``::`` literal blocks as fenced code, ````literal```` as code spans."""
    lines = doc.expandtabs().split("\n")
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].strip():
            i += 1
        para = lines[start:i]
        literal = para[-1].rstrip().endswith("::")
        if literal:
            last = para[-1].rstrip()
            if last.strip() == "::":
                para = para[:-1]
            else:
                para[-1] = last[:-3] if last.endswith(" ::") else last[:-1]
        if para:
            blocks += _prose(para)
        if literal:
            base = _indent(lines[start])
            body_start = i
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
                i += 1
            if any(line.strip() for line in lines[body_start:i]):
                blocks.append(_fenced(lines[body_start:i]))
    return "\n\n".join(blocks)


def rule_descriptor(rule_id: str) -> dict[str, Any]:
    module = RULES[rule_id]
    doc = rule_doc(module)
    first = doc.split("\n\n", 1)[0].replace("\n", " ")
    remediation = inline_markdown(module.REMEDIATION, _MD_LITERAL, emphasis=False)
    return {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in rule_id.split("-")),
        "shortDescription": {"text": module.SUMMARY},
        "fullDescription": {"text": first},
        "helpUri": help_uri(rule_id),
        "help": {
            "text": f"{doc}\n\nRemediation: {module.REMEDIATION}",
            "markdown": f"{docstring_markdown(doc)}\n\n**Remediation:** {remediation}",
        },
        "defaultConfiguration": {"level": LEVEL[module.DEFAULT_SEVERITY]},
        "properties": {"needsFacts": module.NEEDS_FACTS, "fixable": bool(module.FIXABLE)},
    }


def rule_index() -> dict[str, int]:
    """Each rule id's index in the ``rules`` array of :func:`log`."""
    return {rid: i for i, rid in enumerate(RULES)}


def log(results: Sequence[dict[str, Any]], notifications: Sequence[dict[str, Any]],
        run_properties: dict[str, Any] | None = None) -> dict[str, Any]:
    """A SARIF log with one run of gpuguard: every rule described, the results, and the input
    errors as tool execution notifications."""
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "gpuguard",
                "version": tool_version(),
                "rules": [rule_descriptor(rid) for rid in RULES],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not notifications,
                "toolExecutionNotifications": list(notifications),
            }
        ],
        "results": list(results),
    }
    if run_properties:
        run["properties"] = run_properties
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}
