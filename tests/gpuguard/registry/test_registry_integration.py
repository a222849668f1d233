"""The registry client against a real registry (CNCF distribution) with TLS, Basic and token auth,
images pushed by skopeo, and a hostile server for what a real registry never does."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from pathlib import Path

import pytest

from gpuguard.registry.auth import CredentialStore
from gpuguard.registry.cache import DiskStore, MemoryStore
from gpuguard.registry.client import ClientOptions, RegistryClient
from gpuguard.registry.resolver import Resolver
from policies.images import ImageLookup
from tests.gpuguard.registry.conftest import TokenSetup
from tests.support.registry import (
    OCI_CONFIG,
    OCI_MANIFEST,
    Hostile,
    Layout,
    Registry,
    RegistryCA,
    TokenIssuer,
    image_blobs,
    run_hostile,
    run_token_issuer,
)

pytestmark = pytest.mark.integration



def auth_file(path: Path, entries: dict[str, tuple[str, str]]) -> Path:
    auths = {host: {"auth": base64.b64encode(f"{u}:{p}".encode()).decode()} for host, (u, p) in entries.items()}
    path.write_text(json.dumps({"auths": auths}))
    return path


def lookup(
    image: str,
    arch: str = "amd64",
    *,
    ca: Path | None = None,
    creds: Path | None = None,
    insecure: frozenset[str] = frozenset(),
    store: DiskStore | MemoryStore | None = None,
    timeout: float = 20.0,
    **options: float,
) -> ImageLookup:
    async def run() -> ImageLookup:
        client = RegistryClient(
            ClientOptions(ca=ca, insecure=insecure, **options),  # type: ignore[arg-type]
            CredentialStore.load(creds) if creds else CredentialStore(),
        )
        try:
            return await Resolver(client, store or MemoryStore(100, 60, 60), timeout).lookup(image, arch)
        finally:
            await client.aclose()

    return asyncio.run(run())


# -- Basic auth, TLS, platforms ----------------------------------------------------------------------


def test_basic_auth_reads_env_labels_and_digest(basic_registry: Registry, layout: Layout, tmp_path: Path) -> None:
    creds = auth_file(tmp_path / "auth.json", {basic_registry.host: ("reader", "read-secret")})
    found = lookup(f"{basic_registry.host}/cuda/app:12.4", ca=basic_registry.ca.cert, creds=creds)
    assert found.status == "found", found.detail
    assert found.config is not None
    assert found.config.env == (("CUDA_VERSION", "12.4.1"), ("NVIDIA_DISABLE_REQUIRE", "true"))
    assert found.config.labels == {"org.opencontainers.image.title": "single"}
    assert found.config.digest == layout.platform_digests["12.4"]["amd64"]
    assert found.config.source.startswith(f"registry {basic_registry.host}, sha256:")


def test_multi_arch_index_gives_each_architecture_its_own_config(
    basic_registry: Registry, layout: Layout, tmp_path: Path
) -> None:
    creds = auth_file(tmp_path / "auth.json", {basic_registry.host: ("reader", "read-secret")})
    image = f"{basic_registry.host}/cuda/app:multi"
    amd = lookup(image, "amd64", ca=basic_registry.ca.cert, creds=creds)
    arm = lookup(image, "arm64", ca=basic_registry.ca.cert, creds=creds)
    assert amd.config is not None and arm.config is not None
    assert dict(amd.config.env)["CUDA_VERSION"] == "12.8.1"
    assert dict(arm.config.env)["CUDA_VERSION"] == "12.6.3"
    assert amd.config.digest == layout.platform_digests["multi"]["amd64"]
    assert arm.config.digest == layout.platform_digests["multi"]["arm64"]
    pinned = lookup(
        f"{basic_registry.host}/cuda/app@{layout.refs['multi']}", "arm64", ca=basic_registry.ca.cert, creds=creds
    )
    assert pinned.config == arm.config
    missing = lookup(image, "s390x", ca=basic_registry.ca.cert, creds=creds)
    assert missing.status == "failed"
    assert "no linux/s390x image in the index (it has linux/amd64, linux/arm64)" in missing.detail
    single = lookup(f"{basic_registry.host}/cuda/app:12.4", "arm64", ca=basic_registry.ca.cert, creds=creds)
    assert single.status == "failed"
    assert "built for linux/amd64 only" in single.detail


def test_private_registry_without_credentials(basic_registry: Registry, tmp_path: Path) -> None:
    nothing = tmp_path / "empty.json"
    nothing.write_text("{}")
    failed = lookup(f"{basic_registry.host}/cuda/app:12.4", ca=basic_registry.ca.cert, creds=nothing)
    assert failed.status == "failed"
    assert f"{basic_registry.host} requires a login; no credentials for {basic_registry.host} in {nothing}" in failed.detail
    wrong = auth_file(tmp_path / "wrong.json", {basic_registry.host: ("reader", "wrong")})
    refused = lookup(f"{basic_registry.host}/cuda/app:12.4", ca=basic_registry.ca.cert, creds=wrong)
    assert refused.status == "failed"
    assert f"refused the credentials from {wrong} ({basic_registry.host})" in refused.detail
    assert "wrong" not in refused.detail.replace(str(wrong), "")  # the password is never shown


def test_missing_tag(basic_registry: Registry, tmp_path: Path) -> None:
    creds = auth_file(tmp_path / "auth.json", {basic_registry.host: ("reader", "read-secret")})
    failed = lookup(f"{basic_registry.host}/cuda/app:9.9", ca=basic_registry.ca.cert, creds=creds)
    assert failed.status == "failed"
    assert failed.detail == (
        f"registry {basic_registry.host}: not found: manifest {basic_registry.host}/cuda/app:9.9 "
        "(MANIFEST_UNKNOWN: manifest unknown)"
    )


def test_tls_is_always_verified(basic_registry: Registry, tmp_path: Path) -> None:
    creds = auth_file(tmp_path / "auth.json", {basic_registry.host: ("reader", "read-secret")})
    failed = lookup(f"{basic_registry.host}/cuda/app:12.4", creds=creds)
    assert failed.status == "failed"
    assert f"TLS verification of {basic_registry.host} failed" in failed.detail
    assert "--registry-ca" in failed.detail


# -- token auth ----------------------------------------------------------------------------------------


def test_token_auth_anonymous_public_pull(token_registry: TokenSetup) -> None:
    registry, issuer = token_registry.registry, token_registry.issuer
    before = len(issuer.requests)
    found = lookup(f"{registry.host}/public/app:multi", "arm64", ca=registry.ca.cert)
    assert found.status == "found", found.detail
    assert found.config is not None and dict(found.config.env)["CUDA_VERSION"] == "12.6.3"
    token_requests = issuer.requests[before:]
    assert token_requests and all(r["authorization"] is None for r in token_requests)
    assert token_requests[0]["query"]["scope"] == ["repository:public/app:pull"]
    assert token_requests[0]["query"]["service"] == ["gpuguard-test-registry"]


def test_token_auth_private_repo(token_registry: TokenSetup, tmp_path: Path) -> None:
    registry, issuer = token_registry.registry, token_registry.issuer
    denied = lookup(f"{registry.host}/private/app:12.4", ca=registry.ca.cert)
    assert denied.status == "failed"
    assert f"refused anonymous access to private/app; no credentials for {registry.host}" in denied.detail
    creds = auth_file(tmp_path / "auth.json", {registry.host: ("alice", "alice-secret")})
    before = len(issuer.requests)
    found = lookup(f"{registry.host}/private/app:12.4", ca=registry.ca.cert, creds=creds)
    assert found.status == "found", found.detail
    assert found.config is not None and ("CUDA_VERSION", "12.4.1") in found.config.env
    sent = [r["authorization"] for r in issuer.requests[before:]]
    assert sent and all(a == "Basic " + base64.b64encode(b"alice:alice-secret").decode() for a in sent)
    wrong = auth_file(tmp_path / "wrong.json", {registry.host: ("alice", "nope")})
    refused = lookup(f"{registry.host}/private/app:12.4", ca=registry.ca.cert, creds=wrong)
    assert refused.status == "failed"
    assert f"token service 127.0.0.1:{issuer.port} refused the credentials from {wrong}" in refused.detail


# -- what only a hostile server does -------------------------------------------------------------------


def _serve_image(state: Hostile, repository: str, tag: str, env: list[str]) -> tuple[str, bytes, bytes]:
    manifest, (config, _layer) = image_blobs("amd64", env, {})
    state.routes[f"/v2/{repository}/manifests/{tag}"] = (
        200,
        {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": manifest.digest},
        manifest.data,
    )
    state.routes[f"/v2/{repository}/manifests/{manifest.digest}"] = state.routes[f"/v2/{repository}/manifests/{tag}"]
    state.routes[f"/v2/{repository}/blobs/{config.digest}"] = (200, {"Content-Type": OCI_CONFIG}, config.data)
    return manifest.digest, manifest.data, config.data


def test_a_hanging_registry_times_out(hostile: Hostile) -> None:
    hostile.hang.add("/v2/slow/app/manifests/1")
    started = time.monotonic()
    failed = lookup(f"{hostile.host}/slow/app:1", ca=hostile.ca, read_timeout=0.5)
    assert time.monotonic() - started < 5
    assert failed.status == "failed"
    assert failed.detail == f"registry {hostile.host}: {hostile.host} did not answer within 0.5s"
    total = lookup(f"{hostile.host}/slow/app:1", ca=hostile.ca, timeout=0.4)
    assert total.detail == f"registry {hostile.host}: no answer within 0.4s"


def test_a_config_blob_that_does_not_match_its_digest(hostile: Hostile) -> None:
    _digest, manifest, config = _serve_image(hostile, "lying/app", "1", ["CUDA_VERSION=12.4.1"])
    config_digest = json.loads(manifest)["config"]["digest"]
    tampered = config.replace(b"12.4.1", b"11.0.0")
    hostile.routes[f"/v2/lying/app/blobs/{config_digest}"] = (200, {}, tampered)
    failed = lookup(f"{hostile.host}/lying/app:1", ca=hostile.ca)
    assert failed.status == "failed"
    actual = "sha256:" + hashlib.sha256(tampered).hexdigest()
    assert f"digest mismatch: config blob {config_digest} has digest {actual}" in failed.detail


def test_a_manifest_that_does_not_match_its_digest(hostile: Hostile) -> None:
    digest, manifest, _ = _serve_image(hostile, "lying/app", "1", ["CUDA_VERSION=12.4.1"])
    hostile.routes["/v2/lying/app/manifests/1"] = (
        200,
        {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": "sha256:" + "0" * 64},
        manifest,
    )
    failed = lookup(f"{hostile.host}/lying/app:1", ca=hostile.ca)
    assert "digest mismatch" in failed.detail and digest in failed.detail
    pinned = lookup(f"{hostile.host}/lying/app@sha256:{'1' * 64}", ca=hostile.ca)
    assert pinned.status == "failed"
    hostile.routes[f"/v2/lying/app/manifests/sha256:{'1' * 64}"] = (200, {"Content-Type": OCI_MANIFEST}, manifest)
    pinned = lookup(f"{hostile.host}/lying/app@sha256:{'1' * 64}", ca=hostile.ca)
    assert f"digest mismatch: the manifest served for sha256:{'1' * 64} has digest {digest}" in pinned.detail


def test_oversized_bodies_are_cut_off(hostile: Hostile) -> None:
    _digest, manifest, _config = _serve_image(hostile, "big/app", "1", ["CUDA_VERSION=12.4.1"])
    config_digest = json.loads(manifest)["config"]["digest"]
    huge = b"{" + b" " * (3 << 20) + b"}"
    hostile.routes[f"/v2/big/app/blobs/{config_digest}"] = (200, {"Content-Length": str(len(huge))}, huge)
    failed = lookup(f"{hostile.host}/big/app:1", ca=hostile.ca, max_config_bytes=1 << 20)
    assert failed.status == "failed"
    assert f"the config blob is {len(huge)} bytes, over the limit of {1 << 20} bytes" in failed.detail
    # Without a Content-Length, the client must stop reading at its limit.
    hostile.routes[f"/v2/big/app/blobs/{config_digest}"] = (200, {"Connection": "close"}, huge)
    streamed = lookup(f"{hostile.host}/big/app:1", ca=hostile.ca, max_config_bytes=1 << 20)
    assert streamed.status == "failed"
    assert f"the config blob is over the limit of {1 << 20} bytes (stopped reading)" in streamed.detail
    hostile.routes["/v2/big/app/manifests/2"] = (200, {"Content-Type": OCI_MANIFEST}, b"[" + b" " * (5 << 20) + b"]")
    big_manifest = lookup(f"{hostile.host}/big/app:2", ca=hostile.ca)
    assert "the manifest is" in big_manifest.detail and f"over the limit of {4 << 20} bytes" in big_manifest.detail


def test_credentials_never_follow_a_redirect_or_leave_their_realm(ca: RegistryCA, tmp_path: Path) -> None:
    """The registry gets only its token; the token realm gets the credential; the blob host gets nothing."""
    with run_hostile(Hostile(), ca.server_context("cdn")) as cdn, run_hostile(
        Hostile(), ca.server_context("registry-under-test")
    ) as registry:
        issuer = TokenIssuer(ca, "svc", "iss", {"bob": "bob-secret"}, lambda _u, _r: {"pull"})
        with run_token_issuer(issuer):
            _digest, manifest, config = _serve_image(registry, "team/app", "1", ["CUDA_VERSION=12.2.2"])
            config_digest = json.loads(manifest)["config"]["digest"]
            blob_path = f"/v2/team/app/blobs/{config_digest}"
            cdn.routes["/blob"] = (200, {}, config)
            registry.routes[blob_path] = (307, {"Location": f"https://{cdn.host}/blob"}, b"")
            protected = dict(registry.routes)
            challenge = f'Bearer realm="https://127.0.0.1:{issuer.port}/token",service="svc",scope="repository:team/app:pull"'

            # Every path answers 401 without the token the issuer signs for this test.
            class Guarded(dict[str, tuple[int, dict[str, str], bytes]]):
                def get(self, key: str, default: object = None) -> tuple[int, dict[str, str], bytes]:  # type: ignore[override]
                    _path, headers = registry.requests[-1]
                    if not headers.get("authorization", "").startswith("Bearer "):
                        return 401, {"WWW-Authenticate": challenge}, b'{"errors":[{"code":"UNAUTHORIZED"}]}'
                    return protected.get(key, (404, {}, b""))

            registry.routes = Guarded()
            creds = auth_file(tmp_path / "auth.json", {registry.host: ("bob", "bob-secret")})
            found = lookup(f"{registry.host}/team/app:1", ca=ca.cert, creds=creds)
            assert found.status == "found", found.detail
            assert found.config is not None and ("CUDA_VERSION", "12.2.2") in found.config.env
            basic = "Basic " + base64.b64encode(b"bob:bob-secret").decode()
            assert [r["authorization"] for r in issuer.requests] == [basic]
            seen_by_registry = [h.get("authorization") for _p, h in registry.requests]
            assert basic not in seen_by_registry
            assert any(a and a.startswith("Bearer ") for a in seen_by_registry)
            assert cdn.requests and all("authorization" not in h for _p, h in cdn.requests)


def test_insecure_registry_allows_plain_http_for_that_host_only(ca: RegistryCA) -> None:
    with run_hostile(Hostile(), None) as plain:
        _serve_image(plain, "lan/app", "1", ["CUDA_VERSION=12.1.1"])
        refused = lookup(f"{plain.host}/lan/app:1", ca=ca.cert)
        assert refused.status == "failed"
        assert "does not speak TLS" in refused.detail or "cannot connect" in refused.detail
        other = lookup(f"{plain.host}/lan/app:1", ca=ca.cert, insecure=frozenset({"127.0.0.1:1"}))
        assert other.status == "failed"
        found = lookup(f"{plain.host}/lan/app:1", ca=ca.cert, insecure=frozenset({plain.host}))
        assert found.status == "found", found.detail


def test_disk_cache_answers_without_the_registry(hostile: Hostile, tmp_path: Path) -> None:
    _serve_image(hostile, "cached/app", "1", ["CUDA_VERSION=12.4.1"])
    store = DiskStore(tmp_path, tag_ttl=3600, negative_ttl=60)
    first = lookup(f"{hostile.host}/cached/app:1", ca=hostile.ca, store=store)
    assert first.status == "found"
    asked = len(hostile.requests)
    hostile.routes.clear()
    again = lookup(f"{hostile.host}/cached/app:1", ca=hostile.ca, store=DiskStore(tmp_path, 3600, 60))
    assert again == first
    assert len(hostile.requests) == asked  # tag → digest → config, all from disk
    expired = lookup(f"{hostile.host}/cached/app:1", ca=hostile.ca, store=DiskStore(tmp_path, 0, 60))
    assert expired.status == "failed" and "not found" in expired.detail  # the tag is asked again
    remembered = lookup(f"{hostile.host}/cached/app:1", ca=hostile.ca, store=DiskStore(tmp_path, 0, 60))
    assert remembered.detail == expired.detail
    assert len(hostile.requests) == asked + 1  # the failure was remembered, not asked again
