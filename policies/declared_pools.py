"""Config ``nodePools:``: node pools the cluster API does not describe, as capacity that can appear.

GKE node pools and Cluster Autoscaler node groups scaled to zero have no Node object to read and
no Karpenter NodePool either; their nodes' labels, taints and GPU resources are declared instead::

    nodePools:
      - name: a100-spot
        labels: {cloud.google.com/gke-accelerator: nvidia-tesla-a100}
        taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
        resources: {nvidia.com/gpu: 8}
        gpuProduct: NVIDIA-A100-SXM4-40GB   # optional: the GFD nvidia.com/gpu.product label
        driverVersion: "550.90.07"          # optional: the GFD nvidia.com/cuda.driver-version.* labels
        maxNodes: 4                         # optional: the most nodes the pool can have

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
from typing import Any

from policies.facts import (
    LABEL_DRIVER_FULL,
    LABEL_DRIVER_NEW,
    LABEL_PRODUCT,
    NodeFacts,
    PoolTraits,
    Taint,
)
from policies.quantity import try_parse

ORIGIN = "node pool"
POOL_KEYS = ("name", "labels", "taints", "resources", "gpuProduct", "driverVersion", "maxNodes")
TAINT_KEYS = ("key", "value", "effect")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
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


class PoolConfigError(ValueError):
    """A problem in ``nodePools``; the message names the offending key."""


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise PoolConfigError(f"{key}: expected a non-empty string, got {type(value).__name__}")
    return value


def _mapping(value: Any, key: str) -> Mapping[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PoolConfigError(f"{key}: expected a mapping, got {type(value).__name__}")
    return value


def _labels(raw: Any, key: str) -> dict[str, str]:
    out = {}
    for k, v in _mapping(raw, key).items():
        if not isinstance(k, str) or isinstance(v, Mapping | list) or v is None:
            raise PoolConfigError(f"{key}.{k}: expected a label value (string)")
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def _taints(raw: Any, key: str) -> tuple[Taint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PoolConfigError(f"{key}: expected a list of taints, got {type(raw).__name__}")
    taints = []
    for i, item in enumerate(raw):
        at = f"{key}[{i}]"
        entry = _mapping(item, at)
        for k in entry:
            if k not in TAINT_KEYS:
                raise PoolConfigError(f"{at}.{k}: unknown key (expected {', '.join(TAINT_KEYS)})")
        effect = entry.get("effect")
        if effect not in TAINT_EFFECTS:
            raise PoolConfigError(f"{at}.effect: expected one of {', '.join(TAINT_EFFECTS)}, got {effect!r}")
        value = entry.get("value")
        taints.append(Taint(_string(entry.get("key"), f"{at}.key"), "" if value is None else str(value), effect))
    return tuple(taints)


def _resources(raw: Any, key: str) -> dict[str, Fraction]:
    out = {}
    for name, quantity in _mapping(raw, key).items():
        parsed = try_parse(quantity)
        if not isinstance(name, str) or parsed is None or parsed < 0:
            raise PoolConfigError(f"{key}.{name}: expected a non-negative quantity, got {quantity!r}")
        out[name] = parsed
    return out


def _driver_labels(text: str, key: str) -> dict[str, str]:
    parts = text.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        raise PoolConfigError(f"{key}: expected a driver version like 550.90.07, got {text!r}")
    labels = {LABEL_DRIVER_FULL: text}
    labels.update(zip(LABEL_DRIVER_NEW, parts, strict=False))
    return labels


def _max_nodes(raw: Any, key: str) -> int | None:
    if raw is None:
        return None
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise PoolConfigError(f"{key}: expected a non-negative whole number of nodes, got {raw!r}")
    return raw


def parse_node_pools(raw: Any) -> tuple[NodeFacts, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PoolConfigError(f"nodePools: expected a list, got {type(raw).__name__}")
    pools: list[NodeFacts] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        at = f"nodePools[{i}]"
        entry = _mapping(item, at)
        for k in entry:
            if k not in POOL_KEYS:
                raise PoolConfigError(f"{at}.{k}: unknown key (expected {', '.join(POOL_KEYS)})")
        name = _string(entry.get("name"), f"{at}.name")
        if name in seen:
            raise PoolConfigError(f"{at}.name: {name!r} is declared twice")
        seen.add(name)
        labels = _labels(entry.get("labels"), f"{at}.labels")
        if "gpuProduct" in entry:
            labels[LABEL_PRODUCT] = _string(entry["gpuProduct"], f"{at}.gpuProduct")
        if "driverVersion" in entry:
            # A string: YAML reads an unquoted 550.90 as the number 550.9.
            driver = _string(entry["driverVersion"], f"{at}.driverVersion (quote it)")
            labels.update(_driver_labels(driver, f"{at}.driverVersion"))
        max_nodes = _max_nodes(entry.get("maxNodes"), f"{at}.maxNodes")
        pools.append(
            NodeFacts(
                name=name,
                labels=labels,
                taints=_taints(entry.get("taints"), f"{at}.taints"),
                allocatable=_resources(entry.get("resources"), f"{at}.resources"),
                pool=PoolTraits(origin=ORIGIN, open_keys=NODE_WELL_KNOWN, max_nodes=max_nodes,
                                size_known=max_nodes is not None),
            )
        )
    return tuple(pools)
