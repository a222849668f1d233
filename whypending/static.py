"""The engine's own findings for each pod to explain, judged against the same cluster facts.

The facts are the nodes, RuntimeClasses and DRA objects the analysis read (the very NodeFacts objects
and DraFacts of :class:`~policies.pending.state.ClusterState`) plus Karpenter NodePools, capacity that
can appear;
``policies.engine.evaluate`` adds the config's declared ``nodePools`` itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policies.config import Config
from policies.engine import evaluate
from policies.facts import ClusterFacts
from policies.karpenter import nodepool_from_object
from policies.pending.objects import PodInfo
from policies.pending.state import ClusterState


def engine_facts(state: ClusterState, nodepools: Iterable[Mapping[str, Any]], source: str) -> ClusterFacts:
    pools = tuple(p for p in map(nodepool_from_object, nodepools) if p is not None)
    facts = state.facts
    return ClusterFacts(nodes=facts.nodes, runtime_classes=facts.runtime_classes, source=source, pools=pools,
                        dra=facts.dra)


def finding_lines(obj: Mapping[str, Any], config: Config, facts: ClusterFacts) -> list[str]:
    """``"<severity> <rule>: <message>"`` for each finding, most severe first."""
    pod = dict(obj)
    # Items of an API list carry no TypeMeta (gpuguard.kube.live sets only the kind); a Pod is core v1
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    evaluation = evaluate(pod, config, facts)
    findings = sorted(evaluation.findings, key=lambda f: (-int(f.severity), f.rule, f.path))
    return [f"{f.severity} {f.rule}: {f.message}" for f in findings]


def static_findings(pods: Iterable[PodInfo], config: Config, facts: ClusterFacts) -> dict[str, list[str]]:
    """``namespace/name`` -> finding lines, for pods that are not gated (a gate is the whole story)."""
    return {pod.key: finding_lines(pod.obj, config, facts) for pod in pods if not pod.gated}
