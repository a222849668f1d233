"""Parameter sweeps whose every case is costly: a few stay in the quick subset, the rest are
marked ``slow`` (the full suite runs them all)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest


def sweep(values: Iterable[Any], quick: Iterable[Any]) -> list[Any]:
    """``values`` as pytest params, each not in ``quick`` marked slow; ``quick`` must be among them."""
    values, keep = list(values), set(quick)
    missing = keep - set(values)
    assert not missing, f"quick cases not in the sweep: {sorted(map(str, missing))}"
    return [v if v in keep else pytest.param(v, marks=pytest.mark.slow) for v in values]
