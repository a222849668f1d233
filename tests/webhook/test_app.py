"""The admission endpoints' own memo: what registry lookups a review needs, held as 16 bytes a spec."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import orjson

from gpuguard.registry.service import ImageLookupService
from policies.config import Config
from policies.memo import ImageUsesKey
from tests.support.admission import review, token_mount, token_volume
from webhook.app import StaticFacts, create_app


class Lookups:
    """An image lookup service that records what it is asked and finds nothing."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    async def prepare(self, pairs: Any) -> None:
        self.asked.append(pairs)


def _pod(n: int, env_bytes: int) -> dict[str, Any]:
    big = [{"name": f"V{i}", "value": "x" * 1000} for i in range(env_bytes // 1000)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{n}", "namespace": "ml"}, "spec": {
        "containers": [{"name": f"c{n}", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "env": big,
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


async def _post(app: Any, body: bytes) -> dict[str, Any]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", "method": "POST", "path": "/validate", "headers": []}, receive, send)
    assert sent[0]["status"] == 200
    return cast(dict[str, Any], orjson.loads(sent[1]["body"]))


def _create_all(app: Any, objects: Any) -> list[dict[str, Any]]:
    """POST a CREATE review of each object in turn; the responses."""

    async def scenario() -> list[dict[str, Any]]:
        return [(await _post(app, orjson.dumps(review("CREATE", obj))))["response"] for obj in objects]

    return asyncio.run(scenario())


def _counted(monkeypatch: Any, owner: Any, name: str) -> list[int]:
    """One entry per call of ``owner.name`` from now on (the real one still runs)."""
    calls: list[int] = []
    real = getattr(owner, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def test_image_lookup_keys_hold_a_digest_not_the_spec() -> None:
    """Distinct pods with 200 KB specs once left their whole serialised spec in the memo key each."""
    facts = StaticFacts()
    lookups = Lookups()
    app = create_app(Config(), facts, image_lookups=cast(ImageLookupService, lookups))

    async def scenario() -> None:
        for n in range(20):
            response = await _post(app, orjson.dumps(review("CREATE", _pod(n, 200_000))))
            assert response["response"]["allowed"] is True
        for n in range(5):  # the object's own apiVersion and kind are user text too
            odd = review("CREATE", _pod(n, 0))
            odd["request"]["object"]["apiVersion"] = f"{n}" + "v" * 100_000
            await _post(app, orjson.dumps(odd))

    asyncio.run(scenario())
    assert len(lookups.asked) == 25 and all(pairs == (("nvcr.io/nvidia/pytorch:24.05-py3", "amd64"),)
                                            for pairs in lookups.asked)
    memo = facts.current()._memo  # type: ignore[attr-defined]
    keys = [k for k in memo if isinstance(k, ImageUsesKey)]
    assert len(keys) == 25 and all(len(k.content) == 16 for k in keys)


def _replica(index: int) -> dict[str, Any]:
    """Pod ``index`` of an Indexed Job, as the ServiceAccount plugin and the Job controller leave it."""
    token = "kube-api-access-" + "bcdfghjklm"[index] * 5
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"train-{index}-x7k2q", "namespace": "ml",
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
            "spec": {"hostname": f"train-{index}", "subdomain": "train", "serviceAccountName": "default",
                     "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                     "env": [{"name": "RANK", "value": str(index)}],
                                     "resources": {"limits": {"nvidia.com/gpu": "4"}},
                                     "volumeMounts": [token_mount(token)]}],
                     "volumes": [token_volume(token)]}}


def test_replicas_share_their_image_lookups(monkeypatch: Any) -> None:
    """The pods of one controller differ in token volume, hostname and env: which images to look
    up is worked out for the first only, and every pod gets the lookups."""
    from policies import engine

    computed = _counted(monkeypatch, engine, "image_uses")
    lookups = Lookups()
    app = create_app(Config(), StaticFacts(), image_lookups=cast(ImageLookupService, lookups))
    _create_all(app, (_replica(i) for i in range(10)))
    assert len(computed) == 1
    assert lookups.asked == [(("nvcr.io/nvidia/pytorch:24.05-py3", "amd64"),)] * 10


def test_an_ignore_annotation_is_part_of_the_image_lookup_key() -> None:
    """Two pods with one spec, the first ignoring the CUDA rule: the second still gets its lookup
    (the key once held the spec alone, and the second pod inherited the first one's "none")."""
    lookups = Lookups()
    app = create_app(Config(), StaticFacts(), image_lookups=cast(ImageLookupService, lookups))
    ignoring = _replica(0)
    ignoring["metadata"]["annotations"] = {"gpuguard.io/ignore": "gpu-cuda-driver-mismatch"}
    _create_all(app, (ignoring, _replica(0)))
    assert lookups.asked == [(("nvcr.io/nvidia/pytorch:24.05-py3", "amd64"),)]


def test_templates_outside_the_spec_are_part_of_the_image_lookup_key() -> None:
    """A PodTemplate holds its pod at ``template`` and a KAITO Workspace at ``inference.template``,
    not under ``spec``: two of them in one namespace once shared the first one's lookups."""
    lookups = Lookups()
    app = create_app(Config(), StaticFacts(), image_lookups=cast(ImageLookupService, lookups))

    def gpu_pod(image: str) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": "c", "image": image, "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}

    def pod_template(name: str, image: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name, "namespace": "ml"},
                "template": gpu_pod(image)}

    def workspace(name: str, image: str) -> dict[str, Any]:
        return {"apiVersion": "kaito.sh/v1beta1", "kind": "Workspace", "metadata": {"name": name, "namespace": "ml"},
                "resource": {"instanceType": "Standard_NC24ads_A100_v4"}, "inference": {"template": gpu_pod(image)}}
    _create_all(app, (pod_template("a", "example.com/a:1"), pod_template("b", "example.com/b:1"),
                      workspace("a", "example.com/c:1"), workspace("b", "example.com/d:1")))
    assert lookups.asked == [((f"example.com/{name}:1", "amd64"),) for name in "abcd"]


def test_replicas_as_the_api_server_sends_them_are_judged_once(monkeypatch: Any) -> None:
    """Ten pods of one Indexed Job: each with its own name, token volume, hostname and RANK, as
    the ServiceAccount plugin and the Job controller leave them.  The rules run for the first only,
    and every pod gets the same verdict."""
    from gpuguard.sources.snapshot import load_cluster_facts
    from policies import engine
    from tests.support.paths import EXAMPLES

    runs = _counted(monkeypatch, engine, "_check")
    app = create_app(Config(), StaticFacts(load_cluster_facts(str(EXAMPLES / "cluster.yaml"))))
    responses = _create_all(app, (_replica(i) for i in range(10)))
    assert len(runs) == 1
    assert all(r["allowed"] is False for r in responses)  # no toleration for the GPU nodes' taint
    assert len({r["status"]["message"].replace(f"train-{i}-", "train-N-") for i, r in enumerate(responses)}) == 1
