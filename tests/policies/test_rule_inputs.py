"""The rule-results memo key keeps what rules read and only that: replicas of one template as the
API server sends them share a key, and pods that share a key get the same findings."""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuguard.sources.loader import parse_text
from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from policies.engine import Evaluation, evaluate
from policies.facts import ClusterFacts
from policies.podspec import PodTemplate, extract
from policies.rule_inputs import PROJECTED_SHAPES, TOKEN_VOLUME, UNREAD, annotations_read, spec_read
from policies.template_inputs import template_key
from tests.support.admission import TOKEN_MOUNT_PATH, TOKEN_VOLUME_SOURCE, token_mount, token_volume
from tests.support.paths import CORPUS, EXAMPLES, FIXTURES, ROOT


def _pod(**spec: Any) -> PodTemplate:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec}
    (template,) = extract(obj, Config().workload_index)
    return template


def _worker(env: list[Any], mounts: list[Any] | None = None) -> dict[str, Any]:
    return {"name": "worker", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "env": env,
            "volumeMounts": mounts or [], "resources": {"limits": {"nvidia.com/gpu": "8"}}}


def _key(pod: PodTemplate, object_annotations: Any = None) -> Any:
    return template_key(pod, {"metadata": {"annotations": object_annotations}})


def _as_sent(suffix: str, rank: str, hostname: str) -> PodTemplate:
    """One replica of a training job as the ServiceAccount plugin and the controller leave it."""
    token = f"kube-api-access-{suffix}"
    env = [{"name": "RANK", "value": rank}, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]
    return _pod(
        hostname=hostname, subdomain="trainer",
        containers=[_worker(env, [{"name": "dshm", "mountPath": "/dev/shm"},
                                  token_mount(token)])],
        volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory"}},
                 {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{hostname}"}},
                 token_volume(token)],
    )


def test_replicas_of_one_template_share_a_key() -> None:
    first, second = _as_sent("x2b9q", "0", "trainer-0"), _as_sent("7hkzd", "1", "trainer-1")
    assert first.spec != second.spec
    assert spec_read(first) == spec_read(second)
    assert _key(first) == _key(second)


def test_the_key_keeps_what_rules_read() -> None:
    base = _as_sent("x2b9q", "0", "trainer-0")
    read = spec_read(base)
    env = read["containers"][0]["env"]
    assert env == [UNREAD, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]
    assert [v["name"] for v in read["volumes"]] == ["dshm", "data", TOKEN_VOLUME]
    assert read["volumes"][1]["persistentVolumeClaim"]["claimName"] == UNREAD
    assert read["containers"][0]["volumeMounts"][1]["name"] == TOKEN_VOLUME
    assert (read["hostname"], read["subdomain"]) == (UNREAD, UNREAD)

    def changed(edit: Any) -> PodTemplate:
        pod = _as_sent("x2b9q", "0", "trainer-0")
        edit(pod.spec)
        return pod

    read_edits = {
        "a relevant variable's value": lambda s: s["containers"][0]["env"][1].update(value="all"),
        "a variable's position": lambda s: s["containers"][0]["env"].insert(0, {"name": "A", "value": "b"}),
        "a variable from valueFrom": lambda s: s["containers"][0]["env"][0].update(
            valueFrom={"fieldRef": {"fieldPath": "metadata.name"}}),
        "CUDA_VERSION": lambda s: s["containers"][0]["env"].__setitem__(0, {"name": "CUDA_VERSION", "value": "12.4"}),
        "NVIDIA_VISIBLE_DEVICES": lambda s: s["containers"][0]["env"].append(
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}),
        "the volume at /dev/shm": lambda s: s["volumes"][0].update(emptyDir={}),
        "the /dev/shm volume's name": lambda s: s["volumes"][0].update(name="shm"),
        "the image": lambda s: s["containers"][0].update(image="nvidia/cuda:12.2.0-base-ubuntu22.04"),
        "a container name": lambda s: s["containers"][0].update(name="trainer"),
    }
    for what, edit in read_edits.items():
        assert _key(changed(edit)) != _key(base), what


def test_a_token_volume_mounted_at_dev_shm_keeps_its_name() -> None:
    token = "kube-api-access-x2b9q"
    pod = _pod(containers=[_worker([], [{"name": token, "mountPath": "/dev/shm/"}])],
               volumes=[token_volume(token)])
    assert spec_read(pod)["volumes"][0]["name"] == token


