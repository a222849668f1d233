"""Read an image's config from its registry: OCI Distribution over httpx, verified and bounded.

Protocol (OCI Distribution Spec v1.1, opencontainers/distribution-spec ``spec.md``; OCI Image
Spec ``image-index.md``, ``manifest.md``, ``config.md``; Docker's manifest v2 schema 2):

1. ``GET /v2/<repository>/manifests/<tag or digest>`` accepting the OCI index and manifest and
   Docker's manifest list and manifest types.  The manifest's digest is the sha256 of the bytes
   served; it must equal a requested digest and a ``Docker-Content-Digest`` header.
2. An index (manifest list) names one manifest per platform; the one for ``linux``/<arch> is
   fetched by digest (verified again, and against the size its descriptor gives).
3. The manifest's ``config`` descriptor names the config blob: ``GET /v2/<repository>/blobs/<digest>``,
   verified by sha256 and size; its ``config.Env`` and ``config.Labels`` are what the runtime sees.

Auth (distribution ``docs/spec/auth/token.md`` at v2.8.2): a 401 carries ``WWW-Authenticate``;
``Bearer realm,service,scope`` means GET a token from the realm (with the image registry's
credential as Basic auth when there is one, anonymously otherwise) and retry with
``Authorization: Bearer <token or access_token>``; ``Basic`` means retry with the credential.

Safety: TLS is always verified (``--registry-ca`` adds a CA); plain HTTP only for hosts listed
as insecure; redirects (blob downloads go to storage or CDN hosts) are followed without the
``Authorization`` header unless they stay on the same origin; credentials go only to the
registry they are for or its token realm; every body is streamed and cut off at its size limit.
"""

from __future__ import annotations

import hashlib
import json
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import certifi
import httpx

from gpuguard.registry.auth import Challenge, Credential, CredentialStore, parse_challenges
from gpuguard.registry.reference import ImageRef
from policies import patterns
from policies.images import ImageConfig
from policies.registry_config import RegistrySettings

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = (
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
)
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
CONFIG_TYPES = frozenset({OCI_CONFIG, DOCKER_CONFIG})

MAX_REDIRECTS = 5
MAX_ERROR_BODY = 64 << 10
MAX_TOKEN_BYTES = 1 << 20
DEFAULT_TOKEN_SECONDS = 60  # token.md: "If omitted, a default of 60 seconds is used"
_SHA256 = patterns.compile(r"^sha256:[a-f0-9]{64}$")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class RegistryError(Exception):
    """A lookup that cannot succeed; ``str()`` is a one-line explanation for users."""


@dataclass(frozen=True, slots=True)
class ClientOptions:
    ca: Path | None = None
    insecure: frozenset[str] = frozenset()
    connect_timeout: float = 3.0
    read_timeout: float = 5.0
    max_manifest_bytes: int = 4 << 20
    max_config_bytes: int = 8 << 20

    @classmethod
    def from_settings(cls, settings: RegistrySettings) -> ClientOptions:
        return cls(
            ca=Path(settings.ca) if settings.ca else None,
            insecure=frozenset(settings.insecure),
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            max_manifest_bytes=settings.max_manifest_bytes,
            max_config_bytes=settings.max_config_bytes,
        )


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: httpx.Headers
    body: bytes
    url: httpx.URL


@dataclass(frozen=True, slots=True)
class Manifest:
    digest: str
    media_type: str
    doc: dict[str, Any]
    size: int

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES or (not self.media_type and isinstance(self.doc.get("manifests"), list))


def tls_context(ca: Path | None) -> ssl.SSLContext:
    """System and certifi roots (what httpx trusts by default), plus ``ca``; always verifying."""
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=certifi.where())
    if ca is not None:
        try:
            context.load_verify_locations(cafile=str(ca))
        except (OSError, ssl.SSLError) as exc:
            raise RegistryError(f"cannot load the registry CA {ca}: {exc}") from None
    return context


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    port = url.port or (443 if url.scheme == "https" else 80)
    return url.scheme, url.host.lower(), port


