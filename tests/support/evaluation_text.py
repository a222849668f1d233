"""An Evaluation as canonical text lines: what the engine fingerprint (.ci/engine_fingerprint.py)
digests and what the warm-vs-fresh harness compares, in one place."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from policies.engine import Evaluation


def canon(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=repr).decode()


def evaluation_lines(ev: Evaluation) -> Iterator[str]:
    """Findings (every field), skipped rules, placeholders, ignore-annotation uses, the exemption
    flags and the combined patch."""
    for f in ev.findings:
        yield "finding " + canon(f.to_dict() | {"severity_value": int(f.severity)})
    yield "skipped " + canon(list(ev.skipped_rules))
    yield "placeholders " + canon([[p.path, p.text, p.what] for p in ev.placeholders])
    yield "ignore " + canon([[u.pointer, u.rules, u.unknown, u.honoured] for u in ev.ignore_uses])
    yield f"flags exempt={ev.exempt} gpu_related={ev.gpu_related}"
    yield "patch " + canon([op.to_dict() for op in ev.patch()])
