"""An attacker with `pods create` rights against the shipped install: every way found to get GPUs
nobody allocated is sent to gpuguard by the shipped webhooks and denied (or warned, where the facts
are uncertain).

Each review is shaped as kube-apiserver sends it (server-side defaults, the ServiceAccount token
volume).  "Sent" is decided by the shipped ``deploy/webhooks.yaml``: its namespaceSelector against
the namespace's labels, and its ``matchConditions`` evaluated by a CEL implementation (cel-python)
with the API server's combination rules (tests/deploy/test_deploy.py).  "Denied" is the answer of a
real ``gpuguard serve`` over TLS, with the shipped policy switched to ``enforcement: enforce``, as
the README's rollout ends, and the example cluster as facts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from certs.tls import Bundle, generate_bundle
from tests.deploy.test_deploy import MatchConditions
from tests.support.admission import fixture_object, review, running, token_mount, token_volume
from tests.support.paths import EXAMPLES, ROOT
from tests.support.webhook_server import LOCAL_SANS, Server, call, start_server, stop_server

pytestmark = pytest.mark.integration

WEBHOOKS = [d for d in yaml.safe_load_all((ROOT / "deploy" / "webhooks.yaml").read_text()) if d]
TOKEN = "kube-api-access-7xk2q"
BYPASS = "gpu-device-access-bypass"


def cpu_pod(name: str, namespace: str = "team-a") -> dict[str, Any]:
    pod = fixture_object("pod-cpu-only.json")
    pod["metadata"].update(name=name, namespace=namespace)
    pod["spec"]["volumes"] = [token_volume(TOKEN)]
    for c in pod["spec"]["containers"]:
        c["volumeMounts"] = [token_mount(TOKEN)]
    return pod


def gpu_pod(name: str, namespace: str = "team-a") -> dict[str, Any]:
    pod = fixture_object("pod-gpu-with-limit.json")
    pod["metadata"].update(name=name, namespace=namespace)
    pod["spec"]["tolerations"] = [*pod["spec"].get("tolerations", []),
                                  {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return pod


def container(pod: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = pod["spec"]["containers"][0]
    return c


@dataclass
class Attack:
    name: str
    obj: dict[str, Any]
    expect: str  # "deny" | "warn"
    operation: str = "CREATE"
    old: dict[str, Any] | None = None
    subresource: str = ""
    namespace_labels: dict[str, str] = field(default_factory=dict)

    def review(self) -> dict[str, Any]:
        return review(self.operation, self.obj, self.old, subresource=self.subresource)


def attacks() -> Iterator[Attack]:
    # 1. A container that requests one GPU, or holds a DRA claim, names every GPU itself.
    pod = gpu_pod("one-for-all")
    container(pod)["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    yield Attack("gpu-container-env-all", pod, "deny")
    pod = cpu_pod("claim-for-all")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
    container(pod)["resources"] = {"claims": [{"name": "gpu"}]}
    container(pod)["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    yield Attack("dra-container-env-all", pod, "deny")
    # 2. kubectl debug: an ephemeral container added to a running pod without GPUs (on the T4 node).
    base = running(cpu_pod("debugged"), node="t4-pool-1")
    for variant, extra in (("env", {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}),
                           ("privileged", {"securityContext": {"privileged": True}})):
        debugged = copy.deepcopy(base)
        debugged["spec"]["ephemeralContainers"] = [
            {"name": "debugger", "image": "busybox:1.36", "terminationMessagePolicy": "File", **extra}
        ]
        yield Attack(f"ephemeral-container-{variant}", debugged, "deny" if variant == "env" else "warn",
                     operation="UPDATE", old=base, subresource="ephemeralcontainers")
    # 3. envFrom: gpuguard cannot read the ConfigMap at admission, so it warns.
    pod = gpu_pod("env-from")
    container(pod)["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    yield Attack("env-from-config-map", pod, "warn")
    pod = cpu_pod("env-from-prefix")
    container(pod)["envFrom"] = [{"secretRef": {"name": "tokens"}, "prefix": "NVIDIA_"}]
    yield Attack("env-from-secret-with-prefix", pod, "warn")
    # 4. The image's own NVIDIA_VISIBLE_DEVICES=all, no GPU request, and an untainted GPU node to land on.
    pod = cpu_pod("image-default")
    container(pod)["image"] = "nvidia/cuda:12.4.1-base-ubuntu22.04"
    yield Attack("cuda-image-without-gpus", pod, "deny")
    # 5. The AMD runtime's variables.
    pod = cpu_pod("amd")
    container(pod)["env"] = [{"name": "AMD_VISIBLE_DEVICES", "value": "all"}]
    yield Attack("amd-visible-devices", pod, "deny")
    # 6. Claiming to be a device plugin by mounting the kubelet's directory (not even mounted).
    pod = cpu_pod("fake-infrastructure")
    pod["spec"]["volumes"].append({"name": "dp", "hostPath": {"path": "/var/lib/kubelet/x/../device-plugins"}})
    container(pod)["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    yield Attack("kubelet-directory-is-no-exemption", pod, "deny")
    # 7. The ignore annotation, "all" or naming the rule.
    for names in ("all", BYPASS):
        pod = cpu_pod(f"ignored-{names}")
        pod["metadata"]["annotations"] = {"gpuguard.io/ignore": names}
        container(pod)["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        yield Attack(f"ignore-{names}", pod, "deny")
    # 8. A tenant-created namespace named like GPU infrastructure.
    pod = cpu_pod("in-gpu-operator", namespace="gpu-operator")
    container(pod)["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    yield Attack("namespace-named-gpu-operator", pod, "deny",
                 namespace_labels={"kubernetes.io/metadata.name": "gpu-operator"})
    # Low: a privileged container without GPUs that can land on the untainted T4 node.
    pod = cpu_pod("privileged")
    container(pod)["securityContext"] = {"privileged": True}
    yield Attack("privileged-without-gpus", pod, "warn")
    # Low: /dev mounted with subPath nvidia0, and a CDI annotation.
    pod = cpu_pod("dev-subpath")
    pod["spec"]["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}})
    container(pod)["volumeMounts"].append({"name": "dev", "mountPath": "/gpu", "subPath": "nvidia0"})
    yield Attack("dev-subpath-nvidia0", pod, "deny")
    pod = cpu_pod("cdi")
    pod["metadata"]["annotations"] = {"cdi.k8s.io/gpus": "nvidia.com/gpu=all"}
    yield Attack("cdi-annotation", pod, "deny")
    # Low: an UPDATE that makes an existing finding worse ("0" → "all") in a Deployment's template.
    old = fixture_object("deployment-gpu-request-without-limit.json")
    old["metadata"]["namespace"] = "team-a"
    old_container = old["spec"]["template"]["spec"]["containers"][0]
    old_container["resources"] = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    old["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    sidecar = {"name": "sidecar", "image": "busybox:1.36", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0"}]}
    old["spec"]["template"]["spec"]["containers"].append(sidecar)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][1]["env"][0]["value"] = "all"
    yield Attack("update-from-0-to-all", new, "deny", operation="UPDATE", old=old)


ATTACKS = list(attacks())


def _selected(webhook: dict[str, Any], labels: dict[str, str]) -> bool:
    """A namespaceSelector of matchExpressions (all the shipped ones use) against a namespace's labels."""
    for expr in webhook.get("namespaceSelector", {}).get("matchExpressions", []):
        value = labels.get(expr["key"])
        if expr["operator"] == "NotIn" and value in expr["values"]:
            return False
        if expr["operator"] == "In" and value not in expr["values"]:
            return False
    return True


