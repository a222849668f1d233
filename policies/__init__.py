"""gpuguard policy engine: pure functions over plain Kubernetes objects (dicts).

Nothing in this package performs I/O or imports web, YAML or Kubernetes-client libraries.
"""

from policies.config import Config, ConfigError, load_config
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
    "load_config",
]
