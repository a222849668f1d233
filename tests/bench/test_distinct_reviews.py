"""The webhook benchmark's reviews are valid, distinct, and exercise the rules."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from policies.engine import evaluate
from policies.facts import MEMO_LIMIT
from policies.podspec import extract
from policies.template_inputs import template_key
from webhook import admission

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Config()


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distinct_reviews", ROOT / "bench" / "distinct_reviews.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("distinct_reviews", module)
    spec.loader.exec_module(module)
    return module


def _memo_keys(obj: Any) -> tuple[Any, ...]:
    """The rule-results memo keys of an object's templates (policies.template_inputs.inputs_key)."""
    config = CONFIG
    return tuple(
        template_key(t, obj)
        for t in extract(obj, config.workload_index)
    )


def test_pods_arrive_as_the_api_server_sends_them() -> None:
    for body in _module().reviews(40):
        req = admission.parse_review(body)
        assert req.obj is not None
        if req.kind != "Pod":
            continue
        (token,) = [v for v in req.obj["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
        assert "projected" in token and len(token["name"]) == len("kube-api-access-") + 5
        for c in req.obj["spec"]["containers"]:
            assert {"name": token["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"} in c["volumeMounts"]


def test_replicas_are_distinct_pods_of_shared_templates() -> None:
    bodies = _module().replica_reviews(60, replicas=10)
    requests = [admission.parse_review(body) for body in bodies]
    assert len(requests) == 60 and all(r.kind == "Pod" and r.operation == "CREATE" for r in requests)
    assert len({r.uid for r in requests}) == 60 and len({r.name for r in requests}) == 60
    assert len({orjson.dumps(r.obj["spec"] if r.obj else None) for r in requests}) == 60
    keys = [_memo_keys(r.obj) for r in requests]
    assert [len(set(keys[i:i + 10])) for i in range(0, 60, 10)] == [1] * 6  # a template's replicas share one
    assert len(set(keys)) == 6


def test_reviews_are_valid_and_all_different() -> None:
    bodies = _module().reviews(MEMO_LIMIT + 500)
    requests = [admission.parse_review(body) for body in bodies]
    assert len({r.uid for r in requests}) == len(requests)
    specs = {hashlib.sha256(orjson.dumps(r.obj["spec"] if r.obj else None)).digest() for r in requests}
    assert len(specs) == len(requests)
    assert len({_memo_keys(r.obj) for r in requests}) == len(requests)  # more than the memo holds
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
