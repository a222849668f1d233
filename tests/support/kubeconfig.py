"""A kubeconfig for the in-process API servers the tests run."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_kubeconfig(path: Path, server: str, token: str | None = None) -> Path:
    """One cluster at ``server``, one user (with a bearer ``token`` if given), one current context."""
    user: dict[str, str] = {"token": token} if token is not None else {}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "users": [{"name": "test", "user": user}],
    }))
    path.chmod(0o600)
    return path
