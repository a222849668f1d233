"""AdmissionReview ``admission.k8s.io/v1`` in and out, and the verdict for one request.

Only the envelope is validated (kube-apiserver always sends a well-formed one); the object is
handed to the engine as the raw dict the API server sent, so a patch is computed against exactly
those bytes' structure and never drops fields the engine does not know.

What kube-apiserver checks on the response (kubernetes/apiserver
``pkg/admission/plugin/webhook/request/admissionreview.go`` ``VerifyAdmissionResponse``): the
``uid`` is the request's, ``apiVersion``/``kind`` are ``admission.k8s.io/v1``/``AdmissionReview``,
a validating response carries neither ``patch`` nor ``patchType``, and a mutating response carries
both or neither.

Only ``admission.k8s.io/v1`` is accepted (the webhook configurations list
``admissionReviewVersions: [v1]``); a v1beta1 review is a 400, like any other bad envelope.

Decisions (an admission webhook that breaks updates or deletions is worse than none):

* ``/validate`` denies (HTTP 200, ``allowed: false``, ``status.code`` 403) a CREATE with
  error-level findings; warning-level findings become ``response.warnings``.
* An UPDATE is denied only for error-level findings the new object has and ``oldObject`` did not
  (Kyverno's ``allowExistingViolations``; findings are matched by rule and field, see
  ``policies.identity``); the pre-existing ones come back as warnings.  An UPDATE that changes
  only ``metadata`` or ``status`` (labels, annotations, finalizers, owner references, conditions)
  is never denied and not evaluated.
* Nothing is denied or patched while the object or ``oldObject`` carries
  ``metadata.deletionTimestamp``: controllers and the garbage collector remove finalizers then.
* Under ``enforcement: warn`` (or in a namespace of ``warnNamespaces``) what would be denied is
  admitted with warnings saying so, and counted as would-deny.
* Every ``gpuguard.io/ignore`` annotation on a checked object is returned as a warning (and
  counted and logged by the app), as is a name in it that is no rule id.
* The whole-job rules (policies.registry ``WORKLOAD_RULES``: gpu-gang-unschedulable,
  gpu-quota-exceeded, gpu-queue-unadmittable) judge the object a person creates — a PyTorchJob, a
  JobSet, a LeaderWorkerSet, a Job with the ``kueue.x-k8s.io/queue-name`` label — at its CREATE
  only.  Their findings never deny an UPDATE (a job already admitted, scaled or patched by its
  operator, is not stopped half-way) nor anything a controller creates (an object whose
  ``ownerReferences`` name a controller: its owner was judged when it was created, and denying the
  controller's pods or Jobs would only make it retry).  Their warnings keep the reason and say what
  a scale-up could change (``Finding.scale_up``): the pool limit to raise, or that more nodes do not
  help against a quota.
* ``/mutate`` never denies.  It patches on CREATE only — pod specs and Job templates are immutable
  afterwards, so a patch on UPDATE would fail the user's own update — and by default only Pods:
  patching controller templates makes GitOps tools (Argo CD, Flux) see permanent drift, so that
  needs ``mutateTemplates: true``.  It returns the fixes of the rules listed in config ``mutate``
  as a JSON Patch; the validating webhook, which runs after all mutations, judges the result.
* ``dryRun`` changes nothing: the same verdict and, for ``/mutate``, the same patch.  The API
  server applies a mutating webhook's patch to the dry-run object (so ``kubectl apply
  --dry-run=server`` shows the real result) and persists nothing; the webhook has no side effects
  (``sideEffects: None``), which is what makes dry-run requests reach it at all.  (KEP-576
  Dry-run: dry-run requests "go through the normal admission chain" and the response "should be
  as close as possible to a non dry-run response"; kubernetes/kubernetes PRs #66391, #66936.)
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies import pointer
from policies.config import Config
from policies.engine import Evaluation, IgnoreUse
from policies.facts import ClusterFacts
from policies.identity import new_findings
from policies.podspec import misshapen_templates
from policies.registry import WORKLOAD_RULES
from policies.types import Finding, Severity, printable
from policies.wording import plural

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
# Subresources whose object is a Pod spec the user wrote; others (status, binding, eviction…)
# are answered "allowed" at once so that kubelet status updates are never held up.
CHECKED_SUBRESOURCES = frozenset({"", "ephemeralcontainers"})
DENIAL_MAX_FINDINGS = 20  # kubectl prints the whole message; past this it is noise

# What kube-apiserver does with a webhook's warnings (kubernetes/apiserver v0.36.3, commit
# 72f5171bff564be05f1011ccef0233a2ea76ebb4; the same at master 24a394e5 of 2026-07-23):
#
# * pkg/admission/plugin/webhook/validating/dispatcher.go and mutating/dispatcher.go hand each one,
#   unchanged, to the request's warning recorder: ``for _, w := range result.Warnings {
#   warning.AddWarning(ctx, "", w) }``.  One recorder serves the whole request: both of gpuguard's
#   webhooks (the mutating one first), every other webhook, deprecation and field warnings.
# * pkg/endpoints/filters/warning.go (the recorder) drops empty and duplicate texts and counts
#   runes: ``truncateAtTotalRunes = 4 * 1024`` and ``truncateItemRunes = 256``.  Nothing is cut
#   while the request's warnings total at most 4096 runes.  The first warning that would pass that
#   turns truncation on: every warning recorded so far and every later one is cut to its first 256
#   runes, with no ellipsis (``text = string([]rune(text)[:truncateItemRunes])``), and once 4096
#   runes are written the rest are dropped (``if r.written >= truncateAtTotalRunes &&
#   r.truncating { return }``).  There is no limit on their number.  A text with a control
#   character is dropped (k8s.io/apimachinery pkg/util/net/http.go NewWarningHeader: "text must be
#   valid UTF-8 and must not contain control characters"); capped() escapes them.
# * k8s.io/api admission/v1 types.go (kubernetes/kubernetes staging/src/k8s.io/api),
#   AdmissionResponse: "Limit warnings to 120 characters if possible.  Warnings over 256
#   characters and large numbers of warnings may be truncated."  kubectl prints each one whole on
#   a line of its own (client-go rest/warnings.go: ``fmt.Fprintf(w.out, "Warning: %s\n", message)``).
#
# So gpuguard cuts its own warnings, with "…", to at most WARNING_LIMIT characters (Python counts
# code points as Go counts runes): the API server never cuts one mid-word without a mark.  The two
# webhooks together stay within the request's 4096 (validating 3072, mutating 1024); past a
# webhook's budget, or past WARNING_MAX_COUNT warnings, the rest are summarised in one line.  Should
# other sources push a request past 4096 anyway, the API server drops the last warnings (and cuts
# others' to 256), and gpuguard's come in order of importance: would-deny first.
WARNING_LIMIT = 256
WARNINGS_TOTAL = 4096
VALIDATING_WARNING_BUDGET = 3072
MUTATING_WARNING_BUDGET = WARNINGS_TOTAL - VALIDATING_WARNING_BUDGET
WARNING_MAX_COUNT = 20  # no API server limit: kubectl prints one line each, and past this it is noise
ELLIPSIS = "…"

Evaluator = Callable[[dict[str, Any], Config, ClusterFacts], Evaluation]


class EnvelopeError(ValueError):
    """The body is not an ``admission.k8s.io/v1`` AdmissionReview this server can answer."""


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    uid: str
    operation: str
    kind: str  # request.kind.kind, e.g. "Pod", "PyTorchJob"
    namespace: str
    name: str
    sub_resource: str
    dry_run: bool
    obj: dict[str, Any] | None
    old_obj: dict[str, Any] | None = None
    group: str = ""  # request.kind.group: "" for core kinds
    username: str = ""  # request.userInfo.username, for the log of ignore-annotation uses

    @property
    def is_pod(self) -> bool:
        return self.group == "" and self.kind == "Pod"


@dataclass(slots=True)
class Verdict:
    allowed: bool
    message: str = ""
    code: int = 403
    reason: str = "Forbidden"
    # Every warning, in order of importance; encode_response sends them through capped().
    warnings: list[str] = field(default_factory=list)
    warning_budget: int = VALIDATING_WARNING_BUDGET  # characters of warnings the response may carry
    patch: list[dict[str, Any]] | None = None
    findings: Sequence[Finding] = ()
    engine_error: bool = False
    would_deny: Sequence[Finding] = ()  # denials that enforcement: warn turned into warnings
    ignore_uses: Sequence[IgnoreUse] = ()
    skipped: str = ""  # why the object was admitted without evaluation (for logs), if it was


def parse_review(body: bytes) -> AdmissionRequest:
    """Parse and check the envelope; raise EnvelopeError with a reason fit for an HTTP 400."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise EnvelopeError(f"malformed JSON: {exc}") from None
    if not isinstance(review, dict):
        raise EnvelopeError("body must be a JSON object (an AdmissionReview)")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if api_version != API_VERSION:
        raise EnvelopeError(f"expected apiVersion {API_VERSION!r}, got {api_version!r}")
    if kind != KIND:
        raise EnvelopeError(f"expected kind {KIND!r}, got {kind!r}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise EnvelopeError("AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise EnvelopeError("request.uid must be a non-empty string")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise EnvelopeError(f"request.operation must be one of {', '.join(sorted(OPERATIONS))}, got {operation!r}")
    gvk = request.get("kind")
    kind_name = gvk.get("kind") if isinstance(gvk, dict) else None
    if not isinstance(kind_name, str) or not kind_name:
        raise EnvelopeError("request.kind.kind must be a non-empty string")
    dry_run = request.get("dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise EnvelopeError("request.dryRun must be a boolean")
    obj = request.get("object")
    if operation in ("CREATE", "UPDATE"):
        if not isinstance(obj, dict):
            raise EnvelopeError(f"request.object must be a Kubernetes object for {operation}")
        if not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
            raise EnvelopeError("request.object must have string apiVersion and kind")
        if "metadata" in obj and not isinstance(obj["metadata"], dict):
            raise EnvelopeError("request.object.metadata must be an object")
    elif obj is not None and not isinstance(obj, dict):
        raise EnvelopeError("request.object must be an object or null")
    old = request.get("oldObject")
    if old is not None and not isinstance(old, dict):
        raise EnvelopeError("request.oldObject must be an object or null")
    group = gvk.get("group") if isinstance(gvk, dict) else ""
    sub = request.get("subResource") or ""
    namespace = request.get("namespace")
    namespace = namespace if isinstance(namespace, str) else ""
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        kind=kind_name,
        namespace=namespace,
        name=str(request.get("name") or ""),
        sub_resource=sub if isinstance(sub, str) else "",
        dry_run=bool(dry_run),
        obj=_in_namespace(obj, namespace) if isinstance(obj, dict) else None,
        old_obj=_in_namespace(old, namespace) if isinstance(old, dict) else None,
        group=group if isinstance(group, str) else "",
        username=_username(request.get("userInfo")),
    )


def _in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The object with the request's namespace where its metadata names none: the engine judges a
    namespaced object by its namespace (exemptions, infrastructureNamespaces, claims), and the
    request's is the one the API server stores it in."""
    meta = obj.get("metadata")
    if not namespace or not isinstance(meta, dict) or meta.get("namespace"):
        return obj
    return {**obj, "metadata": {**meta, "namespace": namespace}}


def _username(user_info: Any) -> str:
    name = user_info.get("username") if isinstance(user_info, dict) else None
    return name[:256] if isinstance(name, str) else ""


def fit_path(prefix: str, path: str) -> str:
    """``prefix + path``, dropping the start of a long path (its end names the field)."""
    room = WARNING_LIMIT - len(prefix)
    if len(path) <= room:
        return prefix + path
    return prefix + ELLIPSIS + path[len(path) - room + 1 :] if room > 1 else shorten(prefix + path, WARNING_LIMIT)


# Brackets and the separators where an explanation starts, in the order they appear.
_CLAUSE_TOKENS = re.compile(r"[(\[{]|[)\]}]|; | — ")
_TRAILING = " ,;:—-(["  # left at the end of a cut before the ellipsis


def _structure(message: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Where the top-level clauses of ``message`` end (at a ``; `` or `` — `` outside brackets) and
    the spans ``(start, end)`` of its top-level bracketed groups, brackets included."""
    ends: list[int] = []
    groups: list[tuple[int, int]] = []
    depth, opened = 0, 0
    for m in _CLAUSE_TOKENS.finditer(message):
        token = m.group()
        if token in "([{":
            if depth == 0:
                opened = m.start()
            depth += 1
        elif token in ")]}":
            if depth == 1:
                groups.append((opened, m.end()))
            depth = max(0, depth - 1)
        elif depth == 0:
            ends.append(m.start())
    return ends, groups


def first_clause(message: str) -> str:
    """The message up to its first top-level ``; `` or `` — `` (where the explanation starts)."""
    ends, _ = _structure(message)
    return message[: ends[0]] if ends else message


def _elide_asides(message: str, room: int) -> str:
    """``message`` with the bracketed asides inside its first clause (a group followed by more of
    the clause: "needs CUDA 12.4 (from the tag …), which no node runs") replaced by "(…)", the
    longest first, until the first clause fits in ``room`` or no such aside is left.  One scan:
    messages carry strings from objects, so the work stays linear in their length."""
    ends, groups = _structure(message)
    first_end = ends[0] if ends else len(message)
    if first_end <= room:
        return message
    inside = [(s, e) for s, e in groups if e <= first_end and e - s > 3]
    if inside and not message[inside[-1][1] : first_end].strip(" ,."):
        inside.pop()  # the clause ends with it: no aside, cut like the rest
    length, chosen = first_end, []
    for s, e in sorted(inside, key=lambda g: g[0] - g[1]):
        if length <= room:
            break
        chosen.append((s, e))
        length -= e - s - 3
    if not chosen:
        return message
    parts, at = [], 0
    for s, e in sorted(chosen):
        parts += [message[at : s + 1], ELLIPSIS]
        at = e - 1
    parts.append(message[at:])
    return "".join(parts)


def shorten(message: str, room: int) -> str:
    """``message`` if it fits in ``room`` characters, else its start, led by the reason and ending
    in "…": whole clauses where they fill at least half the room, else whole words; asides in
    brackets inside the first clause give way to "(…)" so that the clause's end survives."""
    if len(message) <= room:
        return message
    if room <= 1:
        return ELLIPSIS[:room]
    message = _elide_asides(message, room - 1)
    if len(message) <= room:
        return message
    keep = room - 1  # room for the ellipsis
    ends, _ = _structure(message)
    cut = max((e for e in ends if e <= keep), default=0)
    if cut < keep // 2:
        space = message.rfind(" ", 0, keep + 1)
        cut = space if space >= keep // 2 else keep
    return (message[:cut].rstrip(_TRAILING) or message[:keep]) + ELLIPSIS


def short_warning(finding: Finding, prefix: str = "") -> str:
    """``<prefix><rule>: <message>``, the message shortened (see :func:`shorten`) to keep the whole
    warning within WARNING_LIMIT characters.  A finding that says what a scale-up could change
    (``scale_up``) keeps that too: the message's first clause (the reason), then the scale-up."""
    head = f"{prefix}{finding.rule}: "
    room = WARNING_LIMIT - len(head)
    if not finding.scale_up:
        return head + shorten(finding.message, room)
    said = finding.message.endswith(f"; {finding.scale_up}")  # the gang rule's messages end with it
    whole = finding.message if said else f"{finding.message}; {finding.scale_up}"
    if len(whole) <= room:
        return head + whole
    reason = first_clause(finding.message)
    note = shorten(finding.scale_up, max(room // 2, room - len(reason) - 2))
    return f"{head}{shorten(reason, room - len(note) - 2)}; {note}"


def whole_jobs_judged(req: AdmissionRequest) -> bool:
    """Whether the whole-job rules count for this request: a CREATE of an object no controller owns."""
    if req.operation != "CREATE" or req.obj is None:
        return False
    meta = req.obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    return not (isinstance(refs, list) and any(isinstance(r, dict) and r.get("controller") is True for r in refs))


def _more(count: int) -> str:
    noun = "warning" if count == 1 else "warnings"
    return f"gpuguard: {count} more {noun} (run `gpuguard lint` on the manifest)"


def capped(warnings: Sequence[str], budget: int = VALIDATING_WARNING_BUDGET) -> list[str]:
    """The warnings as the API server should get them: printable, each within WARNING_LIMIT
    characters, without duplicates, and at most WARNING_MAX_COUNT of them totalling at most
    ``budget`` characters, the last of them then saying how many more there are."""
    out = list(dict.fromkeys(shorten(printable(w), WARNING_LIMIT) for w in warnings if w))
    if len(out) <= WARNING_MAX_COUNT and sum(map(len, out)) <= budget:
        return out
    kept: list[str] = []
    used = 0
    for i, text in enumerate(out):
        # the line about the rest must fit after this one: reserve it
        if len(kept) == WARNING_MAX_COUNT - 1 or used + len(text) + len(_more(len(out) - i - 1)) > budget:
            break
        kept.append(text)
        used += len(text)
    return [*kept, _more(len(out) - len(kept))]


def denial_message(kind: str, namespace: str, name: str, findings: Sequence[Finding]) -> str:
    """One line per blocking finding: rule, dotted field path, what is wrong, and the fix."""
    target = f"{kind} {namespace + '/' if namespace else ''}{name or '(unnamed)'}"
    count = plural(len(findings), "GPU policy violation")
    lines = [f"gpuguard: {target}: {count}"]
    for f in findings[:DENIAL_MAX_FINDINGS]:
        scale_up = f"; {f.scale_up}" if f.scale_up and not f.message.endswith(f"; {f.scale_up}") else ""
        lines.append(f"[{f.rule}] {pointer.to_dotted(f.path)}: {f.message}{scale_up} (fix: {f.remediation})")
    if len(findings) > DENIAL_MAX_FINDINGS:
        lines.append(f"... and {len(findings) - DENIAL_MAX_FINDINGS} more (run `gpuguard lint` on the manifest)")
    return "\n".join(lines)


def allowed_at_once(req: AdmissionRequest) -> bool:
    """DELETE/CONNECT, status-like subresources and requests without an object need no engine."""
    return req.operation in ("DELETE", "CONNECT") or req.sub_resource not in CHECKED_SUBRESOURCES or req.obj is None


def _terminating(obj: dict[str, Any] | None) -> bool:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))


def _without_metadata_and_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def unchecked_reason(req: AdmissionRequest) -> str | None:
    """Why this request is admitted without evaluation (and never patched), or None."""
    if allowed_at_once(req):
        return "operation or subresource not checked"
    if _terminating(req.obj) or _terminating(req.old_obj):
        return "deletion in progress"
    if _only_metadata_or_status_changed(req):
        return "metadata or status update"
    return None


def _only_metadata_or_status_changed(req: AdmissionRequest) -> bool:
    if req.operation != "UPDATE" or req.old_obj is None or req.obj is None:
        return False
    return _without_metadata_and_status(req.obj) == _without_metadata_and_status(req.old_obj)


def misshapen_warnings(obj: dict[str, Any], config: Config) -> list[str]:
    """Where the object's kind keeps a pod template but holds no object (only a custom resource
    without a schema can reach a webhook so): admitted, as nothing is known to be wrong, but said."""
    return [
        fit_path(f"gpuguard cannot check it: {place.found} where {place.expected} belongs, at ",
                 pointer.to_dotted(place.at) or "the object")
        for place in misshapen_templates(obj, config.workload_index)
    ]


def ignore_warnings(uses: Sequence[IgnoreUse]) -> list[str]:
    out = []
    for use in uses:
        where = pointer.to_dotted(use.pointer).rsplit(".annotations", 1)[0] or "metadata"
        if not use.honoured:
            out.append(fit_path("gpuguard.io/ignore not honoured here (allowIgnoreAnnotation) at ", where))
        elif use.skipped:
            out.append(fit_path(f"gpuguard.io/ignore skips {_listed(use.skipped)} at ", where))
        if use.kept:
            out.append(fit_path(f"gpuguard.io/ignore cannot skip {', '.join(use.kept)} (allowIgnoreRules) at ", where))
        unknown = use.unknown_message()
        if unknown is not None:
            out.append(fit_path(f"{unknown} at ", where))
    return out


def _listed(names: tuple[str, ...]) -> str:
    shown = ",".join(names[:4])
    return shown if len(names) <= 4 else f"{shown} and {len(names) - 4} more"


def _target(req: AdmissionRequest) -> tuple[str, str]:
    assert req.obj is not None
    meta = req.obj.get("metadata") or {}
    name = req.name or str(meta.get("name") or meta.get("generateName") or "")
    return str(req.obj.get("kind") or req.kind), name


def validate(req: AdmissionRequest, config: Config, facts: ClusterFacts, evaluate: Evaluator) -> Verdict:
    reason = unchecked_reason(req)
    if reason is not None:
        return Verdict(allowed=True, skipped=reason)
    assert req.obj is not None
    ev = evaluate(req.obj, config, facts)
    notes = ignore_warnings(ev.ignore_uses)
    if not ev.gpu_related:  # nothing judged: say so when a template could not even be read
        notes += misshapen_warnings(req.obj, config)
    findings = ev.findings if whole_jobs_judged(req) else [f for f in ev.findings if f.rule not in WORKLOAD_RULES]
    if not findings:
        return Verdict(allowed=True, warnings=notes, ignore_uses=ev.ignore_uses)
    blocking = [f for f in findings if f.severity is Severity.ERROR]
    preexisting: list[Finding] = []
    if blocking and req.operation == "UPDATE" and req.old_obj is not None:
        old = evaluate(req.old_obj, config, facts).blocking()
        introduced = new_findings(req.obj, blocking, req.old_obj, old)
        preexisting = [f for f in blocking if f not in introduced]
        blocking = introduced
    warnings = [short_warning(f) for f in findings if f.severity is Severity.WARNING]
    warnings += [short_warning(f, "pre-existing ") for f in preexisting]
    if blocking and config.enforcement_in(req.namespace) == "warn":
        warnings = [short_warning(f, "would deny: ") for f in blocking] + warnings
        return Verdict(
            allowed=True,
            warnings=list(dict.fromkeys([*warnings, *notes])),
            findings=findings,
            would_deny=blocking,
            ignore_uses=ev.ignore_uses,
        )
    warnings = list(dict.fromkeys([*warnings, *notes]))
    if not blocking:
        return Verdict(allowed=True, warnings=warnings, findings=findings, ignore_uses=ev.ignore_uses)
    kind, name = _target(req)
    message = denial_message(kind, req.namespace, name, blocking)
    return Verdict(allowed=False, message=message, warnings=warnings, findings=findings, ignore_uses=ev.ignore_uses)


def mutate(req: AdmissionRequest, config: Config, facts: ClusterFacts, evaluate: Evaluator) -> Verdict:
    if not config.mutate or req.operation != "CREATE":
        return Verdict(allowed=True, skipped="nothing to mutate" if not config.mutate else "not a CREATE")
    reason = unchecked_reason(req)
    if reason is not None:
        return Verdict(allowed=True, skipped=reason)
    if not req.is_pod and not config.mutate_templates:
        return Verdict(allowed=True, skipped="templates are not mutated (mutateTemplates: false)")
    assert req.obj is not None
    ev = evaluate(req.obj, config, facts)
    ops = ev.patch(config.mutate)
    if not ops:
        return Verdict(allowed=True, findings=ev.findings)
    applied = [f for f in ev.findings if f.rule in config.mutate and f.fix]
    warnings = list(dict.fromkeys(fit_path(f"gpuguard fixed {f.rule} at ", pointer.to_dotted(f.path)) for f in applied))
    return Verdict(
        allowed=True,
        warnings=warnings,
        warning_budget=MUTATING_WARNING_BUDGET,
        patch=[op.to_dict() for op in ops],
        findings=ev.findings,
    )


ENGINE_FAILURE_WARNING = "gpuguard could not check this object (internal error); it was not validated"


def engine_failure(mutating: bool, config: Config) -> Verdict:
    """The answer when the engine raised: per ``failureMode``; /mutate always allows unpatched."""
    if mutating or config.failure_mode == "allow":
        budget = MUTATING_WARNING_BUDGET if mutating else VALIDATING_WARNING_BUDGET
        return Verdict(allowed=True, warnings=[ENGINE_FAILURE_WARNING], warning_budget=budget, engine_error=True)
    return Verdict(
        allowed=False,
        code=500,
        reason="InternalError",
        message="gpuguard could not check this object (internal error) and failureMode is deny",
        engine_error=True,
    )


DEADLINE_WARNING = "gpuguard could not finish checking this object in time; it was not validated"


def deadline_exceeded(mutating: bool, config: Config) -> Verdict:
    """The answer when a review ran out of time (webhook.lanes): per ``failureMode``, as for an
    engine failure; /mutate allows unpatched."""
    if mutating or config.failure_mode == "allow":
        budget = MUTATING_WARNING_BUDGET if mutating else VALIDATING_WARNING_BUDGET
        return Verdict(allowed=True, warnings=[DEADLINE_WARNING], warning_budget=budget, engine_error=True)
    return Verdict(
        allowed=False,
        code=503,
        reason="Timeout",
        message="gpuguard could not finish checking this object in time and failureMode is deny",
        engine_error=True,
    )


def encode_response(uid: str, verdict: Verdict) -> bytes:
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {
            "metadata": {},
            "status": "Failure",
            # Lines of findings; what came from the object (names, paths) is escaped.
            "message": "\n".join(printable(line) for line in verdict.message.split("\n")),
            "reason": verdict.reason,
            "code": verdict.code,
        }
    warnings = capped(verdict.warnings, verdict.warning_budget)
    if warnings:
        response["warnings"] = warnings
    if verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(verdict.patch)).decode("ascii")
    return orjson.dumps({"apiVersion": API_VERSION, "kind": KIND, "response": response})
