"""No string in a review can make the engine slow or make it fail.

Under ``failurePolicy: Ignore`` a review that outlives the webhook's timeout is an admission, so
every string an object can carry must meet bounded work: a 32 KiB image tag against a quadratic
pattern took 6–14 s, a 40 KiB ``{{…`` node-selector value 10–22 s.  These properties put strings
built to defeat backtracking (long runs of the characters the engine's patterns and parsers look
for) in every field a rule reads, and assert the engine judges the pod within ``BOUND`` of CPU time
(thread time: other work on the machine does not count) and never fails on it (no
``gpu-check-failed``).  CEL selectors are the one exception by nature (their compilation is linear
but slow): tests/webhook/test_lanes.py covers how the webhook keeps them from holding anyone up.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuguard.sources.configmodel import load_config
from gpuguard.sources.snapshot import load_cluster_facts
from policies import ClusterFacts, evaluate
from tests.support.paths import EXAMPLES

BOUND = 0.05  # seconds of CPU time for one evaluation and its fix rounds, on 2 cores
MAX_LEN = 64 * 1024

pytestmark = pytest.mark.slow

FACTS = load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
CONFIG = load_config({})

# Characters the engine's patterns and parsers key on: digits, separators, braces and dollars of
# placeholders, the letters of tag conventions (cuda, cudnn, py3, runtime, devel, gpu), operators
# of NVIDIA_REQUIRE_* constraints, path separators.
ALPHABET = "0123456789.-_:/@${}()=<>, cudnpyrtimevlgbaseAZ\t"


@st.composite
def hostile(draw: st.DrawFn) -> str:
    """A long run of a short unit (what defeats backtracking), with a prefix and a tail."""
    unit = draw(st.text(alphabet=ALPHABET, min_size=1, max_size=4))
    longest = MAX_LEN // len(unit)
    repeat = draw(st.one_of(st.just(longest), st.integers(min_value=longest // 2, max_value=longest),
                            st.integers(min_value=1, max_value=longest)))
    prefix = draw(st.sampled_from(["", "pytorch/pytorch:", "nvidia/cuda:", "nvcr.io/nvidia/pytorch:", "{{", "${",
                                   "cuda>=", "12.", "brand=tesla,driver>=", "/dev/", "v"]))
    tail = draw(st.text(alphabet=ALPHABET, max_size=3))
    return prefix + unit * repeat + tail


def base_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "annotations": {}},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{
                "name": "trainer",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "env": [],
                "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "16Gi"}},
                "volumeMounts": [],
            }],
            "volumes": [],
        },
    }


def _place(pod: dict[str, Any], where: str, value: str) -> None:
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    annotations = pod["metadata"]["annotations"]
    match where:
        case "image":
            container["image"] = value
        case "gpu quantity":
            container["resources"]["limits"]["nvidia.com/gpu"] = value
        case "resource name":
            container["resources"]["limits"][value] = "1"
        case "node selector":
            spec["nodeSelector"] = {"pool": value, value[:63]: "x"}
        case "affinity":
            expr = {"key": "pool", "operator": "In", "values": [value]}
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr, {"key": value, "operator": "Gt", "values": [value]}]}]
            }}}
        case "toleration":
            spec["tolerations"] = [{"key": value, "operator": op, "value": value, "effect": "NoSchedule"}
                                   for op in ("Equal", "Gt", "Lt")]
        case "env":
            container["env"] = [{"name": n, "value": value} for n in (
                "NVIDIA_VISIBLE_DEVICES", "NVIDIA_REQUIRE_CUDA", "NVIDIA_REQUIRE_ARCH", "CUDA_VERSION",
                "NVIDIA_DISABLE_REQUIRE", "AMD_VISIBLE_DEVICES")]
        case "env names":
            container["env"] = [{"name": value, "value": "all"}]
            container["envFrom"] = [{"prefix": value, "configMapRef": {"name": "c"}}]
        case "annotations":
            for key in ("gpuguard.io/cuda-version", "gpuguard.io/cuda-version.trainer", "gpuguard.io/ignore",
                        "gpu-fraction", "gpu-memory", "nvidia.cdi.k8s.io/container.trainer"):
                annotations[key] = value
        case "host paths":
            spec["volumes"] = [{"name": "d", "hostPath": {"path": value}}, {"name": "r", "hostPath": {"path": "/dev"}}]
            container["volumeMounts"] = [{"name": "d", "mountPath": value}, {"name": "r", "mountPath": "/x",
                                                                            "subPath": value}]
        case "runtime class":
            spec["runtimeClassName"] = value
            spec["schedulerName"] = value
        case "memory and shm":
            container["resources"]["limits"]["memory"] = value
            spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": value}}]
            container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        case _:
            raise AssertionError(where)


FIELDS = ["image", "gpu quantity", "resource name", "node selector", "affinity", "toleration", "env", "env names",
          "annotations", "host paths", "runtime class", "memory and shm"]


def _judge(obj: dict[str, Any], facts: ClusterFacts, runs: int = 2) -> tuple[float, list[str]]:
    """CPU time of one evaluation and its fix rounds (the least of ``runs``: another process on the
    same cores only ever adds to it), and the gpu-check-failed messages."""
    spent, failures = float("inf"), []
    for _ in range(runs):
        copied = copy.deepcopy(obj)
        started = time.thread_time()
        ev = evaluate(copied, CONFIG, facts)
        ev.patch()
        spent = min(spent, time.thread_time() - started)
        failures = [f.message for f in ev.findings if f.rule == "gpu-check-failed"]
    return spent, failures


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(where=st.sampled_from(FIELDS), value=hostile())
def test_no_string_makes_the_engine_slow_or_fail(where: str, value: str) -> None:
    obj = base_pod()
    _place(obj, where, value)
    for facts in (FACTS, ClusterFacts.empty()):
        evaluate(copy.deepcopy(obj), CONFIG, facts)  # warm the per-process caches of constants
        spent, failures = _judge(obj, facts)
        assert not failures, (where, failures)
        assert spent < BOUND, f"{where}: {spent * 1000:.1f} ms for a {len(value)}-character value"


@pytest.mark.parametrize("where", FIELDS)
@pytest.mark.parametrize(
    "value",
    [
        "pytorch/pytorch:" + "1" * 32768 + "-",  # the issue's quadratic PyTorch tag
        "{{" * 20480,  # the issue's 40 KiB braces value
        "${" * 20480,
        "1." * 16384 + "x",
        "9" * 5000,  # past Python's int-string limit (4,300 digits)
        "1e" + "9" * 5000,
        "/dev/" + "../" * 10000 + "nvidia0",
        ",".join(f"gpu-rule-{i}" for i in range(6000)),  # the issue's 60,000-name ignore, within 64 KiB
        "cuda>=" + "0" * 20000,  # found by the property above: strtoumax of a 20,000-digit number
    ],
    ids=["pytorch-tag", "braces", "dollars", "dots", "digits", "exponent", "dotdot", "names", "zeros"],
)
def test_the_issues_inputs_in_every_field(where: str, value: str) -> None:
    obj = base_pod()
    _place(obj, where, value)
    evaluate(copy.deepcopy(obj), CONFIG, FACTS)
    spent, failures = _judge(obj, FACTS, runs=3)
    assert not failures, (where, failures)
    assert spent < BOUND, f"{where}: {spent * 1000:.1f} ms"
