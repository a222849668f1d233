""".ci/audit_fixtures.py writes exactly the audit fixtures the tests read, and they are valid objects."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import FIXTURES, ROOT

_spec = importlib.util.spec_from_file_location("audit_fixtures", ROOT / ".ci" / "audit_fixtures.py")
assert _spec is not None and _spec.loader is not None
audit_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit_fixtures)


def test_the_fixtures_are_the_generators_output(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(audit_fixtures, "OUT", tmp_path)
    assert audit_fixtures.main() == 0
    for name in ("cluster-before.yaml", "cluster-after.yaml", "workloads.yaml"):
        assert (tmp_path / name).read_text() == (FIXTURES / "audit" / name).read_text(), \
            f"run: .venv/bin/python .ci/audit_fixtures.py ({name} is stale)"


def test_the_fixtures_are_valid_kubernetes_objects() -> None:
    import kubernetes_validate

    for name in ("cluster-before.yaml", "cluster-after.yaml", "workloads.yaml"):
        for obj in yaml.safe_load((FIXTURES / "audit" / name).read_text())["items"]:
            if obj["kind"] == "PyTorchJob":
                continue  # a CRD: kubernetes-validate knows only built-in kinds
            kubernetes_validate.validate(obj, "1.33.0", strict=True)
