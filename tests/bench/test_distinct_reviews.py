"""The webhook benchmark's reviews are valid, distinct, and exercise the rules."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import orjson

from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from policies.engine import evaluate
from policies.facts import MEMO_LIMIT
from webhook import admission

ROOT = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distinct_reviews", ROOT / "bench" / "distinct_reviews.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("distinct_reviews", module)
    spec.loader.exec_module(module)
    return module


def test_reviews_are_valid_and_all_different() -> None:
    bodies = _module().reviews(MEMO_LIMIT + 500)
    requests = [admission.parse_review(body) for body in bodies]
    assert len({r.uid for r in requests}) == len(requests)
    specs = {hashlib.sha256(orjson.dumps(r.obj["spec"] if r.obj else None)).digest() for r in requests}
    assert len(specs) == len(requests)  # more distinct templates than the memo holds
    kinds = Counter(r.kind for r in requests)
    assert kinds["Pod"] > 0.8 * len(requests) and {"Deployment", "Job", "StatefulSet"} <= set(kinds)


def test_reviews_mix_passing_and_failing_objects() -> None:
    facts = load_cluster_facts(str(ROOT / "examples" / "cluster.yaml"))
    config = Config()
    verdicts = [
        admission.validate(admission.parse_review(body), config, facts, evaluate) for body in _module().reviews(400)
    ]
    denied = sum(not v.allowed for v in verdicts)
    warned = sum(bool(v.warnings) for v in verdicts)
    assert 0.03 * len(verdicts) < denied < 0.3 * len(verdicts)
    assert warned > 0.2 * len(verdicts)


def test_same_seed_same_reviews() -> None:
    module = _module()
    assert module.reviews(20) == module.reviews(20)
    assert module.reviews(20, seed=1) != module.reviews(20)
