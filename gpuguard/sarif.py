"""SARIF 2.1.0 pieces every face shares: the rule catalogue as ``reportingDescriptor``s and the log.

``gpuguard lint`` places results in files (``physicalLocation``); ``gpuguard audit`` names the
cluster objects they are about (``logicalLocations``) and, for dumps, the file and line the
object was read from.  Both describe the rules the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policies.registry import RULES
from policies.rule import rule_doc
from policies.types import Severity

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuguard")
    except PackageNotFoundError:
        return "0.0.0"


def rule_descriptor(rule_id: str) -> dict[str, Any]:
    module = RULES[rule_id]
    doc = rule_doc(module)
    first = doc.split("\n\n", 1)[0].replace("\n", " ")
    return {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in rule_id.split("-")),
        "shortDescription": {"text": module.SUMMARY},
        "fullDescription": {"text": first},
        "help": {"text": f"{doc}\n\nRemediation: {module.REMEDIATION}"},
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
