"""Pod-spec extraction for every workload kind in policies.podspec.WORKLOADS."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies import pointer
from policies.podspec import WORKLOADS, extract
from tests.support.paths import CORPUS, FIXTURES

PODSPEC_FIXTURES = FIXTURES / "podspec"
FILES = sorted(PODSPEC_FIXTURES.glob("*.yaml"))


def _expected(path: Path) -> list[str]:
    m = re.search(r"^# templates:(.*)$", path.read_text(), re.MULTILINE)
    assert m, f"{path.name}: no '# templates:' header"
    return m.group(1).split()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_extracts_expected_templates(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    templates = extract(obj)
    assert [t.spec_pointer for t in templates] == _expected(path)
    for t in templates:
        assert pointer.resolve(obj, t.spec_pointer) is t.spec
        for c in t.containers:
            assert pointer.resolve(t.spec, pointer.join("", c.path)) is c.container


def test_every_workload_kind_has_a_fixture() -> None:
    covered = set()
    for path in FILES:
        obj = yaml.safe_load(path.read_text())
        group = obj["apiVersion"].rpartition("/")[0]
        covered.add((group, obj["kind"]))
    missing = {(w.group, w.kind) for w in WORKLOADS} - covered
    assert not missing


def test_kserve_model_component_is_a_container() -> None:
    obj = yaml.safe_load((PODSPEC_FIXTURES / "inferenceservice.yaml").read_text())
    predictor = extract(obj)[0]
    assert [(c.path, c.kind) for c in predictor.containers] == [(("model",), "component")]
    assert predictor.containers[0].resource_map("limits") == {"nvidia.com/gpu": "1"}
    assert predictor.metadata_pointer == "/metadata"


def test_trainjob_resources_per_node() -> None:
    obj = yaml.safe_load((PODSPEC_FIXTURES / "trainjob.yaml").read_text())
    (trainer,) = extract(obj)
    (c,) = trainer.containers
    assert c.resources_path == ("resourcesPerNode",)
    assert c.resource_map("limits") == {"nvidia.com/gpu": 2}
    assert trainer.scheduling_known is False


def test_katib_trial_spec_pointers_are_absolute() -> None:
    obj = yaml.safe_load((PODSPEC_FIXTURES / "experiment.yaml").read_text())
    (t,) = extract(obj)
    assert t.metadata_pointer == "/spec/trialTemplate/trialSpec/spec/template/metadata"


def test_volcano_job_is_not_a_batch_job() -> None:
    obj = yaml.safe_load((PODSPEC_FIXTURES / "volcanojob.yaml").read_text())
    assert [t.spec_pointer for t in extract(obj)] == ["/spec/tasks/0/template/spec", "/spec/tasks/1/template/spec"]
    obj["apiVersion"] = "batch/v1"
    assert extract(obj) == []


@pytest.mark.parametrize(
    "obj",
    [None, [], "text", {"kind": "Pod"}, {"apiVersion": "v1", "kind": "Pod", "spec": "x"},
     {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": []}},
     {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": ["x", None, 3]}}],
)
def test_malformed_objects_do_not_crash(obj: Any) -> None:
    for t in extract(obj):
        assert t.containers == ()


def test_config_template_paths_extend_the_table() -> None:
    config = load_config(
        {"podTemplatePaths": [{"apiVersion": "example.com/v1", "kind": "Trainer", "template": "/spec/workers/*/template"}]}
    )
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Trainer",
        "metadata": {"name": "t"},
        "spec": {"workers": {"a": {"template": {"spec": {"containers": [{"name": "c"}]}}}}},
    }
    assert [t.spec_pointer for t in extract(obj, config.workload_index)] == ["/spec/workers/a/template/spec"]
    assert extract(obj) == []


def _corpus_docs() -> list[Any]:
    real = CORPUS / "real"
    if not real.is_dir():
        return []
    out = []
    for path in sorted(real.iterdir()):
        for i, doc in enumerate(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader)):
            if isinstance(doc, dict) and (doc.get("apiVersion", "").rpartition("/")[0], doc.get("kind")) in {
                (w.group, w.kind) for w in WORKLOADS
            }:
                out.append(pytest.param(doc, id=f"{path.name[:60]}-{i}"))
    return out


@pytest.mark.parametrize("doc", _corpus_docs())
def test_corpus_workloads_yield_pod_specs_with_containers(doc: dict[str, Any]) -> None:
    templates = extract(doc)
    assert templates, "a known workload kind yielded no pod spec"
    assert any(t.containers for t in templates)


@functools.cache
def _documents(root: Path) -> tuple[tuple[str, Any], ...]:
    found: list[tuple[str, Any]] = []
    for path in sorted(root.rglob("*.y*ml")):
        try:
            found.extend((path.name, doc) for doc in yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue
    return tuple(found)


def _objects_of(kind_key: tuple[str, str], root: Path) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, doc in _documents(root):
        api_version = doc.get("apiVersion") if isinstance(doc, dict) else None
        if isinstance(api_version, str) and (api_version.rpartition("/")[0], doc.get("kind")) == kind_key:
            found.append((name, doc))
    return found


def _wildcard_collections(obj: dict[str, Any], pattern: tuple[str, ...]) -> list[Any]:
    """The values the first ``*`` of ``pattern`` runs over in ``obj`` (absent paths give none)."""
    node: Any = obj
    for segment in pattern[: pattern.index("*")]:
        if not isinstance(node, dict) or segment not in node:
            return []
        node = node[segment]
    return [node]


WILDCARD_LOCATIONS = [(w, loc) for w in WORKLOADS for loc in w.locations if loc.wildcard is not None]


@pytest.mark.parametrize(
    ("workload", "location"), WILDCARD_LOCATIONS, ids=[f"{w.kind}:{'/'.join(loc.pattern)}" for w, loc in WILDCARD_LOCATIONS]
)
def test_wildcard_declarations_match_real_objects(workload: Any, location: Any) -> None:
    """What each ``*`` runs over (list or map) is declared in the table, and the webhook's CEL relies
    on it; check it on the public corpus (real upstream manifests), falling back to the fixtures
    only for kinds the corpus lacks."""
    key = (workload.group, workload.kind)
    examples = _objects_of(key, CORPUS / "real") or _objects_of(key, PODSPEC_FIXTURES)
    collections = [(name, c) for name, obj in examples for c in _wildcard_collections(obj, location.pattern)]
    assert collections, f"no example of {workload.kind} with /{'/'.join(location.pattern)}"
    expected = list if location.wildcard == "list" else dict
    for name, collection in collections:
        assert isinstance(collection, expected), f"{name}: {location.pattern} holds a {type(collection).__name__}"


def test_misshapen_templates_are_found_where_extraction_passes_over_them() -> None:
    from policies.podspec import misshapen_templates

    gpu = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    cases: list[tuple[Any, list[tuple[str, str]]]] = [
        ({"apiVersion": "v1", "kind": "Pod", "spec": [1, 2]}, [("/spec", "a list")]),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": "x"}}, [("/spec/template", "a string")]),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": 3}, [("/spec", "a number")]),
        ({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": True}}}}},
         [("/spec/jobTemplate/spec/template/spec", "a boolean")]),
        ({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
          "spec": {"pytorchReplicaSpecs": {"Master": [1], "Worker": {"template": {"spec": gpu}}}}},
         [("/spec/pytorchReplicaSpecs/Master", "a list")]),
        # absent or null is not misshapen, and neither are valid objects or kinds gpuguard does not read
        ({"apiVersion": "v1", "kind": "Pod", "spec": None}, []),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": None}}, []),
        ({"apiVersion": "v1", "kind": "Pod", "spec": gpu}, []),
        ({"apiVersion": "v1", "kind": "ConfigMap", "data": [1]}, []),
        ([1], []),
    ]
    for obj, expected in cases:
        assert [(m.at, m.found) for m in misshapen_templates(obj)] == expected, obj
    template = "a pod template or spec (an object)"
    assert {m.expected for m in misshapen_templates(cases[0][0])} == {template}


def test_misshapen_containers_and_resources_are_found_too() -> None:
    from policies.podspec import misshapen_templates

    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {
        "initContainers": "setup",
        "containers": [
            "train",
            {"name": "a", "resources": ["nvidia.com/gpu"]},
            {"name": "b", "resources": {"limits": "nvidia.com/gpu=1", "requests": None}},
            {"name": "ok", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        ]}}
    assert [(m.at, m.found, m.expected) for m in misshapen_templates(pod)] == [
        ("/spec/initContainers", "a string", "a list of containers"),
        ("/spec/containers/0", "a string", "a container (an object)"),
        ("/spec/containers/1/resources", "a list", "resources (an object)"),
        ("/spec/containers/2/resources/limits", "a string", "resource quantities (an object)"),
    ]
    workflow = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "spec": {"templates": [
        {"name": "t", "container": {"image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}, "sidecars": [3]},
        {"name": "u", "script": "echo"},
    ]}}
    assert [(m.at, m.found) for m in misshapen_templates(workflow)] == [("/spec/templates/0/sidecars/0", "a number")]


def test_switches_the_rules_read_must_be_booleans() -> None:
    """``hostIPC: "true"`` is no switch: the API server rejects it, and the shared-memory rule would pass
    it over in silence, so it is an input error (a warning at admission)."""
    from policies.podspec import misshapen_templates

    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {
        "hostIPC": "true", "hostNetwork": True, "hostPID": 1,
        "containers": [{"name": "a", "securityContext": {"privileged": "yes"}},
                       {"name": "b", "securityContext": {"privileged": False}}]}}}}
    assert [(m.at, m.found, m.expected) for m in misshapen_templates(deployment)] == [
        ("/spec/template/spec/hostIPC", "a string", "a boolean (true or false)"),
        ("/spec/template/spec/hostPID", "a number", "a boolean (true or false)"),
        ("/spec/template/spec/containers/0/securityContext/privileged", "a string", "a boolean (true or false)"),
    ]
