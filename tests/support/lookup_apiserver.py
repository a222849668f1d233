"""An in-process API server that answers what ``helm template --dry-run=server`` asks for Helm's
``lookup``: the version, API discovery, and GET of Secrets.

Helm (v4) asks ``/version``, ``/api``, ``/apis`` and the group versions (discovery: lookup maps the
kind Secret to its resource, and the rendered objects are mapped to theirs) and then
``/api/v1/namespaces/NS/secrets/NAME``; a missing object is a 404 with a ``Status`` body, as the
API server answers, and lookup renders it as an empty map. Every request path is recorded. Render
with ``--disable-openapi-validation`` (no OpenAPI documents here).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.support.http_replies import reply_json

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
# (group, version) -> [(resource, kind, namespaced)]: the kinds the chart renders.
DISCOVERY: dict[tuple[str, str], list[tuple[str, str, bool]]] = {
    ("", "v1"): [("secrets", "Secret", True), ("configmaps", "ConfigMap", True), ("services", "Service", True),
                 ("serviceaccounts", "ServiceAccount", True), ("resourcequotas", "ResourceQuota", True),
                 ("namespaces", "Namespace", False)],
    ("apps", "v1"): [("deployments", "Deployment", True)],
    ("policy", "v1"): [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    ("rbac.authorization.k8s.io", "v1"): [("clusterroles", "ClusterRole", False),
                                          ("clusterrolebindings", "ClusterRoleBinding", False)],
    ("admissionregistration.k8s.io", "v1"): [
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False)],
    ("networking.k8s.io", "v1"): [("networkpolicies", "NetworkPolicy", True)],
}


def _resource_list(group: str, version: str) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [
            {"name": r, "singularName": k.lower(), "namespaced": ns, "kind": k, "verbs": VERBS}
            for r, k, ns in DISCOVERY[(group, version)]
        ],
    }


def _group_list() -> dict[str, Any]:
    groups = []
    for group, version in DISCOVERY:
        if group:
            gv = {"groupVersion": f"{group}/{version}", "version": version}
            groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


class LookupApiServer:
    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()

    def put_secret(self, secret: dict[str, Any]) -> None:
        meta = secret["metadata"]
        with self._lock:
            self.secrets[(meta["namespace"], meta["name"])] = secret

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(path)
        if path == "/version":
            return 200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return 200, _group_list()
        parts = path.strip("/").split("/")
        if parts == ["api", "v1"]:
            return 200, _resource_list("", "v1")
        if len(parts) == 3 and parts[0] == "apis" and (parts[1], parts[2]) in DISCOVERY:
            return 200, _resource_list(parts[1], parts[2])
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "secrets":
            with self._lock:
                secret = self.secrets.get((parts[3], parts[5]))
            if secret is not None:
                return 200, secret
            return 404, _status(404, "NotFound", f'secrets "{parts[5]}" not found')
        return 404, _status(404, "NotFound", "the server could not find the requested resource")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _handler(api: LookupApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            reply_json(self, *api.answer(urlsplit(self.path).path))

    return Handler


@contextlib.contextmanager
def serving(api: LookupApiServer) -> Iterator[str]:
    """Serve ``api`` on a loopback port; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
