"""``gpuguard webhook-config``: the webhook configurations follow the policy config — its
podTemplatePaths kinds in the rules and the CEL matchConditions (evaluated with cel-python, as the
API server would), its gpuResourceNames, its exemptNamespaces."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.cli import main as gpuguard
from gpuguard.sources.configmodel import load_config
from policies.podspec import WORKLOADS
from tests.deploy.test_deploy import MatchConditions, container, obj, pod_spec, template
from tests.support.sweeps import sweep
from webhook.configuration import GenerationError, render

CONFIG = """
exemptNamespaces: [nvidia-gpu-operator, kube-system, gpuguard]
gpuResourceNames: [example.com/accelerator]
podTemplatePaths:
  - {apiVersion: example.com/v1, kind: Trainer, template: /spec/workers/*/template}
  - {apiVersion: example.com/v1, kind: Server, podSpec: /spec/pod, resource: servers}
  - {apiVersion: example.com/v1, kind: Mesh, template: /spec/groups/*/replicas/*/template}
"""


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    config = tmp_path_factory.mktemp("cfg") / "gpuguard.yaml"
    config.write_text(CONFIG)
    out = tmp_path_factory.mktemp("out") / "webhooks.yaml"
    assert gpuguard(["webhook-config", "--config", str(config), "--output", str(out)]) == 0
    return documents(out.read_text())


@pytest.fixture(scope="module", params=["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"])
def conditions(request: pytest.FixtureRequest, rendered: list[dict[str, Any]]) -> MatchConditions:
    (doc,) = [d for d in rendered if d["kind"] == request.param]
    (webhook,) = doc["webhooks"]
    return MatchConditions(webhook)


def test_stdout_is_what_output_writes(rendered: list[dict[str, Any]], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "gpuguard.yaml"
    config.write_text(CONFIG)
    assert gpuguard(["webhook-config", "--config", str(config)]) == 0
    assert documents(capsys.readouterr().out) == rendered


def test_rendering_is_deterministic() -> None:
    config = load_config(yaml.safe_load(CONFIG))
    assert render(config) == render(load_config(yaml.safe_load(CONFIG)))


def test_config_kinds_join_the_rules_and_exempt_namespaces_the_selector(rendered: list[dict[str, Any]]) -> None:
    for doc in rendered:
        (webhook,) = doc["webhooks"]
        resources = {(g, r) for rule in webhook["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
        assert {(w.group or "", w.resource) for w in WORKLOADS} <= resources
        assert {("example.com", "trainers"), ("example.com", "servers"), ("example.com", "meshs")} <= resources
        label, expr = webhook["namespaceSelector"]["matchExpressions"]
        assert label == {"key": "gpuguard.io/exempt", "operator": "NotIn", "values": ["true"]}
        assert expr == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                        "values": ["gpuguard", "kube-system", "nvidia-gpu-operator"]}


def test_without_exempt_namespaces_only_the_label_exempts() -> None:
    (mutating, _) = documents(render(load_config({"exemptNamespaces": []})))
    assert mutating["webhooks"][0]["namespaceSelector"]["matchExpressions"] == [
        {"key": "gpuguard.io/exempt", "operator": "NotIn", "values": ["true"]}
    ]


def test_default_config_exempts_by_name_only_namespaces_no_tenant_can_create() -> None:
    """A tenant who may create namespaces could create one named gpu-operator: GPU infrastructure
    is exempted by the admin-set label instead (issue: exemption by well-known namespace name)."""
    (mutating, _) = documents(render(load_config({})))
    label, expr = mutating["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    assert label["key"] == "gpuguard.io/exempt"
    assert set(expr["values"]) == {"kube-system", "gpuguard"}


GPU = {"limits": {"nvidia.com/gpu": "1"}}


def trainer(workers: Any) -> dict[str, Any]:
    return obj("example.com/v1", "Trainer", {"workers": workers})


@pytest.mark.parametrize(
    "workers",
    [
        [{"template": template(pod_spec(container(resources=GPU)))}],
        {"ps": {"template": template(pod_spec(container()))}, "gpu": {"template": template(pod_spec(container(resources=GPU)))}},
    ],
    ids=["list", "map"],
)
def test_config_paths_with_a_wildcard_match_a_list_or_a_map(conditions: MatchConditions, workers: Any) -> None:
    assert conditions.decide("CREATE", trainer(workers)) is True
    cpu_only = copy.deepcopy(workers)
    for item in cpu_only if isinstance(cpu_only, list) else cpu_only.values():
        item["template"] = template(pod_spec(container()))
    assert conditions.decide("CREATE", trainer(cpu_only)) is False


def test_config_gpu_resource_names_reach_the_webhook(conditions: MatchConditions) -> None:
    server = obj("example.com/v1", "Server", {"pod": pod_spec(container(resources={"limits": {"example.com/accelerator": "1"}}))})
    assert conditions.decide("CREATE", server) is True
    other = obj("example.com/v1", "Server", {"pod": pod_spec(container(resources={"limits": {"example.com/fpga": "1"}}))})
    assert conditions.decide("CREATE", other) is False


def test_paths_cel_cannot_follow_send_every_object_of_the_kind(conditions: MatchConditions) -> None:
    mesh = obj("example.com/v1", "Mesh", {"groups": []})
    assert conditions.decide("CREATE", mesh) is True
    assert conditions.decide("CREATE", obj("example.com/v2", "Other", {})) is False


def argo(kind: str, template_body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body = {"templates": [{"name": "main", "steps": []}, {"name": "t", **template_body}], **spec}
    if kind == "CronWorkflow":
        return obj("argoproj.io/v1alpha1", kind, {"schedules": ["0 * * * *"], "workflowSpec": body})
    return obj("argoproj.io/v1alpha1", kind, body)


@pytest.mark.parametrize("kind", sweep(["Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow"],
                                       quick=("Workflow", "CronWorkflow")))
@pytest.mark.parametrize(
    "body",
    [
        {"container": {"image": "x", "resources": GPU}},
        {"script": {"image": "x", "source": "print(1)", "resources": GPU}},
        {"containerSet": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x", "resources": GPU}]}},
        {"container": {"image": "x"}, "sidecars": [{"name": "s", "image": "x", "resources": GPU}]},
        {"container": {"image": "x"}, "initContainers": [{"name": "i", "image": "x", "resources": GPU}]},
    ],
    ids=["container", "script", "containerSet", "sidecar", "initContainer"],
)
def test_argo_templates_with_gpus_reach_the_webhook(conditions: MatchConditions, kind: str, body: dict[str, Any]) -> None:
    assert conditions.decide("CREATE", argo(kind, body)) is True
    cpu = copy.deepcopy(body)
    for value in cpu.values():
        for c in value if isinstance(value, list) else value.get("containers", [value]):
            c.pop("resources", None)
    assert conditions.decide("CREATE", argo(kind, cpu)) is False


def test_a_quote_in_a_gpu_resource_name_is_refused() -> None:
    with pytest.raises(GenerationError, match="cannot be quoted in CEL"):
        render(load_config({"gpuResourceNames": ["example.com/it's"]}))


def test_bad_config_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "gpuguard.yaml"
    config.write_text("podTemplatePaths: [{apiVersion: example.com/v1, kind: T}]\n")
    assert gpuguard(["webhook-config", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "podTemplatePaths[0]: needs template or podSpec" in err and "Traceback" not in err
