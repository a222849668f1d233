"""Template rules see ``TemplateInputs`` and nothing else, and the memo key is derived from them."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from policies.digest import DERIVED
from policies.engine import evaluate, judge, prepare
from policies.facts import ClusterFacts
from policies.podspec import ContainerRef, PodTemplate, extract
from policies.rule import RuleContext
from policies.rule_inputs import UNREAD
from policies.rules import gpu_shared_memory
from policies.template_inputs import ObjectInputs, TemplateInputs, inputs_key, object_inputs, template_inputs
from policies.types import Violation
from tests.support.paths import EXAMPLES

RULE = "gpu-shared-memory"
CHECK_FAILED = "gpu-check-failed"


def _pod(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "labels": labels or {"app": "train"},
                     "annotations": annotations or {}},
        "spec": {"hostname": "train-0", "containers": [{
            "name": "worker", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "env": [{"name": "RANK", "value": "0"}, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute"}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }]},
    }


def _with_rule(monkeypatch: pytest.MonkeyPatch, check: Callable[[RuleContext], Iterator[Violation]]) -> None:
    monkeypatch.setattr(gpu_shared_memory, "check", check)


def _messages(obj: dict[str, Any], facts: ClusterFacts | None = None) -> list[tuple[str, str]]:
    return [(f.rule, f.message) for f in evaluate(obj, Config(), facts or ClusterFacts.empty()).findings
            if f.rule in (RULE, CHECK_FAILED)]


def test_a_rule_cannot_reach_the_raw_object(monkeypatch: pytest.MonkeyPatch) -> None:
    def reads_the_object(ctx: RuleContext) -> Iterator[Violation]:
        yield Violation(message=str(ctx.obj["metadata"]["labels"]))  # type: ignore[attr-defined]

    _with_rule(monkeypatch, reads_the_object)
    ((rule, message),) = _messages(_pod())
    assert rule == CHECK_FAILED and "AttributeError" in message and f"rule {RULE} failed" in message


def test_a_rule_sees_only_what_the_key_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels, annotations outside gpuguard.io/, unread variables and the hostname are not there
    (or are stand-ins): a rule cannot base an answer on them."""
    seen: list[Any] = []

    def looks(ctx: RuleContext) -> Iterator[Violation]:
        pod = ctx.pod
        seen.append((pod.metadata.get("labels"), dict(pod.annotations), dict(ctx.object.annotation_map()),
                     pod.spec["hostname"], pod.containers[0].container["env"], pod.spec["containers"][0]["env"]))
        return iter(())

    _with_rule(monkeypatch, looks)
    evaluate(_pod({"example.com/team": "vision", "gpuguard.io/cuda-version": "12.4"}), Config())
    ((labels, annotations, object_annotations, hostname, env, spec_env),) = seen
    assert labels is None
    assert annotations == object_annotations == {"gpuguard.io/cuda-version": "12.4"}
    assert hostname == UNREAD
    assert env == spec_env == [UNREAD, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute"}]


def test_the_experiment_cannot_recur(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that reads one more annotation once gave a byte-identical pod another pod's finding on
    warm facts.  Now the annotation is not in what it is given: warm and fresh answers agree."""

    def reads_an_annotation(ctx: RuleContext) -> Iterator[Violation]:
        if ctx.pod.annotations.get("example.com/needs-shm"):
            yield Violation(message="annotated")

    _with_rule(monkeypatch, reads_an_annotation)
    warm = load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
    annotated, plain = _pod({"example.com/needs-shm": "yes"}), _pod()
    for obj in (annotated, plain, annotated):
        fresh = load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
        assert _messages(obj, warm) == _messages(obj, fresh) == []


def test_the_key_covers_every_field_rules_are_given() -> None:
    """Changing any non-derived field of the inputs changes the key; derived fields are the only
    ones left out (a container's mapping is the spec's at its path)."""
    (pod,) = extract(_pod())
    base = template_inputs(pod, object_inputs(_pod(), False), frozenset())
    assert base.key is not None and len(base.key) == 16
    projected = base.pod
    changes: dict[str, Any] = {
        "spec_pointer": dataclasses.replace(base, pod=dataclasses.replace(projected, spec_pointer="/other")),
        "shape": dataclasses.replace(base, pod=dataclasses.replace(projected, shape="podspec")),
        "scheduling_known": dataclasses.replace(base, pod=dataclasses.replace(projected, scheduling_known=False)),
        "owner_supplied": dataclasses.replace(base, pod=dataclasses.replace(projected, owner_supplied=(("containers", 0),))),
        "kind": dataclasses.replace(base, of_object=dataclasses.replace(base.of_object, kind="Deployment")),
        "namespace": dataclasses.replace(base, of_object=dataclasses.replace(base.of_object, namespace="other")),
        "owned": dataclasses.replace(base, of_object=dataclasses.replace(base.of_object, cluster_policy_owned=True)),
        "ignored": dataclasses.replace(base, ignored=frozenset({RULE})),
        "dra_inputs": dataclasses.replace(base, dra_inputs=b"\x01" * 16),
        "a container's kind": dataclasses.replace(base, pod=dataclasses.replace(projected, containers=(
            ContainerRef(("containers", 0), projected.containers[0].container, "initContainer"),))),
    }
    keys = {what: inputs_key(changed) for what, changed in changes.items()}
    assert all(k is not None and k != base.key for k in keys.values()), keys
    assert len(set(keys.values())) == len(keys)
    derived = {(cls.__name__, f.name) for cls in (TemplateInputs, ObjectInputs, PodTemplate, ContainerRef)
               for f in dataclasses.fields(cls) if f.metadata.get(DERIVED)}
    assert derived == {("TemplateInputs", "key"), ("ContainerRef", "container")}


def test_containers_are_the_projected_spec_at_their_paths() -> None:
    (pod,) = extract(_pod())
    inputs = template_inputs(pod, object_inputs(_pod(), False), frozenset())
    assert inputs.loose_containers == ()
    assert inputs.pod.containers[0].container is inputs.pod.spec["containers"][0]
    assert pod.spec["containers"][0]["env"][0] == {"name": "RANK", "value": "0"}  # the original is untouched


def test_a_container_outside_the_spec_is_kept_whole_in_the_key() -> None:
    (pod,) = extract(_pod())
    stray = copy.deepcopy(pod.containers[0].container)
    odd = dataclasses.replace(pod, containers=(ContainerRef(("containers", 0), stray, "container"),))
    inputs = template_inputs(odd, object_inputs(_pod(), False), frozenset())
    assert inputs.loose_containers == (stray,)
    stray["image"] = "other:1"
    assert template_inputs(odd, object_inputs(_pod(), False), frozenset()).key != inputs.key


def test_replicas_have_equal_inputs() -> None:
    first, second = _pod(), _pod()
    second["metadata"]["labels"] = {"app": "train", "pod-template-hash": "7d9f"}
    second["spec"]["hostname"] = "train-1"
    second["spec"]["containers"][0]["env"][0]["value"] = "1"
    inputs = [prepare(o, Config()).judged[0].inputs for o in (first, second)]
    assert inputs[0] is not None and inputs[0] == inputs[1] and hash(inputs[0]) == hash(inputs[1])


def test_judge_of_prepare_is_evaluate() -> None:
    obj, config, facts = _pod(), Config(), load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
    prepared = prepare(obj, config, facts)
    assert [u.image for u in prepared.image_uses()] == ["nvcr.io/nvidia/pytorch:24.05-py3"]
    via_phases = judge(prepared).findings
    assert via_phases == evaluate(obj, config, facts).findings and via_phases
    # A prepared object is used only for the object, config and facts it was prepared with.
    other = _pod()
    other["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1.5"
    assert evaluate(other, config, facts, prepared=prepared).findings == evaluate(other, config, facts).findings