@pytest.fixture(scope="module")
def conditions() -> list[tuple[dict[str, Any], MatchConditions]]:
    return [(w, MatchConditions(w)) for d in WEBHOOKS for w in d["webhooks"]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    bundle: Bundle = generate_bundle("gpuguard", "gpuguard", tmp_path_factory.mktemp("certs"), extra_sans=LOCAL_SANS)
    policy = yaml.safe_load((ROOT / "deploy" / "gpuguard-config.yaml").read_text())
    policy["enforcement"] = "enforce"
    srv = start_server(tmp_path_factory.mktemp("srv"), bundle, "--cluster", str(EXAMPLES / "cluster.yaml"),
                       config=yaml.safe_dump(policy))
    yield srv
    stop_server(srv)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_every_bypass_is_sent_by_the_shipped_webhooks(
    attack: Attack, conditions: list[tuple[dict[str, Any], MatchConditions]]
) -> None:
    labels = attack.namespace_labels or {"kubernetes.io/metadata.name": attack.obj["metadata"]["namespace"]}
    for webhook, matcher in conditions:
        assert _selected(webhook, labels), (webhook["name"], labels)
        assert matcher.decide(attack.operation, attack.obj, attack.old) is True, webhook["name"]


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_every_bypass_is_denied_or_warned_over_tls(attack: Attack, server: Server) -> None:
    with server.client() as client:
        answer = call(client, "validate", attack.review())
    if attack.expect == "deny":
        assert answer["allowed"] is False, answer
        assert f"[{BYPASS}]" in answer["status"]["message"]
    else:
        assert answer["allowed"] is True, answer
        assert any(w.startswith(BYPASS) for w in answer.get("warnings", [])), answer


def test_an_update_that_changes_nothing_the_rule_judges_is_admitted(server: Server) -> None:
    """The same Deployment with its "0" sidecar, relabelled: pre-existing, not worse, admitted."""
    update = next(a for a in ATTACKS if a.name == "update-from-0-to-all")
    assert update.old is not None
    relabelled = copy.deepcopy(update.old)
    relabelled["spec"]["replicas"] = 3
    with server.client() as client:
        answer = call(client, "validate", review("UPDATE", relabelled, update.old))
    assert answer["allowed"] is True
    assert any(w.startswith(f"pre-existing {BYPASS}") for w in answer["warnings"])
