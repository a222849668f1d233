"""``gpuguard serve`` as a real subprocess over real TLS, spoken to as kube-apiserver does.

Certificates come from ``certs.tls``; clients verify the CA.  Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from certs.tls import Bundle, generate_bundle
from policies import pointer
from tests.support.admission import NGC_ON_A100, NGC_ON_A100_WARNING
from tests.support.admission import review as admission_review
from tests.support.paths import CORPUS, EXAMPLES, FIXTURES
from tests.support.webhook_server import (
    LOCAL_SANS,
    STARTUP_DEADLINE,
    Server,
    call,
    client_cert,
    decoded_patch,
    ssl_client_context,
    start_server,
    stop_server,
)
from webhook import admission

pytestmark = pytest.mark.integration

ADMISSION = FIXTURES / "admission"


def load_review(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ADMISSION / name).read_text())
    return data


def with_uid(review: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(review)
    out["request"]["uid"] = str(uuid.uuid4())
    return out


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    return generate_bundle("gpuguard", "gpuguard", tmp_path_factory.mktemp("certs"), extra_sans=LOCAL_SANS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, bundle: Bundle) -> Iterator[Server]:
    """Defaults plus ``mutate: [gpu-limit-missing]`` on Pods and templates, with the example cluster as facts."""
    srv = start_server(
        tmp_path_factory.mktemp("server"),
        bundle,
        "--cluster",
        str(EXAMPLES / "cluster.yaml"),
        config="mutate: [gpu-limit-missing]\nmutateTemplates: true\n",
    )
    yield srv
    stop_server(srv)


@pytest.fixture(scope="module")
def warn_server(tmp_path_factory: pytest.TempPathFactory, bundle: Bundle) -> Iterator[Server]:
    """gpu-limit-missing downgraded to a warning; no cluster source."""
    srv = start_server(
        tmp_path_factory.mktemp("warn"), bundle, config="rules:\n  gpu-limit-missing: {severity: warning}\n"
    )
    yield srv
    stop_server(srv)


# --- verdicts --------------------------------------------------------------------------------

DENIED = [
    "pod-gpu-request-without-limit.json",
    "pod-gpu-request-no-limits-map.json",
    "pod-gpu-request-without-limit-dry-run.json",
    "deployment-gpu-request-without-limit.json",
    "pytorchjob-gpu-request-without-limit.json",
]
ALLOWED = ["pod-gpu-with-limit.json", "pod-cpu-only.json", "pod-delete.json"]


@pytest.mark.parametrize("name", DENIED)
def test_validate_denies_gpu_request_without_limit(server: Server, name: str) -> None:
    review = load_review(name)
    with server.client() as client:
        response = call(client, "validate", review)
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 403 and status["status"] == "Failure" and status["reason"] == "Forbidden"
    # Every container that requests a GPU without a limit is named by rule, dotted path and fix.
    obj = review["request"]["object"]
    expected = 0
    for path in _gpu_request_paths(obj):
        assert f"[gpu-limit-missing] {pointer.to_dotted(path)}:" in status["message"]
        expected += 1
    assert expected > 0 and status["message"].count("(fix: ") >= expected
    for warning in response.get("warnings", []):
        assert len(warning) <= admission.WARNING_LIMIT


def _gpu_request_paths(obj: Any, base: str = "") -> Iterator[str]:
    """Pointers to every ``resources.requests.nvidia.com/gpu`` that has no matching limit."""
    if isinstance(obj, dict):
        res = obj.get("resources")
        if (
            isinstance(res, dict)
            and "nvidia.com/gpu" in (res.get("requests") or {})
            and "nvidia.com/gpu" not in (res.get("limits") or {})
        ):
            yield pointer.join(base, ("resources", "requests", "nvidia.com/gpu"))
        for key, value in obj.items():
            yield from _gpu_request_paths(value, pointer.join(base, (key,)))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _gpu_request_paths(value, pointer.join(base, (i,)))


@pytest.mark.parametrize("name", ALLOWED)
@pytest.mark.parametrize("endpoint", ["validate", "mutate"])
def test_allowed_reviews(server: Server, name: str, endpoint: str) -> None:
    with server.client() as client:
        response = call(client, endpoint, load_review(name))
    assert response["allowed"] is True
    assert "status" not in response and "patch" not in response


def test_delete_of_a_bad_pod_is_allowed_without_patch(server: Server) -> None:
    review = load_review("pod-delete.json")
    assert review["request"]["oldObject"]["spec"]["containers"][0]["resources"]["requests"]
    with server.client() as client:
        for endpoint in ("validate", "mutate"):
            response = call(client, endpoint, review)
            assert response == {"uid": review["request"]["uid"], "allowed": True}


@pytest.mark.parametrize("name", DENIED)
def test_mutate_patches_then_second_pass_is_empty(server: Server, name: str) -> None:
    review = load_review(name)
    with server.client() as client:
        response = call(client, "mutate", review)
        assert response["allowed"] is True
        ops = decoded_patch(response)
        assert ops and all(op["op"] == "add" and "/resources/limits" in op["path"] for op in ops)
        patched = jsonpatch.apply_patch(review["request"]["object"], ops)
        assert list(_gpu_request_paths(patched)) == []
        again = with_uid(review)
        again["request"]["object"] = patched
        second = call(client, "mutate", again)
        assert second["allowed"] is True and "patch" not in second
        verdict = call(client, "validate", again)
    message = verdict.get("status", {}).get("message", "")
    assert "gpu-limit-missing" not in message
    # what no patch repairs: the PyTorchJob's 4 pods × 8 GPUs must run at once on the example cluster's
    # two 8-GPU A100 nodes
    whole_job = name.startswith("pytorchjob")
    assert verdict["allowed"] is not whole_job, message
    assert ("[gpu-gang-unschedulable]" in message) is whole_job


def test_dry_run_gets_the_same_verdict_and_patch(server: Server) -> None:
    review = load_review("pod-gpu-request-without-limit.json")
    dry = with_uid(review)
    dry["request"]["dryRun"] = True
    with server.client() as client:
        for endpoint in ("validate", "mutate"):
            wet_answer, dry_answer = call(client, endpoint, review), call(client, endpoint, dry)
            assert dry_answer["uid"] == dry["request"]["uid"]
            wet_answer.pop("uid")
            dry_answer.pop("uid")
            assert dry_answer == wet_answer


def test_warning_level_findings_become_short_warnings(warn_server: Server) -> None:
    review = load_review("pod-gpu-request-without-limit.json")
    with warn_server.client() as client:
        response = call(client, "validate", review)
    assert response["allowed"] is True
    warnings = response["warnings"]
    assert any(w.startswith("gpu-limit-missing: container 'train' requests nvidia.com/gpu") for w in warnings)
    assert all(0 < len(w) <= admission.WARNING_LIMIT for w in warnings)


def test_a_long_warning_keeps_its_reason_over_tls(server: Server) -> None:
    """A 613-character CUDA finding arrives led by its reason and cut with "…", as kubectl will print it."""
    with server.client() as client:
        response = call(client, "validate", admission_review("CREATE", NGC_ON_A100))
    assert response["allowed"] is True
    assert NGC_ON_A100_WARNING in response["warnings"]
    assert sum(map(len, response["warnings"])) <= admission.VALIDATING_WARNING_BUDGET


def test_no_cluster_source_is_said_in_the_first_log_line(warn_server: Server, server: Server) -> None:
    first = warn_server.log_text().splitlines()[0]
    assert "without cluster facts" in first
    assert "snapshot" in server.log_text().splitlines()[0]
    with warn_server.client() as client:
        ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["nodes"] == 0


# --- bad input ---------------------------------------------------------------------------------

def _bad_bodies() -> dict[str, bytes]:
    review = load_review("pod-gpu-request-without-limit.json")
    bodies = {
        "malformed json": b'{"apiVersion": "admission.k8s.io/v1", ',
        "no request": json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
        "v1beta1": json.dumps({**review, "apiVersion": "admission.k8s.io/v1beta1"}).encode(),
        "wrong kind": json.dumps({**review, "kind": "Pod"}).encode(),
        "object is a list": json.dumps({**review, "request": {**review["request"], "object": []}}).encode(),
    }
    corpus = CORPUS / "admission-reviews"
    if corpus.is_dir():
        bodies["corpus bare AdmissionRequest"] = (
            corpus / "kubewarden__container-resources-policy__test_data__pod_within_range.json"
        ).read_bytes()
        bodies["corpus v1beta1 yaml"] = (
            corpus / "open-policy-agent__gatekeeper-library__library__pod-security-policy__"
            "privileged-containers__samples__psp-privileged-container__update.yaml"
        ).read_bytes()
    return bodies


BAD = _bad_bodies()


@pytest.mark.parametrize("body", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("endpoint", ["validate", "mutate"])
def test_bad_input_is_400_with_a_json_reason(server: Server, endpoint: str, body: bytes) -> None:
    with server.client() as client:
        resp = client.post(f"/{endpoint}", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 400
    assert resp.headers["content-type"] == "application/json"
    assert resp.json()["reason"]


def test_oversized_bodies_are_413_by_length_and_while_streaming(server: Server) -> None:
    big = b"x" * (14 * 1024 * 1024)
    with server.client() as client:
        by_length = client.post("/validate", content=big)
        assert by_length.status_code == 413 and "exceeds" in by_length.json()["reason"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer encoding
            for _ in range(14):
                yield b"y" * (1024 * 1024)

        streamed = client.post("/validate", content=chunks())
        assert streamed.status_code == 413
        assert "content-length" not in {k.lower() for k in streamed.request.headers}
        # The connection and the server are still fine.
        assert call(client, "validate", load_review("pod-gpu-with-limit.json"))["allowed"] is True


def test_wrong_method_and_unknown_path(server: Server) -> None:
    with server.client() as client:
        assert client.get("/validate").status_code == 405
        assert client.post("/nope", content=b"{}").status_code == 404


def test_metrics_and_readiness(server: Server) -> None:
    with server.client() as client:
        call(client, "validate", with_uid(load_review("pod-gpu-request-without-limit.json")))
        ready = client.get("/readyz")
        text = client.get("/metrics").text
    assert ready.status_code == 200 and ready.json()["nodes"] == 7
    assert 'gpuguard_findings_total{rule="gpu-limit-missing",severity="error"}' in text
    assert 'gpuguard_admission_reviews_total{endpoint="validate",kind="Pod",operation="CREATE",allowed="false"}' in text
    assert "gpuguard_admission_review_duration_seconds_bucket" in text
    assert "gpuguard_cluster_facts_age_seconds" in text and "gpuguard_cluster_facts_ready 1" in text
    # the loaded facts were frozen out of full collections (webhook.heap); collections are counted
    frozen = next(line for line in text.splitlines() if line.startswith("gpuguard_gc_frozen_objects "))
    assert int(frozen.split()[1]) > 10_000
    assert 'python_gc_collections_total{generation="2"}' in text


# --- load ------------------------------------------------------------------------------------

def test_concurrent_load_all_answers_correct(server: Server) -> None:
    templates = [(load_review(n), False) for n in DENIED[:2]] + [(load_review(n), True) for n in ALLOWED[:2]]
    jobs = [(with_uid(templates[i % len(templates)][0]), templates[i % len(templates)][1]) for i in range(200)]

    async def run() -> list[tuple[str, bool, dict[str, Any]]]:
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
        async with httpx.AsyncClient(
            base_url=server.url, verify=ssl_client_context(server.ca), limits=limits, timeout=30
        ) as client:
            gate = asyncio.Semaphore(16)

            async def one(review: dict[str, Any], allowed: bool) -> tuple[str, bool, dict[str, Any]]:
                async with gate:
                    resp = await client.post("/validate?timeout=10s", json=review)
                assert resp.status_code == 200
                return review["request"]["uid"], allowed, resp.json()["response"]

            return await asyncio.gather(*(one(r, a) for r, a in jobs))

    results = asyncio.run(run())
    assert len(results) == 200
    for uid, allowed, response in results:
        assert response["uid"] == uid
        assert response["allowed"] is allowed


# --- certificate rotation ----------------------------------------------------------------------

def _served_leaf_der(port: int) -> bytes:
    pem = ssl.get_server_certificate(("127.0.0.1", port), timeout=5)
    return ssl.PEM_cert_to_DER_cert(pem)


def _leaf_der(path: Path) -> bytes:
    return x509.load_pem_x509_certificates(path.read_bytes())[0].public_bytes(serialization.Encoding.DER)


def _secret_volume(root: Path, version: str, source: Bundle) -> None:
    """Lay out (or update) files as the kubelet's atomic writer does: ..data → ..<version>."""
    data_dir = root / f"..{version}"
    data_dir.mkdir()
    for name, src in (("tls.crt", source.tls_crt), ("tls.key", source.tls_key), ("ca.crt", source.ca_crt)):
        (data_dir / name).write_bytes(src.read_bytes())
    tmp_link = root / "..data_tmp"
    tmp_link.symlink_to(data_dir.name)
    os.replace(tmp_link, root / "..data")  # atomic swap
    for name in ("tls.crt", "tls.key", "ca.crt"):
        link = root / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")


