"""Image references, parsed and normalised exactly as Docker does.

Source: github.com/distribution/reference at 0965666a (2026-04-18): ``regexp.go`` (the grammar),
``normalize.go`` (``ParseNormalizedNamed``, ``splitDockerDomain``, ``ParseDockerRef``) and
``reference.go`` (``RepositoryNameTotalLengthMax = 255``).  The test cases of
``normalize_test.go`` are ported in tests/gpuguard/registry/test_reference.py.

* The first path component is a registry when it is ``localhost``, contains ``.`` or ``:``, or
  has an uppercase letter; otherwise the image is on Docker Hub (``docker.io``), and a one-part
  Hub name gets the ``library/`` prefix.  ``index.docker.io`` is the legacy Hub name.
* No tag and no digest means ``:latest``; with both, the digest wins (``ParseDockerRef``).
* Docker Hub's registry API is served at ``registry-1.docker.io`` (normalize.go, comment on
  ``defaultDomain``: "Note that actual domain of Docker Hub's registry is registry-1.docker.io."),
  which is where requests go.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies import patterns

DEFAULT_DOMAIN = "docker.io"
LEGACY_DEFAULT_DOMAIN = "index.docker.io"
DOCKER_HUB_API_HOST = "registry-1.docker.io"
OFFICIAL_REPO_PREFIX = "library/"
DEFAULT_TAG = "latest"
NAME_TOTAL_LENGTH_MAX = 255

_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_DOMAIN_NAME_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_OPTIONAL_PORT = r"(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN_NAME = _DOMAIN_NAME_COMPONENT + r"(?:\." + _DOMAIN_NAME_COMPONENT + r")*"
_HOST = r"(?:" + _DOMAIN_NAME + r"|" + _IPV6 + r")"
_DOMAIN_AND_PORT = _HOST + _OPTIONAL_PORT
_PATH_COMPONENT = _ALPHANUMERIC + r"(?:" + _SEPARATOR + _ALPHANUMERIC + r")*"
_REMOTE_NAME = _PATH_COMPONENT + r"(?:/" + _PATH_COMPONENT + r")*"
_NAME = r"(?:" + _DOMAIN_AND_PORT + r"/)?" + _REMOTE_NAME

# RE2, as Go's regexp: linear time on any input, and \w is ASCII-only as in Go.
_REFERENCE = patterns.compile(r"^(" + _NAME + r")(?::(" + _TAG + r"))?(?:@(" + _DIGEST + r"))?$")
_ANCHORED_NAME = patterns.compile(r"^(?:(" + _DOMAIN_AND_PORT + r")/)?(" + _REMOTE_NAME + r")$")
_IDENTIFIER = patterns.compile(r"^[a-f0-9]{64}$")
_SHA256_DIGEST = patterns.compile(r"^sha256:[a-f0-9]{64}$")


class ReferenceError(ValueError):
    """Not a valid image reference; the message says why."""


@dataclass(frozen=True, slots=True)
class ImageRef:
    """A normalised reference: ``docker.io/library/ubuntu:latest``."""

    domain: str  # as written (normalised for Docker Hub), with its port: "127.0.0.1:5000"
    repository: str  # path without the domain: "library/ubuntu"
    tag: str | None
    digest: str | None  # "sha256:<hex>" when pinned; wins over the tag

    @property
    def api_host(self) -> str:
        """Where the registry API is served (``registry-1.docker.io`` for Docker Hub)."""
        return DOCKER_HUB_API_HOST if self.domain == DEFAULT_DOMAIN else self.domain

    @property
    def reference(self) -> str:
        """What to ask the registry for: the digest when pinned, else the tag."""
        return self.digest or self.tag or DEFAULT_TAG

    def __str__(self) -> str:
        if self.digest:
            return f"{self.domain}/{self.repository}@{self.digest}"
        return f"{self.domain}/{self.repository}:{self.tag or DEFAULT_TAG}"


def split_docker_domain(name: str) -> tuple[str, str]:
    """``splitDockerDomain`` of normalize.go: (domain, remote name) of a name (tag included)."""
    maybe_domain, sep, maybe_remote = name.partition("/")
    if not sep:
        return DEFAULT_DOMAIN, OFFICIAL_REPO_PREFIX + name
    if maybe_domain == "localhost":
        domain, remote = maybe_domain, maybe_remote
    elif maybe_domain == LEGACY_DEFAULT_DOMAIN:
        domain, remote = DEFAULT_DOMAIN, maybe_remote
    elif "." in maybe_domain or ":" in maybe_domain or maybe_domain.lower() != maybe_domain:
        domain, remote = maybe_domain, maybe_remote
    else:
        domain, remote = DEFAULT_DOMAIN, name
    if domain == DEFAULT_DOMAIN and "/" not in remote:
        remote = OFFICIAL_REPO_PREFIX + remote
    return domain, remote


_TAG_ONLY = patterns.compile(r"^" + _TAG + r"$")
_DIGEST_ONLY = patterns.compile(r"^" + _DIGEST + r"$")
_PATH_ONLY = patterns.compile(r"^" + _PATH_COMPONENT + r"$")
_DOMAIN_ONLY = patterns.compile(r"^" + _DOMAIN_AND_PORT + r"$")


def _why(text: str) -> str:
    """What makes ``text`` no reference, by the parts of the grammar (regexp.go): "" when unknown."""
    if any(c.isspace() for c in text):
        return ": it contains whitespace (a reference is one word, e.g. nvcr.io/nvidia/pytorch:24.05-py3)"
    name, at, digest = text.partition("@")
    if at and not _DIGEST_ONLY.match(digest):
        return f": the digest after '@' must be ALGORITHM:HEX with at least 32 hex digits, not {digest[:80]!r}"
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon == 0 or not name:
        return ": the name before ':' or '@' is empty"
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
        if not tag:
            return ": the tag after ':' is empty"
        if not _TAG_ONLY.match(tag):
            return (": the tag may hold only letters, digits, '_', '.' and '-', must not start with '.' or '-', "
                    f"and is at most 128 characters ({tag[:40]!r})")
    parts = name.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost" or first.lower() != first):
        if not _DOMAIN_ONLY.match(first):
            return f": {first[:80]!r} is not a registry host[:port]"
        parts = parts[1:]
    for part in parts:
        if not part:
            return ": a path component is empty ('//', or a leading or trailing '/')"
        if not _PATH_ONLY.match(part):
            return (f": path component {part[:80]!r} may hold only lowercase letters and digits, separated by "
                    "'.', '_', '__' or '-'")
    return ""


def parse(text: str) -> ImageRef:
    """``ParseDockerRef``: normalise, default the tag to ``latest``, and let a digest win."""
    if not isinstance(text, str) or not text:
        raise ReferenceError("empty image reference")
    if _IDENTIFIER.match(text):
        raise ReferenceError(
            f"invalid repository name ({text}), cannot specify 64-byte hexadecimal strings"
        )
    domain, remainder = split_docker_domain(text)
    remote = remainder.split(":", 1)[0] if ":" in remainder else remainder
    remote = remote.split("@", 1)[0]
    if remote.lower() != remote:
        raise ReferenceError(f"invalid reference format: repository name ({remote}) must be lowercase")
    match = _REFERENCE.match(f"{domain}/{remainder}")
    if not match:
        shown = text if len(text) <= 120 else text[:119] + "…"
        raise ReferenceError(f"invalid reference format: {shown!r}{_why(text)}")
    name, tag, digest = match.group(1), match.group(2), match.group(3)
    if len(name) > NAME_TOTAL_LENGTH_MAX:
        raise ReferenceError(f"repository name must not be more than {NAME_TOTAL_LENGTH_MAX} characters")
    parts = _ANCHORED_NAME.match(name)
    if not parts or parts.group(1) is None:
        raise ReferenceError(f"invalid reference format: {text!r}")
    if digest is not None and not _SHA256_DIGEST.match(digest):
        algorithm = digest.split(":", 1)[0]
        if algorithm != "sha256":
            raise ReferenceError(f"unsupported digest algorithm {algorithm!r} (only sha256)")
        raise ReferenceError(f"invalid sha256 digest {digest!r}")
    return ImageRef(
        domain=parts.group(1),
        repository=parts.group(2),
        tag=None if digest else (tag or DEFAULT_TAG),
        digest=digest,
    )
