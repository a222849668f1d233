"""The webhook's ASGI application: ``create_app(config, facts_provider)``.

``/validate`` and ``/mutate`` are raw ASGI endpoints mounted on the FastAPI router: they read
the body themselves (so an oversized body is refused before it is buffered), parse it with
orjson and never build a Request/Response object or a pydantic model per review.  Where a review
is evaluated (inline or in the heavy lane), by when it is answered and how much memory reviews in
flight may hold is ``webhook.lanes``.
Nothing on the request path does network I/O; cluster facts are read from
``facts_provider.current()``, which a background source keeps fresh.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson
from fastapi import FastAPI
from fastapi.responses import Response
from starlette.routing import Route

from policies.config import Config
from policies.engine import Prepared, evaluate, prepare
from policies.facts import ClusterFacts
from webhook import admission
from webhook.configsource import ConfigSource, StaticConfig
from webhook.lanes import LaneLimits, Lanes
from webhook.metrics import CONTENT_TYPE, Metrics

if TYPE_CHECKING:
    from gpuguard.registry.facts import ResolvedImages
    from gpuguard.registry.service import ImageLookupService

log = logging.getLogger("gpuguard.webhook")

# kube-apiserver refuses request bodies over 3 MiB (apiserver/pkg/server/config.go
# MaxRequestBodyBytes = 3 * 1024 * 1024); a review wraps the object (and oldObject on UPDATE),
# so allow twice that plus room for the envelope.
DEFAULT_MAX_BODY_BYTES = 2 * 3 * 1024 * 1024 + 256 * 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON_HEADERS = [(b"content-type", b"application/json")]



class FactsProvider(Protocol):
    @property
    def ready(self) -> bool: ...

    def current(self) -> ClusterFacts: ...

    def age_seconds(self) -> float | None: ...

    def lag_seconds(self) -> float | None:
        """How long a received change has waited for a snapshot; None: facts do not change."""
        ...

    def publishing(self) -> Mapping[str, float] | None:
        """Counters of the snapshots published (webhook.metrics.PUBLISHING); None: facts do not change."""
        ...


class StaticFacts:
    """Facts that never change: a snapshot file, or none at all."""

    def __init__(self, facts: ClusterFacts | None = None) -> None:
        self._facts = facts or ClusterFacts.empty()
        self._loaded = time.monotonic()

    @property
    def ready(self) -> bool:
        return True

    def current(self) -> ClusterFacts:
        return self._facts

    def age_seconds(self) -> float | None:
        return None if self._facts.is_empty else time.monotonic() - self._loaded

    def lag_seconds(self) -> float | None:
        return None

    def publishing(self) -> Mapping[str, float] | None:
        return None


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body, refusing (by Content-Length, then by counting) anything over ``limit``."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                if int(value) > limit:
                    raise BodyTooLarge
            except ValueError:
                pass  # the HTTP parser rejects a bad Content-Length before we get here
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_json(send: Send, status: int, body: bytes) -> None:
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class AdmissionEndpoint:
    """``POST /validate`` or ``POST /mutate`` as a raw ASGI app."""

    def __init__(
        self,
        mutating: bool,
        config: ConfigSource,
        facts: FactsProvider,
        metrics: Metrics,
        max_body_bytes: int,
        evaluator: admission.Evaluator,
        images: ImageLookupService | None = None,
        lanes: Lanes | None = None,
    ) -> None:
        self.lanes = lanes or Lanes()
        self.mutating = mutating
        self.images = images
        self.endpoint = "mutate" if mutating else "validate"
        self.config_source = config
        self.facts = facts
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.evaluator = evaluator
        self.decide = admission.mutate if mutating else admission.validate

    async def _image_view(
        self, req: admission.AdmissionRequest, config: Config, facts: ClusterFacts
    ) -> tuple[ResolvedImages | None, Prepared | None]:
        """Registry facts for the review's GPU images (None: none to look up), waiting at most the
        review budget, and the object as the engine prepared it to find them (``judge`` goes on from
        there, so a review whose images need no lookup is not prepared twice)."""
        if self.images is None or req.obj is None or admission.unchecked_reason(req) is not None:
            return None, None
        if self.mutating and (not config.mutate or req.operation != "CREATE"):
            return None, None
        from gpuguard.registry.facts import gpu_node_arches, pairs_of

        prepared = None
        try:
            # The engine's first phase: its gates, once; a controller's replicas share what it memoises.
            prepared = prepare(req.obj, config, facts)
            pairs, quiet = pairs_of(prepared.image_uses(), gpu_node_arches(facts, config))
            if not pairs:
                return None, prepared
            view = await self.images.prepare(tuple(pairs))
            view.quiet = quiet
            return view, prepared
        except Exception:  # lookups are advisory: a fault here must not fail the review
            log.exception("%s: image lookups failed for uid=%s", self.endpoint, req.uid)
            return None, None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        lanes = self.lanes
        deadline = lanes.deadline_for(started)
        size = _content_length(scope) or self.max_body_bytes
        if size > self.max_body_bytes:
            await self._too_large(send)
            return
        if not await lanes.reserve(size, deadline):
            self.metrics.count_error(self.endpoint, "memory")
            log.warning("%s: reviews in flight hold the memory budget; answered 503", self.endpoint)
            reason = "reviews in flight hold the memory budget"
            await send_json(send, 503, orjson.dumps({"error": "busy", "reason": reason}))
            return
        try:
            await self._review(scope, receive, send, started, deadline)
        finally:
            await lanes.release(size)

    async def _too_large(self, send: Send) -> None:
        self.metrics.count_error(self.endpoint, "too_large")
        reason = f"request body exceeds {self.max_body_bytes} bytes"
        await send_json(send, 413, orjson.dumps({"error": "payload too large", "reason": reason}))

    async def _review(self, scope: Scope, receive: Receive, send: Send, started: float, deadline: float) -> None:
        try:
            body = await read_body(scope, receive, self.max_body_bytes)
        except BodyTooLarge:
            await self._too_large(send)
            return
        except ClientGone:
            return
        try:
            req = admission.parse_review(body)
        except admission.EnvelopeError as exc:
            self.metrics.count_error(self.endpoint, "bad_request")
            log.warning("%s: bad AdmissionReview: %s", self.endpoint, exc)
            await send_json(send, 400, orjson.dumps({"error": "bad AdmissionReview", "reason": str(exc)}))
            return
        config = self.config_source.current()
        facts = self.facts.current()
        view, prepared = await self._image_view(req, config, facts)
        evaluator = self.evaluator
        if prepared is not None:
            evaluator = functools.partial(cast(Any, self.evaluator), images=view, prepared=prepared)
        decide, mutating = self.decide, self.mutating
        try:
            verdict = await self.lanes.evaluate(
                lambda: decide(req, config, facts, evaluator), self.lanes.is_heavy(body), deadline
            )
        except Exception:
            log.exception(
                "%s: engine failed on %s %s/%s uid=%s", self.endpoint, req.kind, req.namespace, req.name, req.uid
            )
            self.metrics.count_error(self.endpoint, "engine_error")
            verdict = admission.engine_failure(mutating, config)
        if verdict is None:
            self.metrics.count_error(self.endpoint, "deadline")
            log.warning(
                "%s: %s %s/%s uid=%s not judged within %.1f s; answered per failureMode=%s", self.endpoint,
                req.kind, req.namespace, req.name, req.uid, self.lanes.limits.deadline, config.failure_mode,
            )
            verdict = admission.deadline_exceeded(mutating, config)
        if view is not None and not self.mutating:
            from gpuguard.registry.service import warnings_for

            verdict.warnings = [*verdict.warnings, *warnings_for(view)]  # capped when encoded
        payload = admission.encode_response(req.uid, verdict)
        await send_json(send, 200, payload)
        if verdict.findings and not self.mutating:
            self.metrics.observe_findings(verdict.findings)
        self.metrics.observe_review(
            self.endpoint, req.kind, req.operation, verdict.allowed, time.perf_counter() - started
        )
        if not verdict.allowed and not verdict.engine_error:
            log.info("denied %s %s/%s uid=%s dryRun=%s", req.kind, req.namespace, req.name, req.uid, req.dry_run)
        if verdict.would_deny:
            self.metrics.observe_would_deny(verdict.would_deny)
            rules = ",".join(sorted({f.rule for f in verdict.would_deny}))
            log.info("would deny (enforcement warn) %s %s/%s uid=%s rules=%s", req.kind, req.namespace, req.name,
                     req.uid, rules)
        self._report_ignore_uses(req, verdict)

    def _report_ignore_uses(self, req: admission.AdmissionRequest, verdict: admission.Verdict) -> None:
        for use in verdict.ignore_uses:
            self.metrics.count_ignore_use("honoured" if use.honoured else "refused")
            if use.unknown:
                self.metrics.count_ignore_use("unknown_rule")
            user = req.username or "unknown user"
            log.warning(
                "gpuguard.io/ignore=%s on %s %s/%s uid=%s by %s: %s%s%s", _names(use.rules), req.kind, req.namespace,
                req.name, req.uid, user, "honoured" if use.honoured else "not honoured (allowIgnoreAnnotation)",
                f"; not for {', '.join(use.kept)} (allowIgnoreRules)" if use.kept else "",
                f"; {use.unknown_message()}" if use.unknown else "",
            )


LOGGED_NAMES = 20


def _names(names: tuple[str, ...]) -> str:
    """At most LOGGED_NAMES names of an annotation, each cut to 63 characters: a log line stays short
    however many a client sends (60,000 names made a 1.2 M-character line)."""
    shown = ",".join(n[:63] for n in names[:LOGGED_NAMES])
    return shown if len(names) <= LOGGED_NAMES else f"{shown} (+{len(names) - LOGGED_NAMES} more)"


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return max(int(value), 0)
            except ValueError:
                return None  # the HTTP parser rejects a bad Content-Length before we get here
    return None


class WebhookApp(FastAPI):
    """FastAPI, except that ``POST /validate`` and ``POST /mutate`` skip the middleware stack
    and router: they are dispatched straight to their ASGI endpoints (the routes stay registered
    so that, say, ``GET /validate`` still gets a 405 from the router)."""

    admission_endpoints: dict[str, AdmissionEndpoint]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self.admission_endpoints.get(scope["path"])
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(
    config: Config | ConfigSource,
    facts_provider: FactsProvider,
    *,
    metrics: Metrics | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    evaluator: admission.Evaluator = evaluate,
    image_lookups: ImageLookupService | None = None,
    lanes: LaneLimits | None = None,
) -> WebhookApp:
    """The webhook app; ``evaluator`` is the engine entry point (replaceable for fault tests; with
    registry lookups on it is also passed ``images=``).  ``image_lookups`` defaults to a service
    built from ``config.registry`` when ``registry.enabled`` is true."""
    source: ConfigSource = StaticConfig(config) if isinstance(config, Config) else config
    metrics = metrics or Metrics()
    if not metrics.known_kinds:
        metrics.known_kinds = frozenset(w.kind for w in source.current().workload_index.values())
    # Registry lookups are set up from the config at start; changing them needs a restart.
    registry = source.current().registry
    if image_lookups is None and registry.enabled:
        from gpuguard.registry.service import ImageLookupService

        image_lookups = ImageLookupService.from_settings(registry, metrics.count_image_lookup)
    app = WebhookApp(title="gpuguard admission webhook", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.metrics = metrics
    app.state.facts = facts_provider
    app.state.image_lookups = image_lookups
    app.admission_endpoints = {}
    shared_lanes = Lanes(lanes)  # both endpoints share the heavy lane and the memory budget
    app.state.lanes = shared_lanes
    for mutating in (False, True):
        endpoint = AdmissionEndpoint(
            mutating, source, facts_provider, metrics, max_body_bytes, evaluator, image_lookups, shared_lanes
        )
        path = f"/{endpoint.endpoint}"
        app.admission_endpoints[path] = endpoint
        app.router.routes.append(Route(path, endpoint=endpoint, methods=["POST"]))

    add_health_routes(app, facts_provider, metrics)
    return app


def add_health_routes(app: FastAPI, facts_provider: FactsProvider, metrics: Metrics) -> None:
    """``/healthz``, ``/readyz`` and ``/metrics`` (on the webhook port, and on ``--health-port``)."""

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")

    @app.get("/readyz")
    async def readyz() -> Response:
        facts = facts_provider.current()
        ready = facts_provider.ready
        detail: dict[str, Any] = {
            "ready": ready,
            "facts": facts.source,
            "nodes": len(facts.nodes),
            "runtimeClasses": len(facts.runtime_classes),
        }
        age, lag = facts_provider.age_seconds(), facts_provider.lag_seconds()
        if age is not None:
            detail["factsAgeSeconds"] = round(age, 3)
        if lag is not None:  # a change received but not yet in the facts the reviews read
            detail["factsLagSeconds"] = round(lag, 3)
        body = orjson.dumps(detail)
        return Response(body, status_code=200 if ready else 503, media_type="application/json")

    @app.get("/metrics")
    async def prometheus() -> Response:
        facts = facts_provider.current()
        text = metrics.render(facts_provider.age_seconds(), facts_provider.ready, len(facts.nodes),
                              facts_provider.lag_seconds(), facts_provider.publishing())
        return Response(text, media_type=CONTENT_TYPE)


def create_health_app(facts_provider: FactsProvider, metrics: Metrics) -> FastAPI:
    """The plain-HTTP app of ``--health-port``: probes and scraping without client certificates."""
    app = FastAPI(title="gpuguard health", docs_url=None, redoc_url=None, openapi_url=None)
    add_health_routes(app, facts_provider, metrics)
    return app
