"""Admission warnings as the API server passes them on: led by the reason, cut by gpuguard with "…"
at kube-apiserver's per-warning limit, and within the request's total (see the comment above
``webhook.admission.WARNING_LIMIT`` for the kube-apiserver source)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.types import Finding, Severity
from tests.support.admission import NGC_ON_A100, NGC_ON_A100_WARNING, review
from tests.support.admission import pool_pod as pod
from tests.support.paths import EXAMPLES, FIXTURES, load_yaml_docs
from webhook import admission
from webhook.app import StaticFacts, create_app

LIMIT = admission.WARNING_LIMIT
PREFIXES = ("", "pre-existing ", "would deny: ")
# kube-apiserver's recorder, k8s.io/apiserver pkg/endpoints/filters/warning.go (v0.36.3)
TRUNCATE_AT_TOTAL_RUNES = 4 * 1024
TRUNCATE_ITEM_RUNES = 256


def apiserver_recorder(*responses: list[str]) -> list[str]:
    """What kube-apiserver's warning recorder makes of the warnings of one request's webhooks, in
    call order: a transcription of ``recorder.AddWarning`` (dedupe; past 4096 runes in all, every
    warning cut to its first 256 runes, and the rest dropped once 4096 are written)."""
    recorded: set[str] = set()
    ordered: list[str] = []
    headers: list[str] = []
    written, truncating = 0, False
    for text in (w for response in responses for w in response):
        if not text or (written >= TRUNCATE_AT_TOTAL_RUNES and truncating) or text in recorded:
            continue
        recorded.add(text)
        ordered.append(text)
        if truncating and len(text) > TRUNCATE_ITEM_RUNES:
            text = text[:TRUNCATE_ITEM_RUNES]
        if written + len(text) <= TRUNCATE_AT_TOTAL_RUNES or truncating:
            written += len(text)
            headers.append(text)
            continue
        truncating, written = True, 0
        headers = [w[:TRUNCATE_ITEM_RUNES] for w in ordered]
        written = sum(map(len, headers))
    return headers


def post(app: Any, path: str, body: dict[str, Any]) -> Any:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook") as client:
            return await client.post(path, content=orjson.dumps(body), headers={"content-type": "application/json"})

    return asyncio.run(go()).json()["response"]


# --- one warning ------------------------------------------------------------------------------

def _fixture_findings(facts: ClusterFacts) -> list[Finding]:
    config = load_config(None)
    paths = sorted((EXAMPLES / "manifests").glob("*.yaml")) + sorted(FIXTURES.rglob("*.yaml"))
    out: dict[tuple[str, str], Finding] = {}
    for path in paths:
        try:
            docs = load_yaml_docs(path)
        except Exception:  # some fixtures are broken on purpose
            continue
        for doc in docs:
            if isinstance(doc, dict) and isinstance(doc.get("kind"), str):
                for f in evaluate(doc, config, facts).findings:
                    out.setdefault((f.rule, f.message), f)
    return list(out.values())


def test_every_warning_fits_names_its_rule_and_leads_with_its_reason(example_facts: ClusterFacts) -> None:
    findings = _fixture_findings(example_facts)
    cut = 0
    for f in findings:
        for prefix in PREFIXES:
            text = admission.short_warning(f, prefix)
            head = f"{prefix}{f.rule}: "
            assert len(text) <= LIMIT and text.startswith(head), text
            body = text[len(head):]
            if f.scale_up and body != f.message:  # the reason, then what a scale-up could change
                cut += 1
                kept = body.rpartition("; ")[2]
                assert kept == f.scale_up or (kept.endswith(admission.ELLIPSIS)
                                              and f.scale_up.startswith(kept[:-1].rstrip(" ,;:—-(["))), text
            elif body != f.message:
                cut += 1
                assert len(head + f.message) > LIMIT
                assert body.endswith(admission.ELLIPSIS) or f"({admission.ELLIPSIS})" in body, text
            # the reason comes first: the message's own start, up to any aside given way to "(…)"
            aside = f.message.find("(")
            lead = min(len(f.message), 60, aside + 1 if aside >= 0 else 60)
            assert body[:lead] == f.message[:lead], text
    assert len(findings) > 100 and cut > 50  # the fixtures' long findings are exercised


def test_a_long_finding_keeps_its_reason_and_is_cut_with_an_ellipsis(example_facts: ClusterFacts) -> None:
    [f] = [f for f in evaluate(NGC_ON_A100, load_config(None), example_facts).findings
           if f.rule == "gpu-cuda-driver-mismatch"]
    assert len(f.message) > 2 * LIMIT and f.severity is Severity.WARNING
    assert admission.short_warning(f) == NGC_ON_A100_WARNING
    assert admission.short_warning(f, "would deny: ") == "would deny: " + NGC_ON_A100_WARNING


@pytest.mark.parametrize(
    ("message", "room", "expected"),
    [
        ("fits exactly", 12, "fits exactly"),
        # whole clauses when they fill half the room
        ("the reason here; an explanation that does not fit", 30, "the reason here…"),
        ("reason one; reason two — the long explanation", 30, "reason one; reason two…"),
        # a first clause too short for that: whole words, dropping a dangling separator
        ("short; " + "word " * 20, 40, "short; word word word word word word…"),
        # one long token: cut inside it
        ("x" * 50, 10, "x" * 9 + "…"),
        # an aside inside the first clause gives way so that the clause's end survives
        ("image i needs CUDA 12 (from a long, long, long provenance note), which no node runs; detail",
         60, "image i needs CUDA 12 (…), which no node runs; detail"),
        ("image i needs CUDA 12 (from a long, long, long provenance note), which no node runs; detail",
         48, "image i needs CUDA 12 (…), which no node runs…"),
        # an aside at the end of its clause is cut like the rest
        ("no node can run it (a: taint x, b: label y, c: too small)", 41, "no node can run it (a: taint x, b: label…"),
        ("", 5, ""),
        ("abc", 1, "…"),
        ("abc", 0, ""),
    ],
)
def test_shorten(message: str, room: int, expected: str) -> None:
    assert admission.shorten(message, room) == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab (){}[];—,:.-"), max_size=400), st.integers(min_value=0, max_value=300))
def test_shorten_never_exceeds_the_room_and_marks_every_cut(message: str, room: int) -> None:
    out = admission.shorten(message, room)
    assert len(out) <= room
    if len(message) <= room:
        assert out == message
    elif room > 0:
        assert admission.ELLIPSIS in out


@pytest.mark.parametrize(
    "message",
    ["(ab) " * 13000 + "x", "a" * 65536, "; " * 32768, "(" * 32768 + ")" * 32768 + " x", "(a, b) c " * 7000],
    ids=["asides", "one-token", "separators", "nesting", "asides-and-words"],
)
def test_shorten_does_bounded_work_on_hostile_messages(message: str) -> None:
    """Messages carry strings from objects (64 KiB values reach the engine): linear work."""
    started = time.thread_time()
    out = admission.shorten(message, LIMIT)
    assert time.thread_time() - started < 0.25
    assert len(out) <= LIMIT and admission.ELLIPSIS in out


def test_first_clause_is_still_the_reason() -> None:
    assert admission.first_clause("a (b; c) d; e — f") == "a (b; c) d"


# --- all of a response's warnings ------------------------------------------------------------

def test_the_webhooks_budgets_are_the_api_servers_total() -> None:
    assert admission.WARNING_LIMIT == TRUNCATE_ITEM_RUNES
    assert admission.VALIDATING_WARNING_BUDGET + admission.MUTATING_WARNING_BUDGET == TRUNCATE_AT_TOTAL_RUNES


def _long(i: int) -> str:
    return f"gpu-x: warning number {i} " + "with a long explanation " * 20


def test_full_responses_of_both_webhooks_pass_the_api_server_unchanged() -> None:
    mutating = admission.capped([_long(i) for i in range(40)], admission.MUTATING_WARNING_BUDGET)
    validating = admission.capped([_long(i) for i in range(100, 140)], admission.VALIDATING_WARNING_BUDGET)
    assert sum(map(len, mutating)) <= admission.MUTATING_WARNING_BUDGET
    assert sum(map(len, validating)) <= admission.VALIDATING_WARNING_BUDGET
    assert apiserver_recorder(mutating, validating) == mutating + validating
    # while the uncut warnings would turn truncation on: cut without a mark, the rest dropped
    raw = [_long(i) for i in range(40)]
    passed = apiserver_recorder(raw)
    assert len(passed) < len(raw) and all(len(w) == TRUNCATE_ITEM_RUNES for w in passed)
    assert not any(w.endswith(admission.ELLIPSIS) for w in passed)


def test_capped_keeps_what_fits_and_counts_the_rest_exactly() -> None:
    warnings = [_long(i) for i in range(30)]
    out = admission.capped(warnings)
    assert all(len(w) <= LIMIT for w in out)
    assert sum(map(len, out)) <= admission.VALIDATING_WARNING_BUDGET
    *kept, summary = out
    assert kept == [admission.shorten(w, LIMIT) for w in warnings[: len(kept)]]
    assert summary == f"gpuguard: {30 - len(kept)} more warnings (run `gpuguard lint` on the manifest)"
    # one more warning would not have fitted with the summary
    assert sum(map(len, kept)) + LIMIT + len(summary) > admission.VALIDATING_WARNING_BUDGET


def test_capped_counts_short_warnings_to_twenty() -> None:
    out = admission.capped([f"w{i}" for i in range(30)])
    assert len(out) == admission.WARNING_MAX_COUNT
    assert out[-1] == "gpuguard: 11 more warnings (run `gpuguard lint` on the manifest)"
    assert admission.capped([f"w{i}" for i in range(20)]) == [f"w{i}" for i in range(20)]
    assert admission.capped([f"w{i}" for i in range(21)])[-1] == (
        "gpuguard: 2 more warnings (run `gpuguard lint` on the manifest)"
    )


def test_capped_says_one_more_warning() -> None:
    summary = "gpuguard: 1 more warning (run `gpuguard lint` on the manifest)"
    warnings = [f"{i}".ljust(100, "y") for i in range(5)]
    assert admission.capped(warnings, budget=4 * 100 + len(summary)) == [*warnings[:4], summary]
    assert admission.capped(warnings, budget=5 * 100) == warnings


def test_capped_escapes_dedupes_after_cutting_and_drops_empty_ones() -> None:
    same_start = ["r: " + "z" * 300 + " one", "r: " + "z" * 300 + " two"]
    out = admission.capped(["", "\x1b[31m" * 100, *same_start])
    assert "" not in out and len(out) == 2
    assert out[0].startswith("\\x1b[31m") and len(out[0]) <= LIMIT and out[0].isprintable()
    assert out[1] == "r: " + "z" * (LIMIT - 4) + admission.ELLIPSIS


# --- through the webhook ---------------------------------------------------------------------

def test_a_long_warning_reaches_the_response_whole_and_marked(example_facts: ClusterFacts) -> None:
    app = create_app(load_config(None), StaticFacts(example_facts))
    answer = post(app, "/validate", review("CREATE", NGC_ON_A100))
    assert answer["allowed"] is True and NGC_ON_A100_WARNING in answer["warnings"]
    warn = create_app(load_config({"enforcement": "warn"}), StaticFacts(example_facts))
    answer = post(warn, "/validate", review("CREATE", pod("nvidia/cuda:13.0.2-runtime-ubuntu22.04", "t4")))
    [would_deny] = [w for w in answer["warnings"] if w.startswith("would deny: ")]
    assert would_deny == (
        "would deny: gpu-cuda-driver-mismatch: container 'train': image nvidia/cuda:13.0.2-runtime-ubuntu22.04 "
        "needs CUDA 13.0.2 (from nvidia/cuda image tag; native driver 580.95.05 or newer), no candidate node "
        "can run it…"
    )


def test_a_denial_keeps_the_whole_message(example_facts: ClusterFacts) -> None:
    app = create_app(load_config(None), StaticFacts(example_facts))
    bad = pod("nvidia/cuda:13.0.2-runtime-ubuntu22.04", "t4")
    [f] = [f for f in evaluate(bad, load_config(None), example_facts).findings if f.rule == "gpu-cuda-driver-mismatch"]
    answer = post(app, "/validate", review("CREATE", bad))
    assert answer["allowed"] is False
    assert f"[gpu-cuda-driver-mismatch] spec.containers[0].image: {f.message} (fix: " in answer["status"]["message"]


def test_mutating_warnings_keep_to_their_budget() -> None:
    """Many fixes: the /mutate response stays within its share of the request's total."""
    obj = pod("busybox", "a100")
    obj["spec"]["containers"] = [
        {"name": f"c{i}", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "1"}}} for i in range(30)
    ]
    app = create_app(load_config({"mutate": ["gpu-limit-missing"]}), StaticFacts())
    answer = post(app, "/mutate", review("CREATE", obj))
    warnings = answer["warnings"]
    assert answer["patch"] and sum(map(len, warnings)) <= admission.MUTATING_WARNING_BUDGET
    assert warnings[0] == "gpuguard fixed gpu-limit-missing at spec.containers[0].resources.requests[nvidia.com/gpu]"
    assert warnings[-1] == f"gpuguard: {31 - len(warnings)} more warnings (run `gpuguard lint` on the manifest)"