def test_rotated_certificate_is_served_without_restart_or_failed_requests(tmp_path: Path) -> None:
    old = generate_bundle("gpuguard", "gpuguard", tmp_path / "old", extra_sans=LOCAL_SANS)
    new = generate_bundle("gpuguard", "gpuguard", tmp_path / "new", extra_sans=LOCAL_SANS)  # a new CA too
    volume = tmp_path / "secret"
    volume.mkdir()
    _secret_volume(volume, "2026_01_01", old)
    mounted = Bundle(volume / "ca.crt", volume / "tls.crt", volume / "tls.key")
    srv = start_server(tmp_path / "srv", mounted, "--tls-reload-interval", "0.2")
    both_cas = ssl_client_context(old.ca_crt, new.ca_crt)
    review = load_review("pod-gpu-request-without-limit.json")
    failures: list[str] = []
    answered = 0
    stop = threading.Event()

    def traffic() -> None:
        nonlocal answered
        with httpx.Client(base_url=srv.url, verify=both_cas, timeout=10) as keep_alive:
            while not stop.is_set():
                for client in (keep_alive, httpx.Client(base_url=srv.url, verify=both_cas, timeout=10)):
                    try:
                        resp = client.post("/validate", json=with_uid(review))
                        if resp.status_code != 200 or resp.json()["response"]["allowed"] is not False:
                            failures.append(f"{resp.status_code} {resp.text[:200]}")
                        answered += 1
                    except httpx.HTTPError as exc:
                        failures.append(repr(exc))
                    finally:
                        if client is not keep_alive:
                            client.close()

    worker = threading.Thread(target=traffic)
    worker.start()
    try:
        assert _served_leaf_der(srv.port) == _leaf_der(old.tls_crt)
        before = answered
        _secret_volume(volume, "2026_02_01", new)
        deadline = time.monotonic() + 15
        while _served_leaf_der(srv.port) != _leaf_der(new.tls_crt):
            assert time.monotonic() < deadline, f"new certificate not served within 15s:\n{srv.log_text()}"
            assert srv.proc.poll() is None
        # Traffic kept flowing across the swap.
        deadline = time.monotonic() + 15
        while answered < before + 20:
            assert time.monotonic() < deadline, "requests stalled after rotation"
            time.sleep(0.01)  # bounded polling interval
    finally:
        stop.set()
        worker.join(30)
    try:
        assert failures == []
        with httpx.Client(base_url=srv.url, verify=ssl_client_context(new.ca_crt), timeout=10) as client:
            assert client.get("/healthz").status_code == 200
        with pytest.raises(httpx.ConnectError), httpx.Client(
            base_url=srv.url, verify=ssl_client_context(old.ca_crt), timeout=10
        ) as client:
            client.get("/healthz")
        assert srv.proc.poll() is None
        assert "reloaded the serving certificate" in srv.log_text()
    finally:
        stop_server(srv)


