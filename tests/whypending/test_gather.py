"""Where the pods' namespace comes from, and input order not mattering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.pending.state import ClusterObjects
from whypending import gather


def test_in_cluster_namespace_is_the_service_accounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mounted = tmp_path / "namespace"
    monkeypatch.setattr(gather, "SERVICE_ACCOUNT_NAMESPACE", mounted)
    assert gather.context_namespace(None, in_cluster=True) == "default"  # not mounted
    mounted.write_text("ml-platform\n")
    assert gather.context_namespace(None, in_cluster=True) == "ml-platform"


def test_kubeconfig_namespace(tmp_path: Path) -> None:
    config = tmp_path / "config"
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "current-context": "b",
           "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
           "users": [{"name": "u", "user": {}}],
           "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u", "namespace": "x"}},
                        {"name": "b", "context": {"cluster": "c", "user": "u", "namespace": "research"}}]}
    config.write_text(yaml.safe_dump(doc))
    assert gather.context_namespace(str(config), in_cluster=False) == "research"
    del doc["contexts"][1]["context"]["namespace"]
    config.write_text(yaml.safe_dump(doc))
    assert gather.context_namespace(str(config), in_cluster=False) == "default"
    assert gather.context_namespace(str(tmp_path / "missing"), in_cluster=False) == "default"


def test_objects_are_put_in_name_order() -> None:
    objects = ClusterObjects()
    for name in ("b", "a", "c"):
        objects.add({"kind": "Node", "metadata": {"name": name}})
    for ns, name in (("z", "a"), ("a", "z"), ("a", "b")):
        objects.add({"kind": "Pod", "metadata": {"namespace": ns, "name": name}})
    objects.add({"kind": "Pod", "metadata": "broken"})
    gather.in_name_order(objects)
    assert [n["metadata"]["name"] for n in objects.nodes] == ["a", "b", "c"]
    assert [(p["metadata"] if isinstance(p["metadata"], str) else p["metadata"]["name"]) for p in objects.pods] == [
        "broken", "b", "z", "a"]
