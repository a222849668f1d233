"""Warm, shared facts judge every object as fresh facts do: no memo hands one object another's answer.

The engine memoises per facts snapshot (scheduling analyses, rule results per pod template, image
pairs, derived facts), and live facts pass memo entries on to the snapshot that follows.  A key
that leaves out something a rule reads gives a stale answer only when two objects meet on one warm
snapshot — which the rule fixtures alone never do (each builds fresh facts).  So here every rule
fixture (bad, good and fixed documents, with the rule's config, cluster and image facts), every
document of the public corpus (every folder of tests/corpus) and the webhook benchmarks' generated
streams (distinct reviews and controller replicas, bench/distinct_reviews.py, on a heterogeneous
60-node fleet from bench/fleet.py) is judged:

* fresh: on facts built for that document alone;
* warm: all documents of a group on one shared snapshot, in three random orders;
* following: on snapshots that follow the warm one (``ClusterFacts(basis=…)``, as live facts
  build them) with every aspect unchanged, then with each aspect's token renewed in turn;
* siblings: each document next to copies that differ only in name, namespace, a label, or a
  ``gpuguard.io/`` annotation, judged right after the original on the warm snapshot.

Findings (every field), skipped rules, placeholders, ignore-annotation uses and the combined
patch must be identical.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.config import Config
from policies.engine import Evaluation
from policies.facts_build import facts_from_objects
from policies.images import ImageFacts
from policies.plaincopy import plain_copy
from policies.reads import ASPECTS
from tests.policies.rules.test_rule_fixtures import _images
from tests.support.bench_modules import bench_module
from tests.support.evaluation_text import evaluation_lines
from tests.support.paths import CORPUS, EXAMPLES, FIXTURES

RULE_FIXTURES = FIXTURES / "rules"
SEEDS = (1, 2, 3)


def canonical(ev: Evaluation) -> str:
    return "\n".join(evaluation_lines(ev))


@dataclass
class Group:
    name: str
    config: Config
    cluster: list[dict[str, Any]]
    images: ImageFacts | None
    documents: list[Any]

    def fresh(self) -> ClusterFacts:
        return facts_from_objects(plain_copy(self.cluster))

    def judge(self, doc: Any, facts: ClusterFacts) -> str:
        return canonical(evaluate(plain_copy(doc), self.config, facts, self.images))


def _documents(path: Path) -> list[Any]:
    return [d for d in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if isinstance(d, Mapping)]


def _cluster(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if d is not None]


@functools.cache
def _example() -> list[dict[str, Any]]:
    return _cluster(EXAMPLES / "cluster.yaml")


def _rule_group(rule_dir: Path) -> Group:
    config_file, cluster_file = rule_dir / "config.yaml", rule_dir / "cluster.yaml"
    config = load_config(yaml.safe_load(config_file.read_text())) if config_file.exists() else Config()
    cluster = _cluster(cluster_file) if cluster_file.exists() else _example()
    docs = [d for n in ("bad.yaml", "good.yaml", "fixed.yaml") if (rule_dir / n).exists()
            for d in _documents(rule_dir / n)]
    return Group(f"rules/{rule_dir.name}", config, cluster, _images(rule_dir), docs)


@functools.cache
def _corpus() -> list[Any]:
    return [d for p in sorted(CORPUS.rglob("*.y*ml")) for d in _parsed(p)]


def _generated() -> Group:
    # The webhook benchmarks' streams: distinct reviews and the replicas a controller creates, on a
    # heterogeneous fleet.
    streams, fleet = bench_module("distinct_reviews"), bench_module("fleet")
    bodies = (*streams.reviews(48), *streams.replica_reviews(48, replicas=6))
    generated = [orjson.loads(r)["request"]["object"] for r in bodies]
    fleet_objects = [*fleet.fleet(60), *fleet.runtime_classes()]
    return Group("generated@fleet", Config(), fleet_objects, None, generated)


def _parsed(path: Path) -> list[Any]:
    """The documents of a corpus file; none for files that are not YAML (unrendered templates)."""
    try:
        return _documents(path)
    except yaml.YAMLError:
        return []


# Each group is built when a test first asks for it (not at collection, in every worker).
_BUILDERS: dict[str, Callable[[], Group]] = {
    **{f"rules/{d.name}": functools.partial(_rule_group, d)
       for d in sorted(p for p in RULE_FIXTURES.iterdir() if p.is_dir())},
    "corpus@example": lambda: Group("corpus@example", Config(), _example(), None, _corpus()),
    "corpus@none": lambda: Group("corpus@none", Config(), [], None, _corpus()),
    "generated@fleet": _generated,
}


class _Groups(Mapping[str, Group]):
    """The groups by name, each built once on first use."""

    def __init__(self) -> None:
        self._built: dict[str, Group] = {}

    def __getitem__(self, name: str) -> Group:
        if name not in self._built:
            self._built[name] = _BUILDERS[name]()
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_BUILDERS)

    def __len__(self) -> int:
        return len(_BUILDERS)


GROUPS = _Groups()


def following(previous: ClusterFacts, renewed: tuple[str, ...] = ()) -> ClusterFacts:
    """The snapshot live facts would publish after ``previous`` with the same content, the tokens of
    ``renewed`` aspects new (as after an event that changed nothing in the end)."""
    tokens = {a: (object() if a in renewed else previous.token(a)) for a in ASPECTS}
    return ClusterFacts(nodes=previous.nodes, runtime_classes=previous.runtime_classes, source=previous.source,
                        pools=previous.pools, extended_resource_toleration=previous.extended_resource_toleration,
                        dra=previous.dra, quotas=previous.quotas, queues=previous.queues, kserve=previous.kserve,
                        tokens=tokens,
                        basis=previous)


# metadata key, entry, value: one change per sibling
SIBLING_CHANGES: tuple[tuple[str, str, str | None, str], ...] = (
    ("name", "name", None, "-sibling"),
    ("namespace", "namespace", None, "sibling-namespace"),
    ("label", "labels", "sibling", "yes"),
    ("ignore", "annotations", "gpuguard.io/ignore", "gpu-shared-memory"),
    ("other-annotation", "annotations", "gpuguard.io/note", "x"),
    ("cuda-annotation", "annotations", "gpuguard.io/cuda-version", "12.9"),
)


def siblings(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Copies that differ in one thing a rule may read and a memo key must therefore hold."""
    if not isinstance(doc.get("metadata"), Mapping):
        return
    for what, key, entry, value in SIBLING_CHANGES:
        copied = plain_copy(doc)
        meta = copied["metadata"]
        if entry is None:
            meta[key] = f"{meta.get(key, 'x')}{value}" if value.startswith("-") else value
        elif isinstance(meta.setdefault(key, {}), dict):
            meta[key][entry] = value
        else:
            continue
        yield what, copied


