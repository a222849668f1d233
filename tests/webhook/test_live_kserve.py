"""LiveFacts watches KServe's ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs where
KServe is installed: an InferenceService admitted by the webhook is judged with its runtime merged in.

The real ``kubernetes`` client talks to the in-process fake API server, which answers 404 for the
serving.kserve.io resources until a test "installs" KServe.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from policies import evaluate
from tests.support.fake_apiserver import DEFAULT_RESOURCES, KSERVE_RESOURCES, FakeApiServer, gpu_node, serving
from tests.support.paths import CORPUS
from tests.webhook.test_live_facts import start_live

pytestmark = pytest.mark.integration

ISVC = CORPUS / "real" / "NVIDIA__nim-deploy__kserve__nim-models__llama3-70b-instruct_4xh100_1.0.0.yaml"
RUNTIME = CORPUS / "kserve" / "NVIDIA__nim-deploy__kserve__runtimes__llama3-70b-instruct-1.0.0.yaml"


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer((*DEFAULT_RESOURCES, *KSERVE_RESOURCES))
    state.put("nodes", gpu_node("gpu-a"))
    with serving(state):
        yield state


def shm(facts: Any) -> list[str]:
    isvc = yaml.safe_load(ISVC.read_text())
    return [str(f.severity) for f in evaluate(isvc, None, facts).findings if f.rule == "gpu-shared-memory"]


def test_cluster_serving_runtimes_are_listed_and_watched(api: FakeApiServer) -> None:
    api.absent.difference_update(KSERVE_RESOURCES)
    runtime = yaml.safe_load(RUNTIME.read_text())
    api.put("clusterservingruntimes", runtime)
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready and live.current().kserve is not None, "the ClusterServingRuntime")
        assert shm(live.current()) == []  # the runtime's kserve-container mounts a memory-backed /dev/shm
        changed = copy.deepcopy(runtime)
        del changed["spec"]["containers"][0]["volumeMounts"]
        del changed["spec"]["volumes"]
        api.put("clusterservingruntimes", changed)
        recorder.wait_for(lambda: shm(live.current()) == ["warning"], "MODIFIED ClusterServingRuntime")
        api.delete("clusterservingruntimes", runtime["metadata"]["name"])
        recorder.wait_for(lambda: live.current().kserve is None, "DELETED ClusterServingRuntime")
        assert shm(live.current()) == ["info"]  # named, but no longer known
    finally:
        live.stop()


def test_without_kserve_the_facts_have_none_and_are_ready(api: FakeApiServer) -> None:
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready, "ready without KServe")
        assert live.current().kserve is None
        assert shm(live.current()) == ["info"]
    finally:
        live.stop()
