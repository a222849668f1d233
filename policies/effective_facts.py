"""Cluster facts as the rules see them: the snapshot plus what the config says about the cluster.

The config may declare node pools the cluster API does not describe (``nodePools``) and whether
the API server runs the ExtendedResourceToleration admission plugin.  Both are part of the facts,
so every facts rule sees them the same way.  Without cluster facts nothing is added: declared
pools alone are not a cluster, and judging pods against them would report every other node as
missing.
"""

from __future__ import annotations

from policies.config import Config
from policies.facts import ClusterFacts

_MARK = "_effective_for"


def effective_facts(facts: ClusterFacts, config: Config) -> ClusterFacts:
    """``facts`` with ``config.node_pools`` and ``config.extended_resource_toleration`` applied (memoised)."""
    if facts.is_empty or getattr(facts, _MARK, None) is config:
        return facts
    if not config.node_pools and config.extended_resource_toleration is None:
        return facts

    def build() -> ClusterFacts:
        ert = facts.extended_resource_toleration
        if config.extended_resource_toleration is not None:
            ert = config.extended_resource_toleration
        merged = ClusterFacts(
            nodes=facts.nodes,
            runtime_classes=facts.runtime_classes,
            source=facts.source,
            pools=(*facts.pools, *config.node_pools),
            extended_resource_toleration=ert,
        )
        object.__setattr__(merged, _MARK, config)
        return merged

    return facts.memoised(("effective-facts", id(config)), build, owner=config)
