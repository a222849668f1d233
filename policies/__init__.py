"""gpuguard policy engine: pure functions over plain Kubernetes objects (dicts).

Nothing in this package performs I/O or imports web, YAML or Kubernetes-client libraries.  A
``Config`` is read from a config document by ``gpuguard.sources.configmodel.load_config``.
"""

from policies.config import Config, ConfigError
from policies.engine import Evaluation, evaluate
from policies.facts import ClusterFacts
from policies.types import Finding, PatchOp, Severity

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