# The corpus and generated sweeps are slow (seconds each): the full suite runs them, the quick one the rules'.
@pytest.mark.parametrize("name", [
    n if n.startswith("rules/") else pytest.param(n, marks=pytest.mark.slow) for n in GROUPS
])
def test_warm_shared_facts_judge_as_fresh_ones(name: str) -> None:
    group = GROUPS[name]
    docs = group.documents
    assert docs, f"{name}: no documents"
    fresh = [group.judge(doc, group.fresh()) for doc in docs]
    warm = group.fresh()
    for seed in SEEDS:
        order = list(range(len(docs)))
        random.Random(seed).shuffle(order)
        for i in order:
            assert group.judge(docs[i], warm) == fresh[i], f"{name}: document {i}, warm (order seed {seed})"
    snapshot = warm
    for renewed in ((), *((a,) for a in ASPECTS)):
        snapshot = following(snapshot, renewed)
        for i in reversed(range(len(docs))):
            assert group.judge(docs[i], snapshot) == fresh[i], f"{name}: document {i}, after renewing {renewed}"


def sibling_mismatches(group: Group) -> list[str]:
    warm = group.fresh()
    out = []
    for i, doc in enumerate(group.documents):
        original = group.judge(doc, warm)
        for what, sibling in siblings(doc):
            if group.judge(sibling, warm) != group.judge(sibling, group.fresh()):
                out.append(f"document {i}, sibling differing in {what}")
            if group.judge(doc, warm) != original:
                out.append(f"document {i} after its {what} sibling")
    return out


@pytest.mark.parametrize("name", [n for n in GROUPS if n.startswith("rules/")])
def test_siblings_on_warm_facts_get_their_own_answers(name: str) -> None:
    assert sibling_mismatches(GROUPS[name]) == []


def test_the_harness_catches_a_key_that_leaves_out_an_annotation_a_rule_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The experiment that slipped past the rule fixtures: a rule-results key blind to annotations
    gives a pod with gpuguard.io/cuda-version the answer of its twin without it, on warm facts.  The
    key is derived from everything rules are given (policies.template_inputs); here it is made to
    leave out the annotations, as a key kept by hand once could."""
    import dataclasses

    from policies import template_inputs
    from policies.podspec import PodTemplate

    real = template_inputs._as_data

    def blind(value: Any) -> Any:
        if isinstance(value, (PodTemplate, template_inputs.ObjectInputs)):
            return [type(value).__name__, *(getattr(value, f.name) for f in dataclasses.fields(value)
                                            if f.name not in ("metadata", "annotations"))]
        return real(value)

    monkeypatch.setattr(template_inputs, "_as_data", blind)
    assert sibling_mismatches(GROUPS["rules/gpu-cuda-driver-mismatch"]) != []
