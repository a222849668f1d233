"""Issue-8 behaviour through ``gpuguard serve`` over real TLS: UPDATE/DELETE/finalizers/subresources,
warn enforcement, the ignore annotation, a plain-HTTP health port beside mTLS, config hot reload
through a ConfigMap-style symlink swap, and a day-2 run against live (watched) cluster facts."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from certs.tls import Bundle, generate_bundle
from tests.support.admission import fixture_object, review, running, terminating
from tests.support.fake_apiserver import FakeApiServer, serving
from tests.support.kubeconfig import write_kubeconfig
from tests.support.paths import EXAMPLES
from tests.support.webhook_server import (
    LOCAL_SANS,
    Server,
    call,
    client_cert,
    free_port,
    ssl_client_context,
    start_server,
    stop_server,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    return generate_bundle("gpuguard", "gpuguard", tmp_path_factory.mktemp("certs"), extra_sans=LOCAL_SANS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, bundle: Bundle) -> Iterator[Server]:
    srv = start_server(
        tmp_path_factory.mktemp("server"),
        bundle,
        "--cluster",
        str(EXAMPLES / "cluster.yaml"),
        config="mutate: [gpu-limit-missing]\nwarnNamespaces: [staging-*]\n",
    )
    yield srv
    stop_server(srv)


def bad_pod(namespace: str = "ml") -> dict[str, Any]:
    pod = fixture_object("pod-gpu-request-without-limit.json")
    pod["metadata"]["namespace"] = namespace
    return pod


def test_updates_and_deletions_of_violating_objects(server: Server) -> None:
    pod = running(bad_pod())
    relabelled = copy.deepcopy(pod)
    relabelled["metadata"]["labels"]["checked"] = "true"
    finalizing = terminating(pod, ["batch.kubernetes.io/job-tracking"])
    with server.client() as client:
        assert call(client, "validate", review("CREATE", bad_pod()))["allowed"] is False
        for endpoint in ("validate", "mutate"):
            for rev in (
                review("UPDATE", relabelled, pod),
                review("UPDATE", terminating(pod, []), finalizing, user="job-controller"),
                review("DELETE", None, pod),
                review("UPDATE", relabelled, pod, subresource="status", user="kubelet"),
            ):
                answer = call(client, endpoint, rev)
                assert answer["allowed"] is True and "patch" not in answer, (endpoint, rev["request"]["operation"])


def test_debug_container_with_gpu_access_is_denied(server: Server) -> None:
    pod = running(fixture_object("pod-gpu-with-limit.json"))
    debugged = copy.deepcopy(pod)
    debugged["spec"]["ephemeralContainers"] = [
        {"name": "debugger", "image": "busybox:1.36", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    ]
    with server.client() as client:
        answer = call(client, "validate", review("UPDATE", debugged, pod, subresource="ephemeralcontainers"))
    assert answer["allowed"] is False and "gpu-device-access-bypass" in answer["status"]["message"]


def test_warn_namespace_admits_with_warnings_and_counts(server: Server) -> None:
    with server.client() as client:
        answer = call(client, "validate", review("CREATE", bad_pod("staging-vision")))
        assert answer["allowed"] is True
        assert answer["warnings"][0].startswith("would deny: gpu-limit-missing")
        metrics = client.get("/metrics").text
    assert 'gpuguard_would_deny_total{rule="gpu-limit-missing"}' in metrics


def test_ignore_annotation_is_warned_logged_and_counted(server: Server) -> None:
    pod = bad_pod()
    pod["metadata"]["annotations"] = {"gpuguard.io/ignore": "gpu-limit-missing,gpu-limit-mising"}
    with server.client() as client:
        answer = call(client, "validate", review("CREATE", pod))
        assert answer["allowed"] is True
        assert ("gpuguard.io/ignore names no rule: gpu-limit-mising (did you mean gpu-limit-missing?) at metadata"
                in answer["warnings"])
        # The typo is said once, in the words lint, audit and why-pending use, and is no rule skipped.
        assert [w for w in answer["warnings"] if "gpu-limit-mising" in w] == [
            "gpuguard.io/ignore names no rule: gpu-limit-mising (did you mean gpu-limit-missing?) at metadata"]
        assert "gpuguard.io/ignore skips gpu-limit-missing at metadata" in answer["warnings"]
        metrics = client.get("/metrics").text
    assert 'gpuguard_ignore_annotation_uses_total{result="honoured"}' in metrics
    assert 'gpuguard_ignore_annotation_uses_total{result="unknown_rule"}' in metrics
    wait_for("the ignore-annotation log line", lambda: "by alice@example.com: honoured" in server.log_text(), server.log_text)


def test_health_port_serves_probes_while_client_certificates_guard_the_webhook(
    tmp_path: Path, bundle: Bundle
) -> None:
    client_ca = generate_bundle("clients", "gpuguard", tmp_path / "client-ca")
    pair = client_cert(client_ca.ca_crt, client_ca.ca_crt.parent / "ca.key", tmp_path / "client")
    with_cert = ssl_client_context(bundle.ca_crt, cert=pair)
    health = free_port()
    srv = start_server(
        tmp_path / "srv", bundle, "--client-ca", str(client_ca.ca_crt), "--health-port", str(health),
        health_ctx=with_cert,
    )
    try:
        # kubelet probes and Prometheus: plain HTTP, no client certificate.
        base = f"http://127.0.0.1:{health}"
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
        assert httpx.get(f"{base}/readyz", timeout=5).json()["ready"] is True
        assert "gpuguard_admission_reviews_total" in httpx.get(f"{base}/metrics", timeout=5).text
        assert httpx.post(f"{base}/validate", json={}, timeout=5).status_code in (404, 405)  # no webhook here
        # The webhook port still demands a client certificate.
        with pytest.raises(httpx.TransportError), httpx.Client(
            base_url=srv.url, verify=ssl_client_context(bundle.ca_crt), timeout=5
        ) as client:
            client.get("/healthz")
        with httpx.Client(base_url=srv.url, verify=with_cert, timeout=5) as client:
            assert call(client, "validate", review("CREATE", bad_pod()))["allowed"] is False
    finally:
        stop_server(srv)


class ConfigMapVolume:
    """A directory laid out as the kubelet mounts a ConfigMap: updates swap the ``..data`` symlink."""

    def __init__(self, root: Path, name: str = "gpuguard.yaml") -> None:
        self.root, self.name, self.generation = root, name, 0
        root.mkdir(parents=True)

    @property
    def path(self) -> Path:
        return self.root / self.name

    def write(self, text: str) -> None:
        self.generation += 1
        version = self.root / f"..2026_11_30_10_00_{self.generation:02d}.000000001"
        version.mkdir()
        (version / self.name).write_text(text)
        tmp = self.root / "..data_tmp"
        tmp.symlink_to(version.name)
        os.replace(tmp, self.root / "..data")  # atomic, as the kubelet's AtomicWriter does
        if not self.path.is_symlink():
            self.path.symlink_to(f"..data/{self.name}")


def test_config_hot_reload_keeps_the_last_good_config(tmp_path: Path, bundle: Bundle) -> None:
    volume = ConfigMapVolume(tmp_path / "config")
    volume.write("enforcement: enforce\n")
    srv = start_server(
        tmp_path / "srv", bundle, "--config", str(volume.path), "--config-reload-interval", "0.2"
    )
    try:
        with srv.client() as client:
            def metric(text: str) -> Callable[[], bool]:
                return lambda: text in client.get("/metrics").text

            assert call(client, "validate", review("CREATE", bad_pod()))["allowed"] is False
            volume.write("enforcement: sometimes\n")
            wait_for("the invalid config to be counted", metric('gpuguard_config_reloads_total{result="invalid"} 1'), srv.log_text)
            assert call(client, "validate", review("CREATE", bad_pod()))["allowed"] is False  # the old one holds
            assert "enforcement: expected enforce or warn" in srv.log_text()
            volume.write("enforcement: warn\n")
            wait_for("the valid config to apply", metric('gpuguard_config_reloads_total{result="ok"} 1'), srv.log_text)
            answer = call(client, "validate", review("CREATE", bad_pod()))
            assert answer["allowed"] is True and answer["warnings"][0].startswith("would deny:")
    finally:
        stop_server(srv)


def _nodes_of(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    items = [i for d in docs for i in (d.get("items") or [d])]
    return [i for i in items if i.get("kind") == "Node"]


def test_day_two_against_live_facts(tmp_path: Path, bundle: Bundle) -> None:
    """Day 1 a Deployment on the H100 pool is admitted; the pool is then removed from the cluster
    (the watch sees the nodes deleted); relabelling, scaling, deleting and finalizer removal of the
    Deployment are admitted, while a new Deployment like it is denied."""
    api = FakeApiServer()
    for node in _nodes_of(EXAMPLES / "cluster.yaml"):
        api.put("nodes", node)
    with serving(api):
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, f"http://127.0.0.1:{api.port}", token="t")
        srv = start_server(tmp_path / "srv", bundle, "--kubeconfig", str(kubeconfig))
        try:
            with srv.client() as client:
                wait_for("live facts", lambda: client.get("/readyz").json()["nodes"] == 7, srv.log_text)
                deployment = fixture_object("deployment-gpu-request-without-limit.json")
                spec = deployment["spec"]["template"]["spec"]
                spec["nodeSelector"] = {"pool": "h100"}
                spec["tolerations"] = [{"operator": "Exists"}]
                spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
                assert call(client, "validate", review("CREATE", deployment))["allowed"] is True

                for name in ("h100-pool-1", "h100-pool-2"):
                    api.delete("nodes", name)
                wait_for("the drained pool to leave the facts", lambda: client.get("/readyz").json()["nodes"] == 5, srv.log_text)
                assert call(client, "validate", review("CREATE", deployment))["allowed"] is False

                relabelled = copy.deepcopy(deployment)
                relabelled["metadata"].setdefault("labels", {})["tier"] = "gold"
                scaled = copy.deepcopy(deployment)
                scaled["spec"]["replicas"] = 4
                for rev in (
                    review("UPDATE", relabelled, deployment),
                    review("UPDATE", scaled, deployment),
                    review("UPDATE", terminating(scaled, ["foregroundDeletion"]), scaled),
                    review("UPDATE", terminating(scaled, []), terminating(scaled, ["foregroundDeletion"]),
                           user="generic-garbage-collector"),
                    review("DELETE", None, scaled),
                ):
                    answer = call(client, "validate", rev)
                    assert answer["allowed"] is True, answer
        finally:
            stop_server(srv)
