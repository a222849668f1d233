"""Rule applicability (policies.applicability): a rule skipped by its APPLIES predicate finds nothing.

Every rule is run directly, past the engine, on every pod template of every rule fixture (the bad
and good documents of all rules, each against its fixture cluster and without facts): wherever a
rule's predicate is false, the rule itself must yield nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.sources.snapshot import load_cluster_facts
from policies.applicability import Profile, snapshot_profile, template_profile
from policies.config import Config
from policies.dra.facts import NO_INPUTS, DraView
from policies.facts import ClusterFacts
from policies.memo import TemplateAnalysis
from policies.operands import controlled_by_cluster_policy
from policies.podspec import PodTemplate, extract
from policies.registry import RULES
from policies.rule import RuleContext
from policies.template_inputs import object_inputs, template_inputs
from tests.support.paths import EXAMPLES, FIXTURES

RESTRICTED = {rule_id: m for rule_id, m in RULES.items() if m.APPLIES is not None}


def _documents() -> list[tuple[str, dict[str, Any], ClusterFacts]]:
    example = load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
    out = []
    for rule_dir in sorted((FIXTURES / "rules").iterdir()):
        cluster_file = rule_dir / "cluster.yaml"
        facts = load_cluster_facts(str(cluster_file)) if cluster_file.exists() else example
        for name in ("bad.yaml", "good.yaml"):
            path: Path = rule_dir / name
            if not path.exists():
                continue
            for i, doc in enumerate(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader)):
                if isinstance(doc, dict):
                    for label, f in (("facts", facts), ("no-facts", ClusterFacts.empty())):
                        out.append((f"{rule_dir.name}/{name}#{i}@{label}", doc, f))
    return out


DOCUMENTS = _documents()


def _context(doc: dict[str, Any], pod: PodTemplate, facts: ClusterFacts, config: Config, rule_id: str) -> RuleContext:
    owned = controlled_by_cluster_policy(doc)
    return RuleContext(
        inputs=template_inputs(pod, object_inputs(doc, owned), frozenset()), facts=facts, has_facts=not facts.is_empty,
        options=config.settings(rule_id).options, is_gpu=config.is_gpu,
        analysis=TemplateAnalysis(pod, facts, config.is_gpu), dra=DraView(facts.dra, NO_INPUTS),
    )


def test_some_rules_are_restricted() -> None:
    assert {"gpu-dra-claim-reference", "gpu-device-access-bypass", "gpu-dra-mixed-allocation"} <= set(RESTRICTED)


@pytest.mark.parametrize("rule_id", sorted(RESTRICTED))
def test_a_rule_finds_nothing_where_it_does_not_apply(rule_id: str) -> None:
    module = RESTRICTED[rule_id]
    assert module.APPLIES is not None
    config = Config()
    sides = {True: 0, False: 0}
    for label, doc, facts in DOCUMENTS:
        for pod in extract(doc, config.workload_index):
            profile = Profile(template_profile(pod), snapshot_profile(facts))
            applies = module.APPLIES(profile)
            sides[applies] += 1
            if not applies:
                found = list(module.check(_context(doc, pod, facts, config, rule_id)))
                assert found == [], f"{rule_id} does not apply to {label} but finds {found}"
    assert sides[False] > 0  # the claim was tested
    if module.APPLIES.__name__ != "never":
        assert sides[True] > 0, f"no fixture template exercises {rule_id}"


def _pod(spec: dict[str, Any]) -> PodTemplate:
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    (pod,) = extract(doc, Config().workload_index)
    return pod


def test_template_profile_features() -> None:
    plain = template_profile(_pod({"containers": [{"name": "c", "image": "x"}]}))
    assert plain == template_profile(_pod({"containers": [{"name": "c", "resources": {"claims": []}}],
                                            "resourceClaims": []}))
    assert not (plain.dra_claims or plain.device_env or plain.device_host_path or plain.privileged)
    assert template_profile(_pod({"containers": [{"name": "c"}], "resourceClaims": [{"name": "g"}]})).dra_claims
    assert template_profile(_pod({"initContainers": [{"name": "i", "resources": {"claims": [{"name": "g"}]}}],
                                  "containers": [{"name": "c"}]})).dra_claims
    assert template_profile(_pod({"containers": [{"name": "c", "env": [
        {"name": "OTHER"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]})).device_env
    assert template_profile(_pod({"containers": [{"name": "c"}], "volumes": [
        {"name": "d", "hostPath": {"path": "/dev/nvidia0"}}]})).device_host_path
    assert not template_profile(_pod({"containers": [{"name": "c"}], "volumes": [
        {"name": "d", "hostPath": {"path": "/var/log"}}]})).device_host_path
    assert template_profile(_pod({"containers": [
        {"name": "a"}, {"name": "b", "securityContext": {"privileged": True}}]})).privileged
    assert not template_profile(_pod({"containers": [{"name": "b", "securityContext": {"privileged": "true"}}]})).privileged
