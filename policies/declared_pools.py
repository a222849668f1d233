"""Config ``nodePools:``: node pools the cluster API does not describe, as capacity that can appear.

GKE node pools and Cluster Autoscaler node groups scaled to zero have no Node object to read and
no Karpenter NodePool either; their nodes' labels, taints and GPU resources are declared instead
(the keys of a ``nodePools`` entry are declared by the config model, ``gpuguard.sources.configmodel``).

Without ``maxNodes`` the pool's size is unknown: a gang that needs more of it than its existing
nodes gets a warning, not an error (policies.gangfit).

A declared pool's nodes carry exactly the declared labels, plus the well-known labels the kubelet
and the cloud provider set on every node (kubernetes.io "Well-Known Labels, Annotations and
Taints": ``kubernetes.io/arch``, ``kubernetes.io/os``, ``node.kubernetes.io/instance-type``,
``topology.kubernetes.io/zone``/``region``), whose values are not known in advance.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from policies.facts import (
    LABEL_DRIVER_FULL,
    LABEL_DRIVER_NEW,
    LABEL_PRODUCT,
    NodeFacts,
    PoolTraits,
    Taint,
)

ORIGIN = "node pool"
NODE_WELL_KNOWN = frozenset(
    {
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)


def driver_labels(text: str) -> dict[str, str]:
    """The GFD driver-version labels of a driver version such as ``550.90.07``; ValueError if it is none."""
    parts = text.split(".")
    if len(parts) < 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"expected a driver version like 550.90.07, got {text!r}")
    labels = {LABEL_DRIVER_FULL: text}
    labels.update(zip(LABEL_DRIVER_NEW, parts, strict=False))
    return labels


def declared_pool(
    name: str,
    labels: Mapping[str, str],
    taints: tuple[Taint, ...],
    resources: Mapping[str, Fraction],
    gpu_product: str | None = None,
    driver_version: str | None = None,
    max_nodes: int | None = None,
) -> NodeFacts:
    """A declared pool as the node it would add: its labels (with the GPU product and driver
    labels GFD would set), taints and allocatable resources; the well-known labels stay open.
    ``max_nodes`` (config ``maxNodes``): the most nodes the pool can have; None means unknown."""
    all_labels = dict(labels)
    if gpu_product is not None:
        all_labels[LABEL_PRODUCT] = gpu_product
    if driver_version is not None:
        all_labels.update(driver_labels(driver_version))
    return NodeFacts(
        name=name,
        labels=all_labels,
        taints=taints,
        allocatable=dict(resources),
        pool=PoolTraits(origin=ORIGIN, open_keys=NODE_WELL_KNOWN, max_nodes=max_nodes,
                        size_known=max_nodes is not None),
    )