def test_only_generated_token_volume_names_are_replaced() -> None:
    for name, source in (("kube-api-access-abc", TOKEN_VOLUME_SOURCE), ("kube-api-access-aaaaa", TOKEN_VOLUME_SOURCE),
                         ("kube-api-access-x2b9q", {"emptyDir": {}})):
        pod = _pod(containers=[_worker([], [{"name": name, "mountPath": TOKEN_MOUNT_PATH}])], volumes=[{"name": name, **source}])
        assert spec_read(pod)["volumes"][0]["name"] == name, name
        assert spec_read(pod)["containers"][0]["volumeMounts"][0]["name"] == name, name


def test_data_holding_a_stand_in_is_keyed_whole() -> None:
    for spec in (
        {"containers": [_worker([UNREAD, {"name": "A", "value": "b"}])]},
        {"containers": [_worker([], [{"name": TOKEN_VOLUME, "mountPath": "/data"}])]},
        {"containers": [_worker([])], "volumes": [{"name": UNREAD, "emptyDir": {}}]},
        {"containers": 7},
        {"containers": [_worker([])], "volumes": 3},
    ):
        pod = _pod(**spec)
        assert spec_read(pod) is pod.spec


def test_names_and_lists_of_any_type_never_break_the_key() -> None:
    """Found by fuzzing: a mount named by a list made the key raise, and the engine with it."""
    token = "kube-api-access-x2b9q"
    odd_mounts = [{"name": ["a"], "mountPath": "/dev/shm"}, {"name": {"b": 1}, "mountPath": TOKEN_MOUNT_PATH},
                  {"name": token, "mountPath": TOKEN_MOUNT_PATH}, ["not", "a", "mount"]]
    for spec in (
        {"containers": [_worker([{"name": ["RANK"], "value": "1"}], odd_mounts)],
         "volumes": [token_volume(token), {"name": ["x"]}]},
        {"containers": [_worker([], odd_mounts)], "volumes": [token_volume(token)], "hostname": ["h"]},
        {"containers": [{"name": "c", "env": 3, "volumeMounts": {"name": "m"}}], "volumes": {"name": "v"}},
        {"containers": [{"name": "c", "env": [{"name": "RANK", "value": "1"}]}], "initContainers": 5},
    ):
        pod = _pod(**spec)
        _key(pod)
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec}
        ev = evaluate(obj, Config(), load_cluster_facts(str(EXAMPLES / "cluster.yaml")))
        assert all(f.rule != "gpu-check-failed" for f in ev.findings), ev.findings


def test_nothing_is_changed_in_place() -> None:
    pod = _as_sent("x2b9q", "0", "trainer-0")
    before = copy.deepcopy(pod.spec)
    spec_read(pod)
    assert pod.spec == before


def test_annotations_other_than_gpuguards_strings_are_dropped() -> None:
    annotations = {"gpuguard.io/cuda-version": "12.4", "gpuguard.io/cuda-version.worker": "12.2",
                   "kubectl.kubernetes.io/last-applied-configuration": "{...}", "odd": {"nested": ["x"]}}
    assert annotations_read(annotations) == {"gpuguard.io/cuda-version": "12.4",
                                             "gpuguard.io/cuda-version.worker": "12.2", "odd": {"nested": ["x"]}}
    assert annotations_read(["not", "a", "map"]) == ["not", "a", "map"]


# --- the key's soundness on real data: replicas get exactly the findings of their template ---

def _templates(obj: Any) -> list[PodTemplate]:
    return [t for t in extract(obj, Config().workload_index) if t.shape in PROJECTED_SHAPES] if isinstance(
        obj, dict) else []


