"""``--format policyreport`` / ``openreports``: a YAML ``List`` of one report per namespace and a cluster report.

``kubectl apply -f`` takes it as is (the report CRDs must be installed: Kyverno and Policy Reporter
install wgpolicyk8s.io; see deploy/audit).  With ``--cluster-after`` the reports describe the planned
cluster, and each result says its change.
"""

from __future__ import annotations

from typing import TextIO

import yaml

from gpuguard.audit.model import AuditResult
from gpuguard.audit.policyreport import Flavour, build_reports


def render_as(result: AuditResult, stream: TextIO, flavour: Flavour) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": build_reports(result, flavour)}
    yaml.safe_dump(listed, stream, sort_keys=False, allow_unicode=True, width=120)


def render_policyreport(result: AuditResult, stream: TextIO) -> None:
    render_as(result, stream, "policyreport")


def render_openreports(result: AuditResult, stream: TextIO) -> None:
    render_as(result, stream, "openreports")
