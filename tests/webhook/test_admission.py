"""The webhook in-process: envelope checks, verdicts, engine faults and metrics (no TLS here)."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import orjson
import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies.config import Config
from policies.engine import evaluate
from policies.facts import ClusterFacts
from policies.rules import gpu_limit_missing
from tests.support.paths import CORPUS, FIXTURES
from webhook import admission
from webhook.app import StaticFacts, create_app
from webhook.metrics import Metrics

ADMISSION = FIXTURES / "admission"
DENY = ADMISSION / "pod-gpu-request-without-limit.json"
CORPUS_REVIEWS = CORPUS / "admission-reviews"


def review_bytes(path: Path) -> bytes:
    return path.read_bytes()


def review_dict(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def post(app: Any, path: str, body: bytes | dict[str, Any]) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://webhook") as client:
            return await client.post(path, content=content, headers={"content-type": "application/json"})

    return asyncio.run(go())


def get(app: Any, path: str) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook") as client:
            return await client.get(path)

    return asyncio.run(go())


# --- envelope ---------------------------------------------------------------------------------

def _mutated(change: Any) -> bytes:
    review = review_dict(DENY)
    change(review)
    return orjson.dumps(review)


BAD_ENVELOPES = {
    "not json": b"{not json",
    "empty body": b"",
    "json array": b"[]",
    "v1beta1": _mutated(lambda r: r.update(apiVersion="admission.k8s.io/v1beta1")),
    "wrong kind": _mutated(lambda r: r.update(kind="AdmissionRequest")),
    "no request": _mutated(lambda r: r.pop("request")),
    "request is a list": _mutated(lambda r: r.update(request=[])),
    "no uid": _mutated(lambda r: r["request"].pop("uid")),
    "uid not a string": _mutated(lambda r: r["request"].update(uid=7)),
    "bad operation": _mutated(lambda r: r["request"].update(operation="PATCH")),
    "no request.kind": _mutated(lambda r: r["request"].pop("kind")),
    "object is a string": _mutated(lambda r: r["request"].update(object="pod")),
    "object without kind": _mutated(lambda r: r["request"]["object"].pop("kind")),
    "metadata is a list": _mutated(lambda r: r["request"]["object"].update(metadata=[])),
    "dryRun not a bool": _mutated(lambda r: r["request"].update(dryRun="yes")),
}


@pytest.mark.parametrize("body", BAD_ENVELOPES.values(), ids=BAD_ENVELOPES.keys())
def test_bad_envelope_is_rejected_with_a_reason(body: bytes) -> None:
    with pytest.raises(admission.EnvelopeError) as info:
        admission.parse_review(body)
    assert str(info.value)


def _corpus_files() -> list[Path]:
    return sorted(CORPUS_REVIEWS.glob("*")) if CORPUS_REVIEWS.is_dir() else []


@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: p.name[:60])
def test_corpus_payloads_are_not_v1_reviews(path: Path) -> None:
    """Bare AdmissionRequests and v1beta1 YAML reviews from public repos are refused, as JSON too."""
    raw = path.read_bytes()
    with pytest.raises(admission.EnvelopeError):
        admission.parse_review(raw)
    if path.suffix in (".yaml", ".yml"):
        as_json = orjson.dumps(yaml.safe_load(raw))
        with pytest.raises(admission.EnvelopeError, match="apiVersion"):
            admission.parse_review(as_json)


def test_corpus_bare_request_is_answered_once_wrapped() -> None:
    """The same bytes wrapped in a v1 envelope are a valid review and get an allowed verdict."""
    bare = json.loads((CORPUS_REVIEWS / "kubewarden__container-resources-policy__test_data__"
                       "pod_without_resources.json").read_text())
    review = {"apiVersion": admission.API_VERSION, "kind": admission.KIND, "request": bare}
    req = admission.parse_review(orjson.dumps(review))
    verdict = admission.validate(req, load_config(None), ClusterFacts.empty(), evaluate)
    assert req.uid == bare["uid"] and verdict.allowed


# --- verdict wording ---------------------------------------------------------------------------

def test_warnings_fit_the_limit_and_lead_with_rule_and_reason(example_facts: ClusterFacts) -> None:
    paths = sorted(ADMISSION.glob("*.json"))
    seen = 0
    for path in paths:
        req = admission.parse_review(review_bytes(path))
        verdict = admission.validate(req, load_config(None), example_facts, evaluate)
        for finding, text in ((f, admission.short_warning(f)) for f in verdict.findings):
            assert len(text) <= admission.WARNING_LIMIT
            assert text.startswith(f"{finding.rule}: {admission.first_clause(finding.message)[:40]}")
            seen += 1
    assert seen > 0


def test_a_template_that_is_no_object_is_admitted_with_a_warning() -> None:
    """Only a custom resource without a schema reaches a webhook so (here a kind declared through
    podTemplatePaths): nothing is known to be wrong, so it is admitted, but not silently."""
    config = load_config({"podTemplatePaths": [{"apiVersion": "example.com/v1", "kind": "Trainer",
                                                "template": "/spec/worker/template"}]})
    obj = {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t", "namespace": "ml"},
           "spec": {"worker": {"template": "gpu-template-v2"}}}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u1", "kind": {"group": "example.com", "version": "v1", "kind": "Trainer"},
        "resource": {"group": "example.com", "version": "v1", "resource": "trainers"},
        "namespace": "ml", "name": "t", "operation": "CREATE", "object": obj}}
    verdict = admission.validate(admission.parse_review(orjson.dumps(body)), config, ClusterFacts.empty(), evaluate)
    assert verdict.allowed is True
    assert verdict.warnings == [
        "gpuguard cannot check it: a string where a pod template or spec (an object) belongs, at spec.worker.template"
    ]
    obj["spec"] = {"worker": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    fine = copy.deepcopy(body)
    assert admission.validate(admission.parse_review(orjson.dumps(fine)), config, ClusterFacts.empty(),
                              evaluate).warnings == []


def test_denial_message_lists_rule_dotted_path_and_fix() -> None:
    req = admission.parse_review(review_bytes(ADMISSION / "pytorchjob-gpu-request-without-limit.json"))
    verdict = admission.validate(req, load_config(None), ClusterFacts.empty(), evaluate)
    blocking = [f for f in verdict.findings if f.severity.name == "ERROR"]
    assert not verdict.allowed and len(blocking) == 2
    for role in ("Master", "Worker"):
        assert (
            f"[gpu-limit-missing] spec.pytorchReplicaSpecs.{role}.template.spec.containers[0]"
            ".resources.requests[nvidia.com/gpu]" in verdict.message
        )
    assert verdict.message.count(f"(fix: {gpu_limit_missing.REMEDIATION})") == 2
    assert "PyTorchJob ml/llama-finetune" in verdict.message


def test_validating_response_never_carries_a_patch() -> None:
    req = admission.parse_review(review_bytes(DENY))
    config = load_config({"mutate": ["gpu-limit-missing"]})
    facts = ClusterFacts.empty()
    out = orjson.loads(admission.encode_response(req.uid, admission.validate(req, config, facts, evaluate)))
    assert "patch" not in out["response"] and "patchType" not in out["response"]
    out = orjson.loads(admission.encode_response(req.uid, admission.mutate(req, config, facts, evaluate)))
    assert out["response"]["patchType"] == "JSONPatch" and out["response"]["allowed"] is True


def test_mutate_without_configured_fixes_returns_no_patch() -> None:
    req = admission.parse_review(review_bytes(DENY))
    verdict = admission.mutate(req, load_config(None), ClusterFacts.empty(), evaluate)
    assert verdict.allowed and verdict.patch is None


def test_mutation_is_minimal_and_idempotent_in_process() -> None:
    review = review_dict(ADMISSION / "deployment-gpu-request-without-limit.json")
    config = load_config({"mutate": ["gpu-limit-missing"], "mutateTemplates": True})
    req = admission.parse_review(orjson.dumps(review))
    verdict = admission.mutate(req, config, ClusterFacts.empty(), evaluate)
    assert verdict.patch is not None
    assert all(op["path"].startswith("/spec/template/spec/containers/0/resources") for op in verdict.patch)
    patched = jsonpatch.apply_patch(review["request"]["object"], verdict.patch)
    # Nothing but the limit changed: the rest of the object is byte-for-byte what was sent.
    original = copy.deepcopy(review["request"]["object"])
    original["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "4"}
    assert patched == original
    review["request"]["object"] = patched
    again = admission.mutate(admission.parse_review(orjson.dumps(review)), config, ClusterFacts.empty(), evaluate)
    assert again.patch is None


# --- the app in-process: faults and metrics -----------------------------------------------------

def _boom(ctx: Any) -> Any:
    raise RuntimeError("rule exploded")


@pytest.mark.parametrize("mode", ["allow", "deny"])
def test_a_failing_rule_is_a_finding_not_an_admission(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that raises on an object is reported as gpu-check-failed and denies it, whatever
    failureMode says: crashing the engine must not buy an admission."""
    app = create_app(load_config({"failureMode": mode}), StaticFacts())
    monkeypatch.setattr(gpu_limit_missing, "check", _boom)
    answer = post(app, "/validate", review_dict(ADMISSION / "pod-gpu-with-limit.json")).json()["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 403
    assert "[gpu-check-failed]" in answer["status"]["message"]
    assert "rule gpu-limit-missing failed on this pod template (RuntimeError: rule exploded)" in answer["status"]["message"]


@pytest.mark.parametrize("mode", ["allow", "deny"])
def test_infrastructure_failure_follows_failure_mode_and_server_keeps_serving(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """failureMode decides only when the webhook itself fails (here its evaluator)."""
    metrics = Metrics()
    failing = {"on": True}

    def evaluator(obj: dict[str, Any], config: Config, facts: ClusterFacts) -> Any:
        if failing["on"]:
            raise RuntimeError("facts source exploded")
        return evaluate(obj, config, facts)

    app = create_app(load_config({"failureMode": mode}), StaticFacts(), metrics=metrics, evaluator=evaluator)
    body = review_dict(DENY)
    resp = post(app, "/validate", body)
    assert resp.status_code == 200
    answer = resp.json()["response"]
    assert answer["uid"] == body["request"]["uid"]
    if mode == "allow":
        assert answer["allowed"] is True and answer["warnings"] == [admission.ENGINE_FAILURE_WARNING]
    else:
        assert answer["allowed"] is False and answer["status"]["code"] == 500
    assert body["request"]["uid"] in caplog.text and "facts source exploded" in caplog.text
    assert metrics.errors[("validate", "engine_error")] == 1
    # /mutate never denies on a fault, and returns no patch.
    mutate = post(app, "/mutate", body).json()["response"]
    assert mutate["allowed"] is True and "patch" not in mutate
    # The fault is gone: the same app answers normally again.
    failing["on"] = False
    normal = post(app, "/validate", body).json()["response"]
    assert normal["allowed"] is False and normal["status"]["code"] == 403


def test_metrics_count_reviews_findings_and_latency() -> None:
    app = create_app(load_config(None), StaticFacts())
    post(app, "/validate", review_dict(DENY))
    post(app, "/validate", review_dict(ADMISSION / "pod-gpu-with-limit.json"))
    post(app, "/validate", b"{")
    text = get(app, "/metrics").text
    reviews = 'gpuguard_admission_reviews_total{endpoint="validate",kind="Pod",operation="CREATE",allowed='
    assert reviews + '"false"} 1' in text and reviews + '"true"} 1' in text
    assert 'gpuguard_findings_total{rule="gpu-limit-missing",severity="error"} 1' in text
    assert 'gpuguard_admission_review_duration_seconds_count{endpoint="validate"} 2' in text
    assert 'gpuguard_admission_review_duration_seconds_bucket{endpoint="validate",le="+Inf"} 2' in text
    assert 'gpuguard_admission_errors_total{endpoint="validate",reason="bad_request"} 1' in text
    for line in text.splitlines():  # every sample line is "name{labels} number"
        if not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])