def _as_replica(obj: dict[str, Any], n: int, rng: random.Random) -> dict[str, Any]:
    """``obj`` as its controller's n-th pod would reach the webhook: a token volume with its own
    suffix, its own hostname, subdomain and claim names, per-replica variables and annotations."""
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {}) if isinstance(obj.get("metadata", {}), dict) else {}
    if isinstance(meta.get("annotations", {}), dict):
        meta.setdefault("annotations", {})["example.com/replica"] = str(n)
    suffix = "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    for pod in _templates(obj):
        spec = pod.spec
        spec["hostname"], spec["subdomain"] = f"replica-{n}", f"set-{n}"
        if isinstance(pod.metadata.get("annotations", {}), dict) and pod.metadata is not obj.get("metadata"):
            pod.metadata.setdefault("annotations", {})["example.com/index"] = str(n)
        volumes = spec.setdefault("volumes", [])
        if not isinstance(volumes, list):
            continue
        for volume in volumes:
            claim = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
            if isinstance(claim, dict):
                claim["claimName"] = f"data-replica-{n}"
        volumes.append(token_volume(f"kube-api-access-{suffix}"))
        for key in ("initContainers", "containers"):
            for c in spec.get(key) or ():
                if not isinstance(c, dict):
                    continue
                if isinstance(c.get("volumeMounts", []), list):
                    c.setdefault("volumeMounts", []).append(
                        token_mount(f"kube-api-access-{suffix}"))
                env = c.setdefault("env", [])
                if isinstance(env, list):
                    env[:0] = [{"name": "RANK", "value": str(n)}, {"name": "MASTER_ADDR", "value": f"m-{n}"}]
                    for var in env[2:]:
                        if isinstance(var, dict) and var.get("name") == "RUN_ID":
                            var["value"] = f"run-{n}"
    return obj


def _outcome(ev: Evaluation) -> tuple[Any, ...]:
    return tuple(ev.findings), ev.skipped_rules, tuple(ev.placeholders), ev.patch()


def _documents() -> list[tuple[str, dict[str, Any]]]:
    sys.path.insert(0, str(ROOT / "bench"))
    import distinct_reviews
    import orjson

    docs = []
    for body in distinct_reviews.reviews(400)[::2]:
        obj = orjson.loads(body)["request"]["object"]
        docs.append((f"review {obj['metadata']['name']}", obj))
    folders = [FIXTURES, EXAMPLES / "manifests"] + ([CORPUS / "real"] if CORPUS.exists() else [])
    for folder in folders:
        for path in sorted(p for p in Path(folder).rglob("*") if p.suffix in (".yaml", ".yml")):
            try:
                parsed = parse_text(path.read_text(encoding="utf-8", errors="replace"), path.name)
            except Exception:  # files the loader refuses hold no template
                continue
            docs.extend((f"{path.name}#{d.index}", d.data) for d in parsed.documents if _templates(d.data))
    return docs


@pytest.mark.slow  # the corpus, the fixtures and 200 generated reviews
def test_replicas_get_the_findings_of_a_fresh_evaluation() -> None:
    """Two replicas share every template key; evaluated apart they get the same findings, and the
    second, served from the memo the first filled, gets what a fresh evaluation gives it."""
    config = Config()
    rng = random.Random(7)
    docs = _documents()
    assert len(docs) > 300
    shared = load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
    templates = 0
    for label, doc in docs:
        first, second = _as_replica(doc, 0, rng), _as_replica(doc, 1, rng)
        keys = [
            [template_key(t, o) for t in _templates(o)]
            for o in (first, second)
        ]
        assert keys[0] == keys[1], label
        templates += len(keys[0])
        for fresh in (ClusterFacts.empty, lambda: load_cluster_facts(str(EXAMPLES / "cluster.yaml"))):
            expected = _outcome(evaluate(second, config, fresh()))
            assert _outcome(evaluate(first, config, fresh())) == expected, label
        evaluate(first, config, shared)
        assert _outcome(evaluate(second, config, shared)) == _outcome(
            evaluate(second, config, load_cluster_facts(str(EXAMPLES / "cluster.yaml")))), label
    assert templates > 300


def test_what_extraction_takes_from_outside_the_spec_is_part_of_the_key() -> None:
    """KubeRay gives the Ray container a memory-backed /dev/shm unless ``rayStartParams`` sets a
    plasma directory: the same template spec is judged differently in the two groups."""

    def cluster(params: dict[str, str]) -> dict[str, Any]:
        worker = {"name": "ray-worker", "image": "rayproject/ray:2.9.0-gpu",
                  "resources": {"limits": {"nvidia.com/gpu": "4", "memory": "64Gi"}}}
        return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "ray", "namespace": "ml"},
                "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}},
                         "workerGroupSpecs": [{"groupName": "gpu", "rayStartParams": params,
                                               "template": {"spec": {"containers": [worker]}}}]}}

    def shm_findings(ev: Evaluation) -> list[str]:
        return [f.path for f in ev.findings if f.rule == "gpu-shared-memory"]

    config, facts = Config(), load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
    provided, own = cluster({}), cluster({"plasma-directory": "/tmp/plasma"})
    assert shm_findings(evaluate(provided, config, facts)) == []
    assert shm_findings(evaluate(own, config, facts)) == ["/spec/workerGroupSpecs/0/template/spec/containers/0"]


