"""gpuguard policy engine: pure functions over plain Kubernetes objects (dicts).

Nothing in this package performs I/O or imports web, YAML or Kubernetes-client libraries.  A
``Config`` is read from a config document by ``gpuguard.sources.configmodel.load_config``.

The names below are loaded on first use (PEP 562): importing one small module of the engine
(``policies.wording``, ``policies.pointer``) does not build the rule registry, which costs a quarter
of a second that ``gpuguard certs`` or ``--help`` never needs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.config import Config, ConfigError
    from policies.engine import Evaluation, evaluate
    from policies.facts import ClusterFacts
    from policies.types import Finding, PatchOp, Severity

_WHERE = {
    "Config": "policies.config", "ConfigError": "policies.config",
    "Evaluation": "policies.engine", "evaluate": "policies.engine",
    "ClusterFacts": "policies.facts",
    "Finding": "policies.types", "PatchOp": "policies.types", "Severity": "policies.types",
}

__all__ = [
    "ClusterFacts",
    "Config",
    "ConfigError",
    "Evaluation",
    "Finding",
    "PatchOp",
    "Severity",
    "evaluate",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'policies' has no attribute {name!r}")
    return getattr(import_module(module), name)
