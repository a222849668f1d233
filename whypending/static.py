"""The engine's own findings for each pod to explain, judged against the same cluster facts.

The facts are the nodes, RuntimeClasses and DRA objects the analysis read (the very NodeFacts objects
and DraFacts of :class:`~policies.pending.state.ClusterState`) plus Karpenter NodePools, capacity that
can appear;
``policies.engine.evaluate`` adds the config's declared ``nodePools`` itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.config import Config
from policies.engine import Evaluation, evaluate
from policies.facts import ClusterFacts
from policies.karpenter import nodepool_from_object
from policies.pending.objects import PodInfo
from policies.pending.state import ClusterState


def engine_facts(state: ClusterState, nodepools: Iterable[Mapping[str, Any]], source: str) -> ClusterFacts:
    pools = tuple(p for p in map(nodepool_from_object, nodepools) if p is not None)
    facts = state.facts
    return ClusterFacts(nodes=facts.nodes, runtime_classes=facts.runtime_classes, source=source, pools=pools,
                        dra=facts.dra)


@dataclass(slots=True)
class Static:
    """The engine's findings per pod, and what it says of their gpuguard.io/ignore annotations."""

    findings: dict[str, list[str]] = field(default_factory=dict)  # namespace/name -> finding lines
    notes: list[str] = field(default_factory=list)  # "namespace/name: <names no rule…>"


def _evaluate(obj: Mapping[str, Any], config: Config, facts: ClusterFacts) -> Evaluation:
    pod = dict(obj)
    # Items of an API list carry no TypeMeta (gpuguard.kube.live sets only the kind); a Pod is core v1
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    return evaluate(pod, config, facts)


def _lines(evaluation: Evaluation) -> list[str]:
    findings = sorted(evaluation.findings, key=lambda f: (-int(f.severity), f.rule, f.path))
    return [f"{f.severity} {f.rule}: {f.message}" for f in findings]


def finding_lines(obj: Mapping[str, Any], config: Config, facts: ClusterFacts) -> list[str]:
    """``"<severity> <rule>: <message>"`` for each finding, most severe first."""
    return _lines(_evaluate(obj, config, facts))


def static_findings(pods: Iterable[PodInfo], config: Config, facts: ClusterFacts) -> Static:
    """Finding lines of the pods that are not gated (a gate is the whole story), and a note for each
    gpuguard.io/ignore naming no rule (the rule it meant was not skipped)."""
    out = Static()
    for pod in pods:
        if pod.gated:
            continue
        evaluation = _evaluate(pod.obj, config, facts)
        out.findings[pod.key] = _lines(evaluation)
        out.notes += [f"{pod.key}: {message}" for message in (u.unknown_message() for u in evaluation.ignore_uses)
                      if message is not None]
    return out