def test_readyz_waits_for_facts() -> None:
    class Pending:
        ready = False

        def current(self) -> ClusterFacts:
            return ClusterFacts.empty()

        def age_seconds(self) -> float | None:
            return None

        def lag_seconds(self) -> float | None:
            return 2.5

        def publishing(self) -> dict[str, float] | None:
            return None

    waiting = get(create_app(load_config(None), Pending()), "/readyz")
    assert waiting.status_code == 503 and waiting.json()["factsLagSeconds"] == 2.5
    ready = get(create_app(load_config(None), StaticFacts()), "/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True


def test_patch_is_base64_json_patch() -> None:
    app = create_app(load_config({"mutate": ["gpu-limit-missing"]}), StaticFacts())
    answer = post(app, "/mutate", review_dict(DENY)).json()["response"]
    ops = json.loads(base64.b64decode(answer["patch"]))
    assert ops == [{"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"}]


@pytest.mark.parametrize(
    ("message", "clause"),
    [
        ("container 'a' has no memory limit; it can exhaust memory", "container 'a' has no memory limit"),
        ("image x needs CUDA 12 (from tag; native 550), some nodes fail — t4", "image x needs CUDA 12 (from tag; native 550), some nodes fail"),
        ("no separator here", "no separator here"),
    ],
)
def test_first_clause_cuts_outside_parentheses(message: str, clause: str) -> None:
    assert admission.first_clause(message) == clause


def test_large_review_is_evaluated_off_the_loop_and_answered() -> None:
    from webhook.lanes import LaneLimits

    INLINE_BODY_BYTES = LaneLimits().inline_body_bytes
    review = review_dict(DENY)
    containers = review["request"]["object"]["spec"]["containers"]
    template = containers[0]
    containers[:] = [{**copy.deepcopy(template), "name": f"shard-{i}"} for i in range(1500)]
    body = orjson.dumps(review)
    assert len(body) > INLINE_BODY_BYTES
    response = post(create_app(load_config(None), StaticFacts()), "/validate", body)
    assert response.status_code == 200
    answer = response.json()["response"]
    assert answer["uid"] == review["request"]["uid"] and answer["allowed"] is False
    assert "1500 GPU policy violations" in answer["status"]["message"]
    assert answer["status"]["message"].endswith("... and 1480 more (run `gpuguard lint` on the manifest)")


def test_warnings_are_capped() -> None:
    review = review_dict(DENY)
    containers = review["request"]["object"]["spec"]["containers"]
    template = containers[0]
    containers[:] = [{**copy.deepcopy(template), "name": f"c{i}"} for i in range(50)]
    config = load_config({"rules": {"gpu-limit-missing": {"severity": "warning"}}})
    answer = post(create_app(config, StaticFacts()), "/validate", review).json()["response"]
    assert answer["allowed"] is True
    *kept, summary = answer["warnings"]
    assert len(kept) < admission.WARNING_MAX_COUNT
    assert sum(map(len, answer["warnings"])) <= admission.VALIDATING_WARNING_BUDGET
    assert all(w.startswith("gpu-limit-missing: container 'c") for w in kept)
    assert summary == f"gpuguard: {50 - len(kept)} more warnings (run `gpuguard lint` on the manifest)"
