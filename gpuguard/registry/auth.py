"""Registry credentials (docker/containers auth files) and ``WWW-Authenticate`` challenges.

Auth files, first that applies: ``$REGISTRY_AUTH_FILE`` (containers-auth.json(5)), else
``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``.  Both formats keep
``{"auths": {"<key>": {"auth": base64("user:password")}}}``.  A key is a host (``nvcr.io``,
``127.0.0.1:5000``), optionally with a scheme and path as ``docker login`` wrote them for Docker
Hub (``https://index.docker.io/v1/``); containers-auth.json also allows ``host/namespace[/repo]``
keys, of which the most specific match wins.  Credential helpers (``credsStore``,
``credHelpers``) are not run: gpuguard never executes programs named in a config file.

A credential is looked up for the registry an image names and is sent only to that registry
(Basic) or to the token endpoint its Bearer challenge names; never on a redirect to another host.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuguard.registry.reference import DEFAULT_DOMAIN, DOCKER_HUB_API_HOST, LEGACY_DEFAULT_DOMAIN

MAX_AUTH_FILE_BYTES = 4 << 20
_HUB_ALIASES = frozenset({DEFAULT_DOMAIN, LEGACY_DEFAULT_DOMAIN, DOCKER_HUB_API_HOST})


@dataclass(frozen=True, slots=True)
class Credential:
    username: str
    password: str
    origin: str  # "<auth file> (<key>)", for messages; never the secret

    def basic_header(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")

    def __repr__(self) -> str:  # keep secrets out of logs and tracebacks
        return f"Credential(username={self.username!r}, origin={self.origin!r})"


def auth_file_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("REGISTRY_AUTH_FILE"):
        return Path(env["REGISTRY_AUTH_FILE"])
    if env.get("DOCKER_CONFIG"):
        return Path(env["DOCKER_CONFIG"]) / "config.json"
    return Path(env.get("HOME") or Path.home()) / ".docker" / "config.json"


def _key_location(key: str) -> tuple[str, str]:
    """(host, path) of an ``auths`` key: scheme dropped, Docker Hub aliases folded to docker.io."""
    text = key.strip()
    for scheme in ("https://", "http://"):
        if text.lower().startswith(scheme):
            text = text[len(scheme) :]
            break
    host, _, path = text.partition("/")
    host = host.lower()
    if host in _HUB_ALIASES:
        host = DEFAULT_DOMAIN
        if path.rstrip("/") == "v1":  # "https://index.docker.io/v1/" is a host, not a namespace
            path = ""
    return host, path.strip("/")


@dataclass(frozen=True)
class CredentialStore:
    """The ``auths`` of one auth file; ``problem`` says why it could not be read (else empty)."""

    path: Path | None = None
    entries: Mapping[tuple[str, str], Credential] = field(default_factory=dict)
    problem: str = ""

    @classmethod
    def load(cls, path: Path | None = None) -> CredentialStore:
        path = path or auth_file_path()
        try:
            with path.open("rb") as fh:
                raw = fh.read(MAX_AUTH_FILE_BYTES + 1)
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            return cls(path, problem=f"cannot read {path}: {exc.strerror or exc}")
        if len(raw) > MAX_AUTH_FILE_BYTES:
            return cls(path, problem=f"{path} is larger than {MAX_AUTH_FILE_BYTES} bytes")
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return cls(path, problem=f"{path} is not valid JSON: {exc}")
        auths = doc.get("auths") if isinstance(doc, dict) else None
        if auths is None:
            return cls(path)
        if not isinstance(auths, dict):
            return cls(path, problem=f"{path}: auths must be an object")
        entries: dict[tuple[str, str], Credential] = {}
        problems = []
        for key, value in auths.items():
            encoded = value.get("auth") if isinstance(value, dict) else None
            if not encoded:
                continue  # an entry kept by a credential helper
            try:
                decoded = base64.b64decode(str(encoded), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                problems.append(f"{path}: auths.{key}.auth is not base64 of user:password")
                continue
            user, sep, password = decoded.partition(":")
            if not sep or not user:
                problems.append(f"{path}: auths.{key}.auth is not base64 of user:password")
                continue
            entries[_key_location(str(key))] = Credential(user, password, f"{path} ({key})")
        return cls(path, entries, "; ".join(problems))

    def find(self, domain: str, repository: str) -> Credential | None:
        """The credential for ``domain/repository``: the most specific key that matches."""
        host = domain.lower()
        if host in _HUB_ALIASES:
            host = DEFAULT_DOMAIN
        parts = repository.split("/")
        for n in range(len(parts), -1, -1):
            found = self.entries.get((host, "/".join(parts[:n])))
            if found is not None:
                return found
        return None


@dataclass(frozen=True, slots=True)
class Challenge:
    scheme: str  # lower case: "bearer", "basic"
    params: Mapping[str, str]


def _skip_spaces(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _token(text: str, i: int) -> tuple[str, int]:
    start = i
    while i < len(text) and text[i] not in " \t,=\"":
        i += 1
    return text[start:i], i


def _quoted(text: str, i: int) -> tuple[str, int]:
    out = []
    i += 1  # opening quote
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if ch == '"':
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    return "".join(out), i


def parse_challenges(header: str) -> list[Challenge]:
    """The challenges of one ``WWW-Authenticate`` value (RFC 9110 section 11.6.1 syntax)."""
    challenges: list[Challenge] = []
    i = 0
    text = header.strip()
    while i < len(text):
        i = _skip_spaces(text, i)
        while i < len(text) and text[i] == ",":
            i = _skip_spaces(text, i + 1)
        scheme, i = _token(text, i)
        if not scheme:
            break
        params: dict[str, str] = {}
        while True:
            j = _skip_spaces(text, i)
            name, k = _token(text, j)
            k = _skip_spaces(text, k)
            if not name or k >= len(text) or text[k] != "=":
                i = j
                break  # the next challenge's scheme (or the end)
            k = _skip_spaces(text, k + 1)
            if k < len(text) and text[k] == '"':
                value, k = _quoted(text, k)
            else:
                value, k = _token(text, k)
            params[name.lower()] = value
            k = _skip_spaces(text, k)
            if k < len(text) and text[k] == ",":
                k += 1
            i = k
        challenges.append(Challenge(scheme.lower(), params))
    return challenges
