"""Memo keys are typed: every ``ClusterFacts.memoised`` key is built from a key class, never a string
or an ad-hoc tuple that another module could spell the same way by accident (a stale verdict)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT

SOURCES = ("policies", "gpuguard", "webhook", "linter", "audit", "whypending")


def _memo_calls() -> list[tuple[Path, ast.Call]]:
    calls = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "memoised":
                    calls.append((path, node))
    return calls


def _key_expression(path: Path, call: ast.Call) -> ast.expr:
    key = call.args[0]
    if isinstance(key, ast.Name):  # a variable: find what it was last assigned in the same function
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef) and func.lineno <= call.lineno <= (func.end_lineno or 0):
                assigned = sorted(
                    (n for n in ast.walk(func)
                     if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == key.id for t in n.targets)
                     and n.lineno < call.lineno and not (isinstance(n.value, ast.Constant) and n.value.value is None)),
                    key=lambda n: n.lineno,
                )  # the last assignment in the source (None means no memo, so it is never a key)
                if assigned:
                    return assigned[-1].value
    return key


def _is_typed(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Call):
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name.endswith("Key") or name == "replace"  # dataclasses.replace of a key object
    return False


def test_there_are_memoised_values_and_loose_keys_are_recognised() -> None:
    assert len(_memo_calls()) >= 10
    for loose in ('"resource_names"', '("effective-facts", id(config))', "some_function(x)"):
        assert not _is_typed(ast.parse(loose, mode="eval").body)
    assert _is_typed(ast.parse("RulePlanKey(id(config))", mode="eval").body)


def test_every_memo_key_is_built_from_a_key_class() -> None:
    loose = []
    for path, call in _memo_calls():
        expr = _key_expression(path, call)
        if not _is_typed(expr):
            loose.append(f"{path.relative_to(ROOT)}:{call.lineno}: {ast.unparse(expr)}")
    assert loose == []


def test_memo_keys_hold_no_user_text_however_large_it_is() -> None:
    """Every key a review leaves in the memo is small, whatever strings the object carries (a
    GPU resource name of the ``nvidia.com/`` family 100 KB long, huge selectors, images, names)."""
    import sys

    from gpuguard.sources.snapshot import load_cluster_facts
    from policies.config import Config
    from policies.engine import evaluate
    from policies.facts import ClusterFacts
    from tests.support.paths import EXAMPLES

    huge = "x" * 100_000
    facts: ClusterFacts = load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
    config = Config()
    for n in range(5):
        resources = {"limits": {f"nvidia.com/mig-{huge}{n}": "1", "nvidia.com/gpu": "2", f"example.com/{huge}": "1"}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": huge, "namespace": "ml",
                                                               "annotations": {huge: huge}},
               "spec": {"nodeSelector": {f"k{n}": huge}, "runtimeClassName": huge, "hostname": huge,
                        "tolerations": [{"key": huge, "operator": "Exists"}],
                        "containers": [{"name": huge, "image": f"{huge}:{n}", "resources": resources,
                                        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": huge}]}]}}
        evaluate(pod, config, facts)
    memo = {**facts._memo, **facts._pinned}  # type: ignore[attr-defined]
    assert len(memo) > 5
    sizes = {type(k).__name__: len(repr(k)) for k in memo}
    assert max(sizes.values()) < 2_000, sizes
    assert sum(sys.getsizeof(k) for k in memo) < 100_000