def _host_port(url: httpx.URL) -> str:
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port}" if url.port else host


def _registry_errors(body: bytes) -> str:
    """``CODE: message`` of a registry error body (spec.md "Error Codes"), if it is one."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return ""
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if not isinstance(errors, list):
        return ""
    parts = []
    for err in errors[:3]:
        if isinstance(err, dict):
            code, message = str(err.get("code") or ""), str(err.get("message") or "")
            parts.append(f"{code}: {message}" if code and message else code or message)
    return "; ".join(p for p in parts if p)[:300]


def _sha256(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def choose_platform(manifests: Iterable[Any], arch: str) -> dict[str, Any] | None:
    """The index entry for linux/``arch`` (for arm64 one without a variant, or ``v8``, first)."""
    matches = [
        m
        for m in manifests
        if isinstance(m, dict)
        and isinstance(m.get("platform"), dict)
        and m["platform"].get("os") == "linux"
        and m["platform"].get("architecture") == arch
    ]
    preferred = [m for m in matches if m["platform"].get("variant") in (None, "", "v8")]
    chosen = preferred or matches
    return chosen[0] if chosen else None


def _platforms(manifests: Iterable[Any]) -> str:
    seen = []
    for m in manifests:
        p = m.get("platform") if isinstance(m, dict) else None
        if isinstance(p, dict) and p.get("os") not in (None, "unknown"):
            text = f"{p.get('os')}/{p.get('architecture')}" + (f"/{p['variant']}" if p.get("variant") else "")
            if text not in seen:
                seen.append(text)
    return ", ".join(seen) or "none"


def parse_config(raw: bytes, digest: str, source: str) -> tuple[ImageConfig, str, str]:
    """The ImageConfig of a config blob, and the blob's own os and architecture."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(f"the image config is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RegistryError("the image config is not a JSON object")
    found = doc.get("config")
    conf: dict[str, Any] = found if isinstance(found, dict) else {}
    listed = conf.get("Env")
    env: list[tuple[str, str]] = []
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, str) and "=" in item:
            name, _, value = item.partition("=")
            env.append((name, value))
    raw_labels = conf.get("Labels")
    labels = (
        {k: v for k, v in raw_labels.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(raw_labels, dict)
        else {}
    )
    config = ImageConfig(env=tuple(env), labels=labels, digest=digest, source=source)
    return config, str(doc.get("os") or ""), str(doc.get("architecture") or "")


class RegistryClient:
    """One client for all registries; create and use it on one event loop."""

    def __init__(
        self,
        options: ClientOptions,
        credentials: CredentialStore | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.options = options
        self.credentials = credentials if credentials is not None else CredentialStore.load()
        self._transport = transport
        self._verify = tls_context(options.ca)
        self._http: httpx.AsyncClient | None = None
        self._auth: dict[tuple[str, str], tuple[str, float]] = {}  # (host, repo) → (header, expiry)

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            o = self.options
            self._http = httpx.AsyncClient(
                verify=self._verify,
                timeout=httpx.Timeout(connect=o.connect_timeout, read=o.read_timeout, write=o.read_timeout,
                                      pool=o.connect_timeout),
                follow_redirects=False,
                limits=httpx.Limits(max_connections=32, max_keepalive_connections=8),
                transport=self._transport,
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # -- HTTP with bounds and safe redirects -------------------------------------------------

    def _scheme(self, host_port: str) -> str:
        return "http" if host_port.lower() in self.options.insecure else "https"

    def base_url(self, ref: ImageRef) -> str:
        return f"{self._scheme(ref.api_host)}://{ref.api_host}"

    async def _send(
        self,
        url: httpx.URL,
        accept: str,
        auth: str | None,
        limit: int,
        what: str,
        params: Mapping[str, str] | None = None,
    ) -> Response:
        """GET ``url``; ``auth`` goes only to ``url``'s own origin, never across a redirect."""
        trusted = _origin(url)
        client = self._client()
        for _ in range(MAX_REDIRECTS + 1):
            headers = {"Accept": accept, "User-Agent": "gpuguard"}
            if auth and _origin(url) == trusted:
                headers["Authorization"] = auth
            try:
                async with client.stream("GET", url, headers=headers, params=params) as resp:
                    if resp.status_code in _REDIRECTS:
                        location = resp.headers.get("location")
                        if not location:
                            raise RegistryError(f"{_host_port(url)} redirected without a Location")
                        target = resp.url.join(location)
                        if target.scheme not in ("https", "http") or (
                            target.scheme == "http" and _host_port(target).lower() not in self.options.insecure
                        ):
                            raise RegistryError(
                                f"{_host_port(url)} redirected the {what} to {target.scheme}://{_host_port(target)}, "
                                "which is not HTTPS (list it as an insecure registry to allow plain HTTP)"
                            )
                        url, params = target, None
                        continue
                    cap = limit if resp.status_code == 200 else MAX_ERROR_BODY
                    body = await self._read(resp, cap, what, truncate=resp.status_code != 200)
                    return Response(resp.status_code, resp.headers, body, resp.url)
            except httpx.ConnectTimeout:
                raise RegistryError(
                    f"connecting to {_host_port(url)} timed out after {self.options.connect_timeout:g}s"
                ) from None
            except httpx.ReadTimeout:
                raise RegistryError(
                    f"{_host_port(url)} did not answer within {self.options.read_timeout:g}s"
                ) from None
            except httpx.ConnectError as exc:
                raise RegistryError(self._connect_problem(url, exc)) from None
            except httpx.HTTPError as exc:
                raise RegistryError(f"{_host_port(url)}: {type(exc).__name__}: {exc}") from None
        raise RegistryError(f"more than {MAX_REDIRECTS} redirects fetching the {what}")

    def _connect_problem(self, url: httpx.URL, exc: httpx.ConnectError) -> str:
        text = str(exc)
        if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
            reason = text.split("certificate verify failed:", 1)[-1].split("(_ssl")[0].strip(" )")
            return (
                f"TLS verification of {_host_port(url)} failed ({reason or 'untrusted certificate'}); "
                "add its CA with --registry-ca or registry.ca"
            )
        if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text:
            return f"{_host_port(url)} does not speak TLS (list it as an insecure registry if it serves plain HTTP)"
        return f"cannot connect to {_host_port(url)}: {text or type(exc).__name__}"

    @staticmethod
    async def _read(resp: httpx.Response, limit: int, what: str, truncate: bool) -> bytes:
        declared = resp.headers.get("content-length")
        if not truncate and declared and declared.isdigit() and int(declared) > limit:
            raise RegistryError(f"the {what} is {int(declared)} bytes, over the limit of {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > limit:
                if truncate:
                    chunks.append(chunk[: max(0, limit - (size - len(chunk)))])
                    break
                raise RegistryError(f"the {what} is over the limit of {limit} bytes (stopped reading)")
            chunks.append(chunk)
        return b"".join(chunks)

    # -- auth ---------------------------------------------------------------------------------

    def _cached_auth(self, ref: ImageRef) -> str | None:
        found = self._auth.get((ref.api_host, ref.repository))
        if found is None or found[1] <= time.monotonic():
            return None
        return found[0]

    def _no_credentials(self, ref: ImageRef) -> str:
        store = self.credentials
        where = str(store.path) if store.path else "the auth file"
        text = f"no credentials for {ref.domain} in {where}"
        return text + (f" ({store.problem})" if store.problem else "")

    async def _authenticate(self, ref: ImageRef, resp: Response) -> str:
        challenges = [c for h in resp.headers.get_list("www-authenticate") for c in parse_challenges(h)]
        credential = self.credentials.find(ref.domain, ref.repository)
        bearer = next((c for c in challenges if c.scheme == "bearer"), None)
        if bearer is not None:
            header, seconds = await self._token(ref, bearer, credential)
        elif any(c.scheme == "basic" for c in challenges):
            if credential is None:
                raise RegistryError(f"unauthorized: {ref.domain} requires a login; {self._no_credentials(ref)}")
            header, seconds = credential.basic_header(), 3600.0
        else:
            shown = ", ".join(c.scheme for c in challenges) or "none"
            raise RegistryError(f"unauthorized: {ref.domain} asks for an unsupported authentication ({shown})")
        self._auth[(ref.api_host, ref.repository)] = (header, time.monotonic() + seconds)
        return header

    async def _token(self, ref: ImageRef, challenge: Challenge, credential: Credential | None) -> tuple[str, float]:
        realm = challenge.params.get("realm", "")
        try:
            url = httpx.URL(realm)
        except httpx.InvalidURL:
            url = httpx.URL("")
        if url.scheme not in ("https", "http") or not url.host:
            raise RegistryError(f"{ref.domain} names an invalid token realm {realm!r}")
        if url.scheme == "http" and _host_port(url).lower() not in self.options.insecure:
            raise RegistryError(f"{ref.domain} names a token realm over plain HTTP ({realm}); refused")
        params = {"scope": challenge.params.get("scope") or f"repository:{ref.repository}:pull"}
        if challenge.params.get("service"):
            params["service"] = challenge.params["service"]
        auth = credential.basic_header() if credential is not None else None
        resp = await self._send(url, "application/json", auth, MAX_TOKEN_BYTES, "token", params=params)
        if resp.status in (401, 403):
            if credential is None:
                raise RegistryError(
                    f"unauthorized: the token service {_host_port(url)} refused anonymous access to "
                    f"{ref.repository}; {self._no_credentials(ref)}"
                )
            raise RegistryError(
                f"unauthorized: the token service {_host_port(url)} refused the credentials from {credential.origin}"
            )
        if resp.status != 200:
            raise RegistryError(f"the token service {_host_port(url)} answered HTTP {resp.status}")
        try:
            doc = json.loads(resp.body)
        except (ValueError, UnicodeDecodeError):
            doc = None
        token = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"the token service {_host_port(url)} sent no token")
        expires = doc.get("expires_in") if isinstance(doc, dict) else None
        seconds = float(expires) if isinstance(expires, (int, float)) and not isinstance(expires, bool) else 0.0
        if seconds <= 0:
            seconds = DEFAULT_TOKEN_SECONDS
        return f"Bearer {token}", max(1.0, min(seconds, 3600.0) - 5.0)

    async def _get(self, ref: ImageRef, path: str, accept: str, limit: int, what: str) -> Response:
        url = httpx.URL(f"{self.base_url(ref)}/v2/{ref.repository}/{path}")
        resp = await self._send(url, accept, self._cached_auth(ref), limit, what)
        if resp.status == 401:
            auth = await self._authenticate(ref, resp)
            resp = await self._send(url, accept, auth, limit, what)
            if resp.status == 401:
                credential = self.credentials.find(ref.domain, ref.repository)
                if credential is not None:
                    raise RegistryError(
                        f"unauthorized: {ref.domain} refused the credentials from {credential.origin} "
                        f"for {ref.repository}"
                    )
                raise RegistryError(
                    f"unauthorized: {ref.domain} refused anonymous access to {ref.repository}; "
                    + self._no_credentials(ref)
                )
        if resp.status == 200:
            return resp
        detail = _registry_errors(resp.body)
        suffix = f" ({detail})" if detail else ""
        if resp.status == 404:
            name = path.rsplit("/", 1)[-1]
            at = "@" if name.startswith("sha256:") else ":"
            raise RegistryError(f"not found: {what} {ref.domain}/{ref.repository}{at}{name}{suffix}")
        if resp.status == 403:
            raise RegistryError(f"denied: {ref.domain} refused access to {ref.repository}{suffix}")
        if resp.status == 429:
            raise RegistryError(f"rate limited by {ref.domain}{suffix}")
        raise RegistryError(f"{ref.domain} answered HTTP {resp.status} for the {what}{suffix}")

    # -- manifests and config -----------------------------------------------------------------

    async def manifest(self, ref: ImageRef, reference: str) -> Manifest:
        resp = await self._get(ref, f"manifests/{reference}", MANIFEST_ACCEPT, self.options.max_manifest_bytes,
                               "manifest")
        digest = _sha256(resp.body)
        if reference.startswith("sha256:") and digest != reference:
            raise RegistryError(f"digest mismatch: the manifest served for {reference} has digest {digest}")
        header = resp.headers.get("docker-content-digest", "")
        if header.startswith("sha256:") and header != digest:
            raise RegistryError(f"digest mismatch: {ref.domain} says the manifest is {header}, its bytes are {digest}")
        try:
            doc = json.loads(resp.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RegistryError(f"the manifest is not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise RegistryError("the manifest is not a JSON object")
        content_type = resp.headers.get("content-type", "").split(";")[0].strip()
        media_type = str(doc.get("mediaType") or content_type)
        if doc.get("schemaVersion") == 1 or media_type in DOCKER_SCHEMA1:
            raise RegistryError("the registry serves only a Docker schema 1 manifest, which is not supported")
        return Manifest(digest, media_type, doc, len(resp.body))

    async def image_config(self, ref: ImageRef, top: Manifest, arch: str) -> ImageConfig:
        """The config of ``top`` (an index or a manifest) for linux/``arch``."""
        platform = top
        if top.is_index:
            listed = top.doc.get("manifests")
            entries: list[Any] = listed if isinstance(listed, list) else []
            chosen = choose_platform(entries, arch)
            if chosen is None:
                raise RegistryError(f"no linux/{arch} image in the index (it has {_platforms(entries)})")
            digest = chosen.get("digest")
            if not isinstance(digest, str) or not _SHA256.match(digest):
                raise RegistryError(f"the index names the linux/{arch} manifest by an unsupported digest {digest!r}")
            platform = await self.manifest(ref, digest)
            if chosen.get("size") is not None and chosen.get("size") != platform.size:
                raise RegistryError(f"size mismatch: the index says {chosen.get('size')} bytes, got {platform.size}")
            if platform.is_index:
                raise RegistryError("the index points to another index for the platform; not supported")
        desc = platform.doc.get("config")
        if not isinstance(desc, dict):
            raise RegistryError("the manifest has no config descriptor")
        media_type, digest, size = desc.get("mediaType"), desc.get("digest"), desc.get("size")
        if media_type not in CONFIG_TYPES:
            raise RegistryError(f"not a container image (config media type {media_type!r})")
        if not isinstance(digest, str) or not _SHA256.match(digest):
            raise RegistryError(f"the config descriptor has an unsupported digest {digest!r}")
        limit = self.options.max_config_bytes
        if isinstance(size, int) and size > limit:
            raise RegistryError(f"the config blob is {size} bytes, over the limit of {limit} bytes")
        resp = await self._get(ref, f"blobs/{digest}", f"{media_type}, */*", limit, "config blob")
        actual = _sha256(resp.body)
        if actual != digest:
            raise RegistryError(f"digest mismatch: config blob {digest} has digest {actual}")
        if isinstance(size, int) and size != len(resp.body):
            raise RegistryError(f"size mismatch: the config blob is {len(resp.body)} bytes, its descriptor says {size}")
        source = f"registry {ref.domain}, {platform.digest[:19]}…"
        config, os_name, architecture = parse_config(resp.body, platform.digest, source)
        if not top.is_index and (os_name or architecture) and (os_name, architecture) != ("linux", arch):
            raise RegistryError(
                f"no linux/{arch} image: {ref.domain}/{ref.repository} is built for {os_name}/{architecture} only"
            )
        return config
