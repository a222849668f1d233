"""Which resources a live cluster serves, from its discovery documents, and paginated raw lists of them.

Discovery (k8s.io/apimachinery pkg/apis/meta/v1 types.go): ``GET /api`` answers ``APIVersions``
(``versions: ["v1"]``); ``GET /apis`` an ``APIGroupList`` (``groups[].name``,
``groups[].versions[].version``, ``groups[].preferredVersion.version``); ``GET /api/v1`` and
``GET /apis/<group>/<version>`` an ``APIResourceList`` whose ``resources[]`` carry ``name`` (the
plural; subresources contain a ``/``), ``kind``, ``namespaced`` and ``verbs``.  Every authenticated
user may read them (the ``system:discovery`` ClusterRole).

Lists use the kubernetes client's own request machinery (authentication, TLS, proxies) with
``limit``/``continue`` paging; bodies are handed out as msgspec ``Raw`` items, one page at a time,
so the caller decodes what it keeps.  A continue token that expired (HTTP 410) restarts the list,
so items may come twice: callers key objects by uid.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpuguard.kube.prune import PAGE
from gpuguard.kube.status import HTTP_GONE, HTTP_NOT_FOUND, status_message

PAGE_SIZE = 500
CONNECT_TIMEOUT_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 60.0
MAX_RESTARTS = 3


class ApiError(Exception):
    """A request the API server refused or could not answer; ``status`` is 0 for transport errors."""

    def __init__(self, path: str, status: int, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.status = status
        self.message = message


def _status_message(body: bytes) -> str:
    return status_message(body) or body[:200].decode("utf-8", "replace").strip()


class RestClient:
    """GET requests through a ``kubernetes.client.ApiClient`` (its auth and TLS), returning raw bytes."""

    def __init__(self, api_client: Any, timeout: tuple[float, float] = (CONNECT_TIMEOUT_SECONDS,
                                                                        READ_TIMEOUT_SECONDS)) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self.requests = 0

    def get(self, path: str, query: Sequence[tuple[str, Any]] = ()) -> bytes:
        """The body of a 2xx answer; ApiError otherwise."""
        self.requests += 1
        try:
            request = self.api_client.param_serialize(
                method="GET", resource_path=path, query_params=list(query),
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(*request, _request_timeout=self.timeout)
        except Exception as exc:  # urllib3 transport errors, TLS errors, timeouts
            status = getattr(exc, "status", 0)
            reason = str(getattr(exc, "reason", "") or exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            raise ApiError(path, status if isinstance(status, int) else 0, reason) from None
        try:
            body: bytes = response.read()
            status = int(response.status)
        finally:
            release = getattr(response.response, "release_conn", None)
            if callable(release):
                release()
        if not 200 <= status <= 299:
            raise ApiError(path, status, f"HTTP {status}: {_status_message(body)}")
        return body


@dataclass(frozen=True, slots=True)
class ServedResource:
    group: str
    version: str
    resource: str  # the plural
    kind: str
    namespaced: bool
    verbs: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The list path across all namespaces (or of the cluster-scoped resource)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{base}/{self.resource}"

    def namespaced_path(self, namespace: str) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{base}/namespaces/{namespace}/{self.resource}"


class _GroupVersion(msgspec.Struct):
    version: str = ""


class _Group(msgspec.Struct):
    name: str = ""
    versions: list[_GroupVersion] = []
    preferredVersion: _GroupVersion | None = None


class _GroupList(msgspec.Struct):
    groups: list[_Group] = []


class _Resource(msgspec.Struct):
    name: str = ""
    kind: str = ""
    namespaced: bool = False
    verbs: list[str] = []


class _ResourceList(msgspec.Struct):
    resources: list[_Resource] = []


_GROUPS = msgspec.json.Decoder(_GroupList)
_RESOURCES = msgspec.json.Decoder(_ResourceList)


@dataclass(slots=True)
class Discovery:
    """Cached discovery of one cluster."""

    client: RestClient
    _groups: dict[str, tuple[str, tuple[str, ...]]] | None = None  # group -> (preferred, served versions)
    _resources: dict[tuple[str, str], dict[str, ServedResource]] = field(default_factory=dict)

    def groups(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        if self._groups is None:
            try:
                listed = _GROUPS.decode(self.client.get("/apis")).groups
            except msgspec.DecodeError as exc:
                raise ApiError("/apis", 200, f"not an APIGroupList: {exc}") from None
            groups = {g.name: (g.preferredVersion.version if g.preferredVersion else "",
                               tuple(v.version for v in g.versions)) for g in listed}
            groups[""] = ("v1", ("v1",))  # the core group, served at /api/v1
            self._groups = groups
        return self._groups

    def resources(self, group: str, version: str) -> dict[str, ServedResource]:
        key = (group, version)
        if key not in self._resources:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                listed = _RESOURCES.decode(self.client.get(path)).resources
            except ApiError as exc:
                if exc.status != HTTP_NOT_FOUND:
                    raise
                listed = []
            except msgspec.DecodeError as exc:
                raise ApiError(path, 200, f"not an APIResourceList: {exc}") from None
            self._resources[key] = {
                r.name: ServedResource(group, version, r.name, r.kind, r.namespaced, frozenset(r.verbs))
                for r in listed if "/" not in r.name
            }
        return self._resources[key]

    def find(self, group: str, resource: str, versions: Sequence[str]) -> ServedResource | None:
        """The resource in the group's preferred version when gpuguard reads it, else in the first
        version of ``versions`` the cluster serves; None when the cluster does not serve it."""
        served = self.groups().get(group)
        if served is None:
            return None
        preferred, available = served
        order = ([preferred] if preferred in versions else []) + [v for v in versions if v in available]
        for version in dict.fromkeys(order):
            found = self.resources(group, version).get(resource)
            if found is not None:
                return found
        return None


def list_pages(client: RestClient, path: str, *, field_selector: str | None = None,
               page_size: int = PAGE_SIZE) -> Iterator[list[msgspec.Raw]]:
    """Every page of one list, as raw items; an expired continue token restarts the list (items may
    repeat), at most MAX_RESTARTS times."""
    for _attempt in range(MAX_RESTARTS + 1):
        token: str | None = None
        try:
            while True:
                query: list[tuple[str, Any]] = [("limit", page_size)]
                if field_selector:
                    query.append(("fieldSelector", field_selector))
                if token:
                    query.append(("continue", token))
                try:
                    page = PAGE.decode(client.get(path, query))
                except msgspec.DecodeError as exc:
                    raise ApiError(path, 200, f"not a list: {exc}") from None
                yield page.items or []
                token = page.metadata.get("continue") or None
                if not token:
                    return
        except ApiError as exc:
            if exc.status == HTTP_GONE and token:
                continue
            raise
    raise ApiError(path, HTTP_GONE, "the continue token kept expiring (HTTP 410)")
