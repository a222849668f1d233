"""The README's promises: its config example is valid and its rule table matches the registry."""

from __future__ import annotations

import re

import yaml

from gpuguard.sources.configmodel import load_config
from policies.registry import RULES
from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text()


def test_config_example_is_valid() -> None:
    block = README.split("## Configuration", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    config = load_config(yaml.safe_load(block))
    assert config.settings("gpu-memory-limit-missing").severity is None
    assert "gpu-taint-not-tolerated" in config.mutate


def test_rule_table_lists_every_rule_with_its_default() -> None:
    rows = re.findall(r'^\| <a id="rule-([a-z-]+)"></a>`([a-z-]+)` \| (\w+) \|', README, re.MULTILINE)
    assert all(anchor == rule for anchor, rule, _ in rows)  # each row's anchor names its rule
    assert {rule: default for _, rule, default in rows} == {rid: str(m.DEFAULT_SEVERITY) for rid, m in RULES.items()}
    assert len(rows) == len(RULES)


def test_quick_start_commands_exist() -> None:
    root = ROOT
    assert "bash examples/demo.sh" in README and (root / "examples" / "demo.sh").is_file()
    assert "bash .ci/test" in README and (root / ".ci" / "test").is_file()
    assert "bash .ci/test" in (root / ".ci" / "run").read_text()