def whole_job_finding(message: str, scale_up: str) -> Finding:
    return Finding(rule="gpu-gang-unschedulable", severity=Severity.WARNING, message=message, path="/spec",
                   remediation="Run fewer pods together.", kind="PyTorchJob", name="train", namespace="ml",
                   scale_up=scale_up)


@settings(max_examples=200, deadline=None)
@given(reason=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=300),
       where=st.text(min_size=0, max_size=300), scale_up=st.text(min_size=1, max_size=300),
       prefix=st.sampled_from(PREFIXES))
def test_a_whole_job_warning_keeps_its_reason_and_its_scale_up(reason: str, where: str, scale_up: str,
                                                                prefix: str) -> None:
    reason, scale_up = reason.replace("; ", ", "), scale_up.replace("; ", ", ")
    finding = whole_job_finding(f"{reason}; {where}", scale_up)
    scale_up = finding.scale_up  # made printable
    assume(not finding.message.endswith(f"; {scale_up}"))  # a message that says it already is kept whole
    warning = admission.short_warning(finding, prefix)
    assert len(warning) <= LIMIT
    head = f"{prefix}gpu-gang-unschedulable: "
    assert warning.startswith(head)
    body = warning[len(head):]
    if len(f"{finding.message}; {scale_up}") <= LIMIT - len(head):
        assert body == f"{finding.message}; {scale_up}"
    else:  # the scale-up survives (whole, or its start), after the start of the reason
        kept = body.rpartition("; ")[2]
        assert kept == scale_up or (kept.endswith(admission.ELLIPSIS) and len(kept) > 1)


