"""Which parts of the cluster facts a memoised computation read.

A new snapshot of live facts keeps the memo entries of the previous one whose inputs did not
change (``ClusterFacts`` carries one token per aspect, and an aspect that changed gets a new
token).  For that to be sound, every entry must know exactly which aspects it read: the facts'
accessors call :func:`note` and ``ClusterFacts.memoised`` runs each computation inside
:func:`recording`, adding what an inner memo hit had read to the enclosing computation.  Nothing
can read an aspect without going through an accessor: node groups, nodes and DRA objects are only
reachable from them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

NODES = "nodes"  # nodes and their groups, and what they tell (ExtendedResourceToleration)
POOLS = "pools"  # capacity that can appear (Karpenter NodePools, declared pools)
RUNTIME_CLASSES = "runtime-classes"
DRA_DEVICES = "dra-devices"  # DeviceClasses and ResourceSlices, and what is derived from them
DRA_CLAIMS = "dra-claims"  # ResourceClaims: allocations, devices in use
DRA_TEMPLATES = "dra-templates"  # ResourceClaimTemplates
QUOTAS = "quotas"  # namespace ResourceQuotas (their spec)
QUEUES = "queues"  # Kueue LocalQueues, ClusterQueues, ResourceFlavors, Cohorts (their spec)
KSERVE = "kserve"  # KServe ServingRuntimes, ClusterServingRuntimes, LLMInferenceServiceConfigs
ASPECTS = (NODES, POOLS, RUNTIME_CLASSES, DRA_DEVICES, DRA_CLAIMS, DRA_TEMPLATES, QUOTAS, QUEUES, KSERVE)
DRA_ASPECTS = frozenset({DRA_DEVICES, DRA_CLAIMS, DRA_TEMPLATES})


class _Stack(threading.local):
    def __init__(self) -> None:
        self.frames: list[set[str]] = []


_STACK = _Stack()


def note(aspect: str) -> None:
    """Record that the running computation read ``aspect`` (nothing when none is recording)."""
    frames = _STACK.frames
    if frames:
        frames[-1].add(aspect)


def note_all(aspects: frozenset[str]) -> None:
    frames = _STACK.frames
    if frames:
        frames[-1].update(aspects)


@contextmanager
def recording() -> Iterator[set[str]]:
    """Collect the aspects read inside the block; they count for the enclosing block too."""
    frames = _STACK.frames
    reads: set[str] = set()
    frames.append(reads)
    try:
        yield reads
    finally:
        frames.pop()
        if frames:
            frames[-1].update(reads)