# --- a deterministic fuzz: odd shapes, and pairs that differ only in what the key drops ---

_ATOMS: tuple[Any, ...] = (
    None, 0, 1.5, True, "x", "kube-api-access-bcdfg", UNREAD, [], {}, [1, "a"],
    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "RANK", "value": "3"}, {"name": "RANK"},
    {"name": 5, "value": "x"}, {"name": ["n"], "value": "x"}, token_volume("kube-api-access-bcdfg"),
    {"name": "kube-api-access-bcdfg", "mountPath": "/dev/shm"}, {"name": "kube-api-access-bcdfg", "mountPath": TOKEN_MOUNT_PATH},
    {"name": ["kube-api-access-bcdfg"], "mountPath": "/dev/shm"},
    {"name": "d", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "d", "persistentVolumeClaim": "c"},
    {"name": "dshm", "emptyDir": {"medium": "Memory"}}, {"name": "dshm", "emptyDir": {}},
)


def _odd(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.4:
        return copy.deepcopy(rng.choice(_ATOMS))
    if roll < 0.7:
        return [_odd(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ("name", "env", "volumeMounts", "value", "mountPath", "resources", "image")
    return {rng.choice(keys): _odd(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _odd_pod(rng: random.Random) -> dict[str, Any]:
    worker = {"name": rng.choice(["w", 3, None]), "image": rng.choice(["nvcr.io/nvidia/pytorch:24.05-py3", 5]),
              "resources": rng.choice([{"limits": {"nvidia.com/gpu": rng.choice(["2", "x", 2, "4"])}}, None, []]),
              "env": rng.choice([_odd(rng), [_odd(rng) for _ in range(3)]]),
              "volumeMounts": rng.choice([_odd(rng), [_odd(rng) for _ in range(3)]])}
    spec = {"containers": rng.choice([[worker], [worker, _odd(rng)], _odd(rng)]),
            "volumes": rng.choice([_odd(rng), [_odd(rng) for _ in range(3)]]),
            "hostname": rng.choice(["h", _odd(rng)]), "initContainers": rng.choice([None, [_odd(rng)], _odd(rng)])}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "annotations": _odd(rng)},
            "spec": spec}


def _with_unread_changes(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with every field the key drops changed the way replicas differ."""
    other = copy.deepcopy(pod)
    spec = other["spec"]
    if isinstance(spec.get("hostname"), str):
        spec["hostname"] += "-1"
    for c in spec["containers"] if isinstance(spec.get("containers"), list) else ():
        env = c.get("env") if isinstance(c, dict) else None
        for var in env if isinstance(env, list) else ():
            if (isinstance(var, dict) and isinstance(var.get("name"), str) and not var["name"].startswith("NVIDIA_")
                    and var.keys() <= {"name", "value"} and isinstance(var.get("value", ""), str)):
                var.update(name=var["name"] + "_B", value="other")

    def rename(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: rename(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rename(v) for v in node]
        return "kube-api-access-zzzzz" if node == "kube-api-access-bcdfg" else node

    return dict(rename(other))


@pytest.mark.slow
def test_fuzzed_pods_never_break_the_key_and_equal_keys_mean_equal_findings() -> None:
    rng, config = random.Random(20261201), Config()
    pairs = 0
    for _ in range(3000):
        pod = _odd_pod(rng)
        other = _with_unread_changes(pod)
        keys = [
            [template_key(t, o) for t in _templates(o)]
            for o in (pod, other)
        ]
        if keys[0] != keys[1] or pod == other:
            continue
        pairs += 1
        first = evaluate(pod, config, load_cluster_facts(str(EXAMPLES / "cluster.yaml")))
        second = evaluate(other, config, load_cluster_facts(str(EXAMPLES / "cluster.yaml")))
        assert _outcome(first) == _outcome(second), (pod, other)
    assert pairs > 150
