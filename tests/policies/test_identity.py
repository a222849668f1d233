"""Finding identity across two versions of an object (UPDATE reviews, audit's before/after)."""

from __future__ import annotations

import copy
from typing import Any

from policies import evaluate
from policies.identity import finding_key, new_findings, stable_path


def deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
        "spec": {"template": {"spec": {"containers": list(containers)}}},
    }


def gpu(name: str, limit: bool) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"nvidia.com/gpu": "1"}}
    if limit:
        res["limits"] = {"nvidia.com/gpu": "1"}
    return {"name": name, "image": "x", "resources": res}


def test_named_list_elements_are_identified_by_name() -> None:
    obj = deployment(gpu("a", True), gpu("b", False))
    assert stable_path(obj, "/spec/template/spec/containers/1/resources/requests/nvidia.com~1gpu") == (
        "/spec/template/spec/containers/[b]/resources/requests/nvidia.com~1gpu"
    )


def test_unnamed_elements_and_missing_fields_keep_their_tokens() -> None:
    obj = {"spec": {"tolerations": [{"key": "a"}], "x": {}}}
    assert stable_path(obj, "/spec/tolerations/0/key") == "/spec/tolerations/0/key"
    assert stable_path(obj, "/spec/x/limits/a~1b") == "/spec/x/limits/a~1b"
    assert stable_path(obj, "") == ""


def test_moving_a_container_keeps_its_finding() -> None:
    old = deployment(gpu("a", True), gpu("b", False))
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"].reverse()
    old_f, new_f = evaluate(old).blocking(), evaluate(new).blocking()
    assert [f.path for f in old_f] != [f.path for f in new_f]
    assert {finding_key(old, f) for f in old_f} == {finding_key(new, f) for f in new_f}
    assert new_findings(new, new_f, old, old_f) == []


def test_a_new_container_with_the_same_problem_is_new() -> None:
    old = deployment(gpu("a", False))
    new = deployment(gpu("a", False), gpu("c", False))
    introduced = new_findings(new, evaluate(new).blocking(), old, evaluate(old).blocking())
    assert [f.path for f in introduced] == ["/spec/template/spec/containers/1/resources/requests/nvidia.com~1gpu"]
