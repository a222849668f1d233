"""Every rule against its fixtures in tests/fixtures/rules/<rule-id>/.

Layout per rule:
  bad.yaml     documents separated by `---`; each carries `# expect: <pointer> ...` comment lines
               listing the JSON pointers this rule must report for that document (exactly those)
               and optionally `# severity: <level>` (every finding of that document has it);
  good.yaml    documents on which the rule reports nothing;
  fixed.yaml   (fixable rules) the bad documents after the rule's fix, in the same order;
  cluster.yaml (optional) facts to use instead of examples/cluster.yaml;
  config.yaml  (optional) a gpuguard config (rule options);
  images.yaml  (optional) image facts, as a registry lookup would give them: a mapping from image
               reference to {env: ["NAME=value", ...], source: "..."} or {status: pending|failed,
               detail: "..."}.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.config import Config
from policies.facts_build import facts_from_objects
from policies.images import ImageConfig, ImageLookup
from policies.plaincopy import plain_copy
from policies.registry import RULES
from tests.support.paths import EXAMPLES, FIXTURES

RULE_FIXTURES = FIXTURES / "rules"
EXAMPLE_CLUSTER = EXAMPLES / "cluster.yaml"
_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)


def _chunks(path: Path) -> list[tuple[str, Any]]:
    out = []
    for chunk in _SEPARATOR.split(path.read_text()):
        doc = yaml.load(chunk, Loader=yaml.CSafeLoader)
        if doc is not None:
            out.append((chunk, doc))
    return out


def _expected(chunk: str) -> tuple[set[str], str | None]:
    paths: set[str] = set()
    severity = None
    for line in chunk.splitlines():
        m = re.match(r"^#\s*expect:\s*(.*)$", line)
        if m:
            paths.update(m.group(1).split())
        m = re.match(r"^#\s*severity:\s*(\w+)", line)
        if m:
            severity = m.group(1)
    return paths, severity


@functools.cache
def _cluster_objects(path: Path) -> tuple[Any, ...]:
    """A cluster file's objects, parsed once (libyaml); each fixture gets its own copy and fresh facts."""
    return tuple(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))


def _setup(rule_dir: Path) -> tuple[Config, ClusterFacts]:
    config = load_config(yaml.safe_load((rule_dir / "config.yaml").read_text())) if (
        rule_dir / "config.yaml"
    ).exists() else Config()
    cluster = rule_dir / "cluster.yaml" if (rule_dir / "cluster.yaml").exists() else EXAMPLE_CLUSTER
    facts = facts_from_objects(plain_copy(list(_cluster_objects(cluster))))
    return config, facts


class FixtureImageFacts:
    def __init__(self, known: dict[str, ImageLookup]) -> None:
        self.known = known

    def lookup(self, image: str, arch: str) -> ImageLookup | None:
        return self.known.get(image)


def _images(rule_dir: Path) -> FixtureImageFacts | None:
    path = rule_dir / "images.yaml"
    if not path.exists():
        return None
    known: dict[str, ImageLookup] = {}
    for image, entry in yaml.safe_load(path.read_text()).items():
        if "env" in entry:
            env = tuple(tuple(item.split("=", 1)) for item in entry["env"])
            config = ImageConfig(env=env, source=entry.get("source", ""))  # type: ignore[arg-type]
            known[image] = ImageLookup("found", config)
        else:
            known[image] = ImageLookup(entry["status"], detail=entry.get("detail", ""))
    return FixtureImageFacts(known)


def _cases(name: str) -> list[Any]:
    cases = []
    for rule_id in RULES:
        path = RULE_FIXTURES / rule_id / name
        if path.exists():
            for i, (chunk, doc) in enumerate(_chunks(path)):
                cases.append(pytest.param(rule_id, chunk, doc, id=f"{rule_id}-{name}-{i}"))
    return cases


@pytest.mark.parametrize("rule_id", list(RULES))
def test_rule_has_fixtures(rule_id: str) -> None:
    rule_dir = RULE_FIXTURES / rule_id
    assert (rule_dir / "bad.yaml").exists(), f"{rule_id}: no bad.yaml"
    assert (rule_dir / "good.yaml").exists(), f"{rule_id}: no good.yaml"
    assert _chunks(rule_dir / "bad.yaml") and _chunks(rule_dir / "good.yaml")
    if RULES[rule_id].FIXABLE:
        assert (rule_dir / "fixed.yaml").exists(), f"{rule_id}: fixable rule without fixed.yaml"


@pytest.mark.parametrize(("rule_id", "chunk", "doc"), _cases("bad.yaml"))
def test_bad_fixture_reports_exactly(rule_id: str, chunk: str, doc: Any) -> None:
    config, facts = _setup(RULE_FIXTURES / rule_id)
    expected, severity = _expected(chunk)
    assert expected, "bad fixture document without `# expect:` line"
    findings = [f for f in evaluate(doc, config, facts, _images(RULE_FIXTURES / rule_id)).findings if f.rule == rule_id]
    assert {f.path for f in findings} == expected
    for f in findings:
        assert f.message and f.remediation
        if severity:
            assert str(f.severity) == severity


@pytest.mark.parametrize(("rule_id", "chunk", "doc"), _cases("good.yaml"))
def test_good_fixture_is_clean(rule_id: str, chunk: str, doc: Any) -> None:
    config, facts = _setup(RULE_FIXTURES / rule_id)
    findings = [f for f in evaluate(doc, config, facts, _images(RULE_FIXTURES / rule_id)).findings if f.rule == rule_id]
    assert findings == []


def _fixable_rules() -> list[str]:
    return [r for r, m in RULES.items() if m.FIXABLE and (RULE_FIXTURES / r / "fixed.yaml").exists()]


@pytest.mark.parametrize("rule_id", _fixable_rules())
def test_fix_matches_fixed_fixture_and_is_idempotent(rule_id: str) -> None:
    rule_dir = RULE_FIXTURES / rule_id
    config, facts = _setup(rule_dir)
    images = _images(rule_dir)
    bad = [doc for _, doc in _chunks(rule_dir / "bad.yaml")]
    fixed = [doc for _, doc in _chunks(rule_dir / "fixed.yaml")]
    assert len(bad) == len(fixed)
    for before, after in zip(bad, fixed, strict=True):
        ops = [op.to_dict() for op in evaluate(before, config, facts, images).patch([rule_id])]
        patched = jsonpatch.apply_patch(before, ops)
        assert patched == after
        again = evaluate(patched, config, facts, images)
        assert again.patch([rule_id]) == []
