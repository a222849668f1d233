"""Auth files and WWW-Authenticate challenges."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from gpuguard.registry.auth import CredentialStore, auth_file_path, parse_challenges


def _auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_auth_file_order(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "DOCKER_CONFIG": "/d", "REGISTRY_AUTH_FILE": "/r/auth.json"}
    assert auth_file_path(env) == Path("/r/auth.json")
    del env["REGISTRY_AUTH_FILE"]
    assert auth_file_path(env) == Path("/d/config.json")
    del env["DOCKER_CONFIG"]
    assert auth_file_path(env) == tmp_path / ".docker" / "config.json"


def test_lookup_by_host_hub_aliases_and_namespaces(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text(
        json.dumps(
            {
                "auths": {
                    "https://index.docker.io/v1/": {"auth": _auth("hub", "h")},
                    "nvcr.io": {"auth": _auth("$oauthtoken", "key:with:colons")},
                    "registry.lan:5000": {"auth": _auth("lan", "l")},
                    "registry.lan:5000/team/private": {"auth": _auth("team", "t")},
                    "helper.example.com": {},
                }
            }
        )
    )
    store = CredentialStore.load(path)
    assert store.problem == ""
    hub = store.find("docker.io", "library/ubuntu")
    assert hub is not None and hub.username == "hub"
    ngc = store.find("nvcr.io", "nvidia/pytorch")
    assert ngc is not None and (ngc.username, ngc.password) == ("$oauthtoken", "key:with:colons")
    lan = store.find("registry.lan:5000", "other/app")
    assert lan is not None and lan.username == "lan"
    team = store.find("registry.lan:5000", "team/private/app")
    assert team is not None and team.username == "team"
    assert store.find("registry.lan", "other/app") is None  # another port is another host
    assert store.find("helper.example.com", "x") is None  # kept by a credential helper: not read
    assert store.find("evil.example.com", "nvidia/pytorch") is None
    assert "key:with:colons" not in repr(ngc)


def test_missing_and_broken_files(tmp_path: Path) -> None:
    assert CredentialStore.load(tmp_path / "nope.json").entries == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "not valid JSON" in CredentialStore.load(bad).problem
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"auths": {"a.io": {"auth": "!!!"}, "b.io": {"auth": _auth("u", "p")}}}))
    store = CredentialStore.load(wrong)
    assert "auths.a.io.auth is not base64" in store.problem
    assert store.find("b.io", "x") is not None


def test_challenges() -> None:
    [bearer] = parse_challenges(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/ubuntu:pull"'
    )
    assert bearer.scheme == "bearer"
    assert bearer.params == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:library/ubuntu:pull",
    }
    basic, second = parse_challenges('Basic realm="Registry Realm", Bearer realm="https://a/t", scope="x:y:pull,push"')
    assert (basic.scheme, basic.params) == ("basic", {"realm": "Registry Realm"})
    assert second.params == {"realm": "https://a/t", "scope": "x:y:pull,push"}
    [escaped] = parse_challenges(r'Bearer realm="https://a/\"t\"" , error=invalid_token')
    assert escaped.params == {"realm": 'https://a/"t"', "error": "invalid_token"}
    assert parse_challenges("") == []
