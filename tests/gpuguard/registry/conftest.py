"""Registry fixtures shared by the registry tests: servers are started once per module and stopped after."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.registry import (
    Hostile,
    Layout,
    Registry,
    RegistryCA,
    TokenIssuer,
    htpasswd_auth,
    require_tools,
    run_hostile,
    run_registry,
    run_token_issuer,
)

AMD64_ENV = ["PATH=/usr/bin", "CUDA_VERSION=12.8.1", "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=535,driver<536"]
ARM64_ENV = ["PATH=/usr/bin", "CUDA_VERSION=12.6.3", "NVIDIA_REQUIRE_CUDA=cuda>=12.6"]
SINGLE_ENV = ["CUDA_VERSION=12.4.1", "NVIDIA_DISABLE_REQUIRE=true"]


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> RegistryCA:
    return RegistryCA.create(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    out = Layout(tmp_path_factory.mktemp("layout") / "oci")
    out.add("12.4", {"amd64": (SINGLE_ENV, {"org.opencontainers.image.title": "single"})}, multi=False)
    out.add("multi", {"amd64": (AMD64_ENV, {"arch": "amd64"}), "arm64": (ARM64_ENV, {"arch": "arm64"})}, multi=True)
    return out


@pytest.fixture(scope="module")
def basic_registry(tmp_path_factory: pytest.TempPathFactory, ca: RegistryCA, layout: Layout) -> Iterator[Registry]:
    require_tools()
    tmp = tmp_path_factory.mktemp("basic")
    auth = htpasswd_auth(tmp, {"pusher": "push-secret", "reader": "read-secret"})
    with run_registry(tmp, ca, auth, "pusher:push-secret") as registry:
        registry.push(layout, "12.4", "cuda/app")
        registry.push(layout, "multi", "cuda/app")
        yield registry


def _grants(user: str | None, repository: str) -> set[str]:
    if user == "alice":
        return {"pull", "push"}
    return {"pull"} if repository.startswith("public/") else set()


@dataclass
class TokenSetup:
    registry: Registry
    issuer: TokenIssuer


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory, ca: RegistryCA, layout: Layout) -> Iterator[TokenSetup]:
    require_tools()
    tmp = tmp_path_factory.mktemp("token")
    issuer = TokenIssuer(ca, "gpuguard-test-registry", "gpuguard-test-issuer", {"alice": "alice-secret"}, _grants)
    with run_token_issuer(issuer), run_registry(tmp, ca, issuer.auth_config(), "alice:alice-secret") as registry:
        registry.push(layout, "multi", "public/app")
        registry.push(layout, "12.4", "private/app")
        yield TokenSetup(registry, issuer)


@pytest.fixture
def hostile(ca: RegistryCA) -> Iterator[Hostile]:
    with run_hostile(Hostile(ca=ca.cert), ca.server_context("hostile")) as state:
        yield state


