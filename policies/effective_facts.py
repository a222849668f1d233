"""Cluster facts as the rules see them: the snapshot plus what the config says about the cluster.

The config may declare node pools the cluster API does not describe (``nodePools``) and whether
the API server runs the ExtendedResourceToleration admission plugin.  Both are part of the facts,
so every facts rule sees them the same way.  DRA-served extended resources count as
node capacity (policies.dra.capacity).  Without cluster facts nothing is added: declared
pools alone are not a cluster, and judging pods against them would report every other node as
missing.
"""

from __future__ import annotations

from policies.config import Config
from policies.dra.capacity import with_dra_capacity
from policies.facts import ClusterFacts
from policies.memo import EffectiveFactsKey
from policies.reads import NODES, POOLS

_MARK = "_effective_for"


def effective_facts(facts: ClusterFacts, config: Config) -> ClusterFacts:
    """``facts`` with DRA-served extended resources (policies.dra.capacity), ``config.node_pools`` and
    ``config.extended_resource_toleration`` applied (memoised)."""
    if facts.is_empty or getattr(facts, _MARK, None) is config:
        return facts
    served = with_dra_capacity(facts)
    if not config.node_pools and config.extended_resource_toleration is None:
        return served

    key = EffectiveFactsKey(id(config))

    def build() -> ClusterFacts:
        ert = served.extended_resource_toleration
        if config.extended_resource_toleration is not None:
            ert = config.extended_resource_toleration
        # The same nodes (and so their groups); the config's pools and its word on the cluster added.
        tokens = served.derived_tokens(("effective", config), {NODES: (NODES,), POOLS: (POOLS,)})
        merged = ClusterFacts(
            nodes=served.nodes,
            runtime_classes=served.runtime_classes,
            source=served.source,
            pools=(*served.pools, *config.node_pools),
            extended_resource_toleration=ert,
            dra=served.dra,
            groups=served.node_groups,
            tokens=tokens,
            basis=facts.previous_value(key, config, pinned=True),
            quotas=served.quotas,
            queues=served.queues,
            kserve=served.kserve,
        )
        object.__setattr__(merged, _MARK, config)
        return merged

    return facts.memoised(key, build, owner=config, pinned=True)