def test_invalid_rotation_keeps_the_old_certificate(tmp_path: Path) -> None:
    old = generate_bundle("gpuguard", "gpuguard", tmp_path / "old", extra_sans=LOCAL_SANS)
    other = generate_bundle("gpuguard", "gpuguard", tmp_path / "other", extra_sans=LOCAL_SANS)
    volume = tmp_path / "secret"
    volume.mkdir()
    _secret_volume(volume, "v1", old)
    srv = start_server(tmp_path / "srv", Bundle(volume / "ca.crt", volume / "tls.crt", volume / "tls.key"),
                       "--tls-reload-interval", "0.2")
    try:
        mismatched = Bundle(other.ca_crt, other.tls_crt, old.tls_key)  # key of a different cert
        _secret_volume(volume, "v2", mismatched)
        deadline = time.monotonic() + 15
        while "not reloading the serving certificate" not in srv.log_text():
            assert time.monotonic() < deadline, srv.log_text()
            time.sleep(0.05)  # bounded polling interval
        assert _served_leaf_der(srv.port) == _leaf_der(old.tls_crt)
        with httpx.Client(base_url=srv.url, verify=ssl_client_context(old.ca_crt), timeout=10) as client:
            assert client.get("/healthz").status_code == 200
            assert 'gpuguard_tls_certificate_reloads_total{result="invalid"} 1' in client.get("/metrics").text
    finally:
        stop_server(srv)


