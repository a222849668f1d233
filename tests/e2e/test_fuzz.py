"""Property tests: malformed objects never crash the engine, the linter or the webhook.

Objects keep the shape of a GPU workload but any field may hold any JSON value, so every rule
meets strings where it expects maps, lists where it expects numbers, and so on.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx
import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from webhook.app import StaticFacts, create_app

pytestmark = pytest.mark.slow

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from(["", "1", "0.5", "500m", "-1", "nvidia.com/gpu", "Exists", "NoSchedule", "/dev/nvidia0", "all"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(
        ["name", "key", "operator", "value", "effect", "values", "path", "medium", "mountPath", "claims"]
    ), children, max_size=3),
    max_leaves=12,
)

RESOURCE_NAMES = st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "amd.com/gpu", "cpu", "memory", "x"])


def _maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(value, JSON)


CONTAINER = st.fixed_dictionaries(
    {"name": _maybe(st.text(max_size=5)), "image": _maybe(st.sampled_from(["nvidia/cuda:12.4.1-base-ubuntu22.04", "x"]))},
    optional={
        "resources": _maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "limits": _maybe(st.dictionaries(RESOURCE_NAMES, JSON, max_size=3)),
                    "requests": _maybe(st.dictionaries(RESOURCE_NAMES, JSON, max_size=3)),
                    "claims": JSON,
                },
            )
        ),
        "env": JSON,
        "securityContext": JSON,
        "volumeMounts": JSON,
        "restartPolicy": _maybe(st.just("Always")),
    },
)

POD_SPEC = st.fixed_dictionaries(
    {"containers": _maybe(st.lists(_maybe(CONTAINER), max_size=3))},
    optional={
        "initContainers": _maybe(st.lists(_maybe(CONTAINER), max_size=2)),
        "tolerations": JSON,
        "nodeSelector": JSON,
        "affinity": JSON,
        "volumes": JSON,
        "resourceClaims": JSON,
        "resources": JSON,
        "runtimeClassName": JSON,
    },
)

KINDS = st.sampled_from(
    [("v1", "Pod", ()), ("apps/v1", "Deployment", ("template",)), ("kubeflow.org/v1", "PyTorchJob", ())]
)


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    api_version, kind, _ = draw(KINDS)
    spec = draw(POD_SPEC)
    meta = draw(_maybe(st.fixed_dictionaries({"name": st.just("w")}, optional={"annotations": JSON})))
    if kind == "Pod":
        return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}
    template = {"metadata": draw(_maybe(st.just({}))), "spec": spec}
    if kind == "Deployment":
        return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {"template": template}}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta,
        "spec": {"pytorchReplicaSpecs": {"Worker": {"template": template}}},
    }


FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(workloads())
def test_engine_never_raises_and_patches_apply(example_facts: ClusterFacts, obj: dict[str, Any]) -> None:
    config = load_config({"mutate": ["gpu-limit-missing", "gpu-taint-not-tolerated"]})
    ev = evaluate(obj, config, example_facts)
    for finding in ev.findings:
        assert finding.rule and finding.message and finding.path.startswith("/")
    ops = ev.patch(config.mutate)
    # The ops apply to the very object they were computed for (RFC 6902, as the API server applies
    # them), and the patched object needs no further fix: the webhook may be reinvoked.
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), [op.to_dict() for op in ops])
    assert evaluate(patched, config, example_facts).patch(config.mutate) == []


def _post(app: Any, path: str, body: bytes) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook") as client:
            return await client.post(path, content=body, headers={"content-type": "application/json"})

    return asyncio.run(go())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(obj=workloads(), path=st.sampled_from(["/validate", "/mutate"]))
def test_webhook_answers_every_object_with_200_or_400(example_facts: ClusterFacts, obj: dict[str, Any], path: str) -> None:
    app = create_app(load_config({"mutate": ["gpu-limit-missing"]}), StaticFacts(example_facts))
    review: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "f2c6a1de-5c64-4c1b-9f3e-1b2a3c4d5e6f",
            "kind": {"group": "", "version": "v1", "kind": str(obj.get("kind"))},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "userInfo": {"username": "fuzz"},
            "object": obj,
            "dryRun": False,
        },
    }
    response = _post(app, path, orjson.dumps(review))
    assert response.status_code in (200, 400)
    if response.status_code == 200:
        answer = response.json()["response"]
        assert answer["uid"] == review["request"]["uid"]
        assert "gpuguard could not check this object" not in str(answer.get("warnings")), "the engine raised"
