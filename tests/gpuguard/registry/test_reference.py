"""Reference normalisation: cases ported from distribution/reference normalize_test.go (0965666a)."""

from __future__ import annotations

import pytest

from gpuguard.registry.reference import ReferenceError, parse

# TestValidateReferenceName: validRepoNames / invalidRepoNames
VALID = [
    "docker/docker", "library/debian", "debian", "localhost/library/debian", "localhost/debian",
    "LOCALDOMAIN/library/debian", "LOCALDOMAIN/debian", "docker.io/docker/docker", "docker.io/library/debian",
    "docker.io/debian", "index.docker.io/docker/docker", "index.docker.io/library/debian", "index.docker.io/debian",
    "127.0.0.1:5000/docker/docker", "127.0.0.1:5000/library/debian", "127.0.0.1:5000/debian", "192.168.0.1",
    "192.168.0.1:80", "192.168.0.1:8/debian", "192.168.0.2:25000/debian",
    "thisisthesongthatneverendsitgoesonandonandonthisisthesongthatnev",
    "[fc00::1]:5000/docker", "[fc00::1]:5000/docker/docker", "[fc00:1:2:3:4:5:6:7]:5000/library/debian",
    "docker.io/1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a", "Docker/docker", "DOCKER/docker",
]
INVALID = [
    "https://github.com/docker/docker", "docker/Docker", "-docker", "-docker/docker", "-docker.io/docker/docker",
    "docker///docker", "docker.io/docker/Docker", "docker.io/docker///docker", "[fc00::1]", "[fc00::1]:5000",
    "fc00::1:5000/debian", "[fe80::1%eth0]:5000/debian", "[2001:db8:3:4::192.0.2.33]:5000/debian",
    "1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a",
]
DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize("name", VALID)
def test_valid_names(name: str) -> None:
    parse(name)


@pytest.mark.parametrize("name", INVALID)
def test_invalid_names(name: str) -> None:
    with pytest.raises(ReferenceError):
        parse(name)


@pytest.mark.parametrize(
    ("text", "domain", "repository", "api_host", "reference"),
    [
        # TestParseRepositoryInfo / TestNormalizedSplitHostname
        ("ubuntu", "docker.io", "library/ubuntu", "registry-1.docker.io", "latest"),
        ("docker.io/ubuntu:22.04", "docker.io", "library/ubuntu", "registry-1.docker.io", "22.04"),
        ("index.docker.io/library/ubuntu", "docker.io", "library/ubuntu", "registry-1.docker.io", "latest"),
        ("vllm/vllm-openai:v0.6.3", "docker.io", "vllm/vllm-openai", "registry-1.docker.io", "v0.6.3"),
        ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io", "nvidia/pytorch", "nvcr.io", "24.05-py3"),
        ("localhost/foo", "localhost", "foo", "localhost", "latest"),
        ("localhost:5000/foo/bar:1", "localhost:5000", "foo/bar", "localhost:5000", "1"),
        ("127.0.0.1:5000/debian", "127.0.0.1:5000", "debian", "127.0.0.1:5000", "latest"),
        ("[fc00::1]:5000/docker", "[fc00::1]:5000", "docker", "[fc00::1]:5000", "latest"),
        ("Docker/docker", "Docker", "docker", "Docker", "latest"),
        ("192.168.0.1:80", "docker.io", "library/192.168.0.1", "registry-1.docker.io", "80"),
        # TestParseDockerRef: with a tag and a digest, the digest wins
        (f"busybox:latest@{DIGEST}", "docker.io", "library/busybox", "registry-1.docker.io", DIGEST),
        (f"ghcr.io/org/img@{DIGEST}", "ghcr.io", "org/img", "ghcr.io", DIGEST),
    ],
)
def test_normalisation(text: str, domain: str, repository: str, api_host: str, reference: str) -> None:
    ref = parse(text)
    assert (ref.domain, ref.repository, ref.api_host, ref.reference) == (domain, repository, api_host, reference)


def test_string_form() -> None:
    assert str(parse("ubuntu")) == "docker.io/library/ubuntu:latest"
    assert str(parse(f"busybox:1@{DIGEST}")) == f"docker.io/library/busybox@{DIGEST}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("docker.io/Foo/bar", "must be lowercase"),
        ("busybox@sha512:" + "a" * 128, "only sha256"),
        ("busybox@sha256:abc", "invalid reference format"),
        ("a/" + "b" * 260, "255 characters"),
        ("ubuntu:" + "t" * 129, "invalid reference format"),
    ],
)
def test_errors_say_why(text: str, message: str) -> None:
    with pytest.raises(ReferenceError, match=message):
        parse(text)