# --- client certificates -----------------------------------------------------------------------

def test_client_ca_requires_a_client_certificate(tmp_path: Path, bundle: Bundle) -> None:
    client_ca = generate_bundle("clients", "gpuguard", tmp_path / "client-ca")
    ca_key = client_ca.ca_crt.parent / "ca.key"
    pair = client_cert(client_ca.ca_crt, ca_key, tmp_path / "client")
    with_cert = ssl_client_context(bundle.ca_crt, cert=pair)
    srv = start_server(tmp_path / "srv", bundle, "--client-ca", str(client_ca.ca_crt), health_ctx=with_cert)
    try:
        with httpx.Client(base_url=srv.url, verify=with_cert, timeout=10) as client:
            assert call(client, "validate", load_review("pod-gpu-with-limit.json"))["allowed"] is True
        with pytest.raises((httpx.TransportError, ssl.SSLError)), httpx.Client(
            base_url=srv.url, verify=ssl_client_context(bundle.ca_crt), timeout=10
        ) as client:
            client.get("/healthz")
    finally:
        stop_server(srv)


def test_workers_share_the_port(tmp_path: Path, bundle: Bundle) -> None:
    srv = start_server(tmp_path / "srv", bundle, "--workers", "2")
    try:
        with srv.client() as client:
            for _ in range(4):
                assert call(client, "validate", with_uid(load_review("pod-gpu-with-limit.json")))["allowed"] is True
        deadline = time.monotonic() + STARTUP_DEADLINE
        while srv.log_text().count("Started server process") < 2:
            assert time.monotonic() < deadline, srv.log_text()
            time.sleep(0.05)  # bounded polling interval
    finally:
        stop_server(srv)
    assert srv.proc.returncode == 0
    assert srv.log_text().count("Finished server process") == 2

