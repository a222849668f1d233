"""Create or update the audit's reports through the API (``gpuguard serve --audit-interval``).

A report is written only when its results change: a result that was there before keeps its
timestamp (so a timestamp says since when a problem is known), and an identical report is left
alone, so several replicas auditing the same cluster write each change once.  Reports gpuguard
made earlier (label ``app.kubernetes.io/managed-by: gpuguard``) in namespaces that no longer have
GPU workloads are emptied, not deleted.  Writes use optimistic concurrency (the current
``resourceVersion``); a conflict is retried once with a fresh read.

RBAC: ``get``, ``list``, ``create`` and ``update`` on the report resources (deploy/audit).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuguard.audit.policyreport import APIS, MANAGED_BY, REPORT_NAME, Flavour, ReportApi, empty_report
from gpuguard.kube.status import HTTP_CONFLICT, HTTP_NOT_FOUND, status_of

TIMEOUT = (10.0, 60.0)
SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())


@dataclass(slots=True)
class Published:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    emptied: int = 0
    errors: list[str] = field(default_factory=list)



def _result_key(result: dict[str, Any]) -> tuple[Any, ...]:
    resource = (result.get("resources") or [{}])[0]
    props = result.get("properties") or {}
    return (result.get("rule"), result.get("result"), resource.get("uid") or resource.get("name"),
            resource.get("kind"), props.get("path"), result.get("message"))


def _keep_timestamps(new: dict[str, Any], old: dict[str, Any]) -> None:
    known = {_result_key(r): r.get("timestamp") for r in old.get("results") or []}
    for r in new.get("results") or []:
        stamp = known.get(_result_key(r))
        if stamp is not None:
            r["timestamp"] = stamp


def _same(new: dict[str, Any], old: dict[str, Any]) -> bool:
    def annotations(report: dict[str, Any]) -> Any:
        return (report.get("metadata") or {}).get("annotations") or {}

    return (new.get("results") or []) == (old.get("results") or []) and new.get("summary") == old.get(
        "summary") and annotations(new) == {k: v for k, v in annotations(old).items() if k.startswith("gpuguard.io/")}


class Publisher:
    def __init__(self, api_client: Any, flavour: Flavour = "policyreport") -> None:
        import kubernetes.client

        self.api: ReportApi = APIS[flavour]
        self.flavour = flavour
        self.custom: Any = kubernetes.client.CustomObjectsApi(api_client)

    def _get(self, namespace: str) -> dict[str, Any] | None:
        api = self.api
        try:
            if namespace:
                found = self.custom.get_namespaced_custom_object(api.group, api.version, namespace, api.plural,
                                                                 REPORT_NAME, _request_timeout=TIMEOUT)
            else:
                found = self.custom.get_cluster_custom_object(api.group, api.version, api.cluster_plural,
                                                              REPORT_NAME, _request_timeout=TIMEOUT)
        except Exception as exc:
            if status_of(exc) == HTTP_NOT_FOUND:
                return None
            raise
        return found if isinstance(found, dict) else None

    def _create(self, report: dict[str, Any], namespace: str) -> None:
        api = self.api
        if namespace:
            self.custom.create_namespaced_custom_object(api.group, api.version, namespace, api.plural, report,
                                                        _request_timeout=TIMEOUT)
        else:
            self.custom.create_cluster_custom_object(api.group, api.version, api.cluster_plural, report,
                                                     _request_timeout=TIMEOUT)

    def _replace(self, report: dict[str, Any], namespace: str) -> None:
        api = self.api
        if namespace:
            self.custom.replace_namespaced_custom_object(api.group, api.version, namespace, api.plural, REPORT_NAME,
                                                         report, _request_timeout=TIMEOUT)
        else:
            self.custom.replace_cluster_custom_object(api.group, api.version, api.cluster_plural, REPORT_NAME,
                                                      report, _request_timeout=TIMEOUT)

    def existing_namespaces(self) -> set[str]:
        """Namespaces holding a report gpuguard made."""
        api = self.api
        listed = self.custom.list_cluster_custom_object(api.group, api.version, api.plural, label_selector=SELECTOR,
                                                        _request_timeout=TIMEOUT)
        items = listed.get("items") if isinstance(listed, dict) else None
        return {
            str(item["metadata"]["namespace"])
            for item in items or []
            if isinstance(item, dict) and (item.get("metadata") or {}).get("name") == REPORT_NAME
            and (item.get("metadata") or {}).get("namespace")
        }

    def apply(self, report: dict[str, Any]) -> str:
        """created | updated | unchanged."""
        namespace = str(report["metadata"].get("namespace") or "")
        for attempt in range(2):
            current = self._get(namespace)
            if current is None:
                self._create(report, namespace)
                return "created"
            body = copy.deepcopy(report)
            _keep_timestamps(body, current)
            if _same(body, current):
                return "unchanged"
            body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
            try:
                self._replace(body, namespace)
            except Exception as exc:
                if status_of(exc) == HTTP_CONFLICT and attempt == 0:
                    continue
                raise
            return "updated"
        raise AssertionError("unreachable")

    def publish(self, reports: Sequence[dict[str, Any]]) -> Published:
        out = Published()
        wanted = {str(r["metadata"].get("namespace") or "") for r in reports}
        pending = list(reports)
        try:
            stale = sorted(self.existing_namespaces() - wanted)
        except Exception as exc:
            out.errors.append(f"cannot list existing {self.api.plural}: {_describe(exc)}")
            stale = []
        pending.extend(empty_report(self.flavour, namespace) for namespace in stale)
        for report in pending:
            meta = report["metadata"]
            where = f"{meta.get('namespace')}/{meta['name']}" if meta.get("namespace") else meta["name"]
            try:
                outcome = self.apply(report)
            except Exception as exc:
                out.errors.append(f"{report['kind']} {where}: {_describe(exc)}")
                continue
            if outcome == "created":
                out.created += 1
            elif outcome == "updated":
                if meta.get("namespace") in stale:
                    out.emptied += 1
                else:
                    out.updated += 1
            else:
                out.unchanged += 1
        return out


def _describe(exc: BaseException) -> str:
    status = status_of(exc)
    if status == HTTP_NOT_FOUND:
        return "HTTP 404: the report CRD is not installed (see deploy/audit)"
    reason = getattr(exc, "reason", None)
    text = f"HTTP {status}: {reason}" if status else str(reason or exc or type(exc).__name__)
    return text.splitlines()[0][:300] if text else type(exc).__name__
