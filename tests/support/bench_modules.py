"""The benchmark scripts of bench/ as modules (they are scripts that import each other by bare name,
not a package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import ROOT


def bench_module(name: str) -> ModuleType:
    """``bench/NAME.py``, loaded once under its bare name, as the benchmarks import it."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
