"""Evaluation lanes (webhook.lanes): a review that cannot finish in time is answered per failureMode
by its deadline, and it never holds up the other reviews; reviews in flight share a memory budget."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import orjson

from gpuguard.sources.configmodel import load_config
from policies import budget
from policies.config import Config
from policies.engine import Evaluation, evaluate
from policies.facts import ClusterFacts
from tests.support.admission import fixture_object, review
from webhook.app import StaticFacts, create_app
from webhook.lanes import LaneLimits, Lanes
from webhook.metrics import Metrics

DEADLINE = 1.5


def endless_for_heavy(obj: dict[str, Any], config: Config, facts: ClusterFacts, **kw: Any) -> Evaluation:
    """The engine, except that an object named "heavy" never finishes: it only checks its budget,
    as the engine does between units of work."""
    if obj.get("metadata", {}).get("name") == "heavy":
        while True:
            budget.check()
    return evaluate(obj, config, facts, **kw)


def pod(name: str) -> dict[str, Any]:
    obj = fixture_object("pod-gpu-with-limit.json")
    obj["metadata"]["name"] = name
    return obj


async def _post_all(app: Any, bodies: dict[str, bytes]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    order: list[str] = []
    answers: dict[str, dict[str, Any]] = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook") as client:

        async def one(name: str, body: bytes) -> None:
            response = await client.post("/validate", content=body, headers={"content-type": "application/json"})
            assert response.status_code == 200, response.text
            answers[name] = response.json()["response"]
            order.append(name)

        await asyncio.gather(*(one(n, b) for n, b in bodies.items()))
    return answers, order


def test_a_review_past_its_deadline_gets_the_failure_mode_answer_and_others_are_not_held_up() -> None:
    metrics = Metrics()
    config = load_config({"failureMode": "deny"})
    app = create_app(config, StaticFacts(), metrics=metrics, evaluator=endless_for_heavy,
                     lanes=LaneLimits(deadline=DEADLINE))
    bodies = {"heavy": orjson.dumps(review("CREATE", pod("heavy")))}
    bodies.update({f"p{i}": orjson.dumps(review("CREATE", pod(f"p{i}"))) for i in range(20)})
    started = time.perf_counter()
    answers, order = asyncio.run(_post_all(app, bodies))
    # Every other review was answered while the endless one ran; it was answered last, by its deadline.
    assert order[-1] == "heavy" and len(order) == 21
    assert all(answers[f"p{i}"]["allowed"] for i in range(20))
    heavy = answers["heavy"]
    assert heavy["allowed"] is False and heavy["status"]["code"] == 503
    assert "in time and failureMode is deny" in heavy["status"]["message"]
    assert time.perf_counter() - started < DEADLINE + 5  # answered at its deadline, not never
    assert 'gpuguard_admission_errors_total{endpoint="validate",reason="deadline"} 1' in metrics.render(None, True, 0)


def test_past_the_deadline_failure_mode_allow_admits_with_a_warning() -> None:
    app = create_app(load_config({"failureMode": "allow"}), StaticFacts(), evaluator=endless_for_heavy,
                     lanes=LaneLimits(deadline=0.5))
    answers, _ = asyncio.run(_post_all(app, {"heavy": orjson.dumps(review("CREATE", pod("heavy")))}))
    assert answers["heavy"]["allowed"] is True
    assert answers["heavy"]["warnings"] == ["gpuguard could not finish checking this object in time; it was not validated"]


def test_large_and_cel_bodies_go_to_the_heavy_lane() -> None:
    lanes = Lanes(LaneLimits(inline_body_bytes=1024))
    assert not lanes.is_heavy(b"{}" * 100)
    assert lanes.is_heavy(b" " * 2048)
    assert lanes.is_heavy(b'{"selectors": [{"cel": {"expression": "true"}}]}')
    lanes.close()


def test_the_memory_budget_queues_reviews_and_a_wait_past_the_deadline_is_refused() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        lanes = Lanes(LaneLimits(inflight_body_bytes=100))
        now = time.perf_counter()
        first = await lanes.reserve(80, now + 5)
        # 30 more bytes do not fit while the first 80 are held: the wait ends at its deadline.
        second = await lanes.reserve(30, time.perf_counter() + 0.2)
        waiting = asyncio.create_task(lanes.reserve(30, time.perf_counter() + 5))
        await lanes.release(80)
        third = await waiting
        lanes.close()
        return first, second, third

    first, second, third = asyncio.run(scenario())
    assert first and not second and third