def test_a_whole_job_warning_drops_the_middle_clause_first() -> None:
    reason = "16 pods × 8 nvidia.com/gpu must run together (all replicas of a PyTorchJob)"
    where = "the 12 nodes they fit hold at most 12 such pods at once (" + "h100, " * 40 + ")"
    scale_up = "4 more such pods need room on nodes of that kind (add nodes, or a pool that can create them)"
    warning = admission.short_warning(whole_job_finding(f"{reason}; {where}; {scale_up}", scale_up))
    assert warning == f"gpu-gang-unschedulable: {reason}; {scale_up}"


@pytest.mark.parametrize(("operation", "owner", "judged"), [
    ("CREATE", None, True),
    ("CREATE", {"kind": "JobSet", "name": "x", "uid": "u", "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "controller": True}, False),
    ("CREATE", {"kind": "ConfigMap", "name": "x", "uid": "u", "apiVersion": "v1"}, True),  # not a controller
    ("UPDATE", None, False),
])
def test_whole_jobs_are_judged_at_the_create_of_what_no_controller_owns(
    operation: str, owner: dict[str, Any] | None, judged: bool
) -> None:
    obj: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ml"}}
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner]
    req = admission.parse_review(orjson.dumps(review(operation, obj, obj if operation == "UPDATE" else None)))
    assert admission.whole_jobs_judged(req) is judged
