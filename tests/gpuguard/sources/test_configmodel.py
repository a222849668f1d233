"""The config model: the one declaration of .gpuguard.yaml, its problems in the document's words,
and a JSON Schema that never refuses what gpuguard accepts."""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuguard.sources.configmodel import (
    TOP_LEVEL_KEYS,
    ConfigDocument,
    ConfigProblems,
    config_schema,
    load_config,
)
from policies.config import Config, ConfigError
from policies.registry import RULES
from policies.registry_config import RegistrySettings
from policies.types import Severity
from tests.support.paths import ROOT

SCHEMA = config_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def problems(raw: Any) -> list[str]:
    with pytest.raises(ConfigProblems) as caught:
        load_config(raw)
    return [str(p) for p in caught.value.problems]


# --- one declaration ---------------------------------------------------------------------------


def test_every_engine_setting_has_one_key() -> None:
    assert set(ConfigDocument.model_fields) == {f.name for f in dataclasses.fields(Config)}
    assert tuple(SCHEMA["properties"]) == TOP_LEVEL_KEYS
    assert SCHEMA["additionalProperties"] is False
    assert {"rules", "mutate", "mutateTemplates", "exemptNamespaces", "enforcement", "warnNamespaces",
            "allowIgnoreAnnotation", "allowIgnoreRules", "gpuResourceNames", "podTemplatePaths", "failureMode",
            "registry", "nodePools", "extendedResourceToleration"} == set(TOP_LEVEL_KEYS)


def test_defaults_are_the_engines() -> None:
    properties = SCHEMA["properties"]
    assert load_config({}) == Config()
    assert properties["enforcement"]["default"] == Config().enforcement
    assert properties["exemptNamespaces"]["default"] == sorted(Config().exempt_namespaces)
    registry = properties["registry"]["anyOf"][0]["properties"]
    assert registry["reviewBudgetMilliseconds"]["default"] == RegistrySettings().review_budget * 1000
    assert registry["cacheEntries"]["default"] == RegistrySettings().cache_entries


def _rule_schema(rule_id: str) -> dict[str, Any]:
    entry = SCHEMA["properties"]["rules"]["anyOf"][0]["properties"][rule_id]
    first: dict[str, Any] = entry["anyOf"][0]
    return first


def test_rules_and_their_options_come_from_the_rule_modules() -> None:
    rules = SCHEMA["properties"]["rules"]["anyOf"][0]
    assert list(rules["properties"]) == list(RULES) and rules["additionalProperties"] is False
    for rule_id, module in RULES.items():
        settings_schema = _rule_schema(rule_id)
        assert settings_schema["properties"]["severity"]["default"] == str(module.DEFAULT_SEVERITY)
        options = settings_schema["properties"]["options"]["anyOf"][0]
        assert list(options["properties"]) == [o.name for o in module.OPTIONS], rule_id
        for option in module.OPTIONS:
            declared = options["properties"][option.name]
            assert declared["default"] == option.default and declared["description"] == option.doc
            if option.choices:
                assert declared["enum"] == list(option.choices)


def test_mutate_offers_only_fixes_the_webhook_may_apply() -> None:
    offered = SCHEMA["properties"]["mutate"]["anyOf"][0]["items"]["enum"]
    assert offered == [r for r, m in RULES.items() if m.FIXABLE and m.MUTATION_SAFE]
    for rule_id in offered:
        assert load_config({"mutate": [rule_id]}).mutate == (rule_id,)


def test_conversion_to_the_engines_config() -> None:
    config = load_config({
        "rules": {"gpu-shared-memory": "off", "gpu-limit-missing": None, "gpu-memory-limit-missing": False,
                  "gpu-topology-alignment": {"severity": "Error", "options": {"gpusPerNumaNode": 4}}},
        "allowIgnoreAnnotation": ["ml"],
        "podTemplatePaths": [{"apiVersion": "example.com/v1", "kind": "Trainer", "template": "/spec/workers/*/template"}],
        "registry": {"enabled": True, "reviewBudgetMilliseconds": 250, "insecure": ["Registry.LAN:5000"]},
        "nodePools": [{"name": "l4", "labels": {"pool": "l4", "spot": True}, "resources": {"nvidia.com/gpu": 2},
                       "taints": [{"key": "gpu", "effect": "NoSchedule"}], "driverVersion": "550.90.07"}],
    })
    assert config.settings("gpu-shared-memory").severity is None
    assert config.settings("gpu-memory-limit-missing").severity is None
    assert not config.settings("gpu-limit-missing").explicit
    topology = config.settings("gpu-topology-alignment")
    assert topology.severity is Severity.ERROR and topology.explicit
    assert topology.options == {"cpuManagerPolicy": "unknown", "topologyManagerPolicy": "unknown", "gpusPerNumaNode": 4}
    assert config.ignore_annotation == frozenset({"ml"})
    assert ("example.com", "Trainer") in {(w.group, w.kind) for w in config.extra_workloads}
    assert config.workload_index[("example.com", "Trainer")].resource == "trainers"
    assert (config.registry.review_budget, config.registry.insecure) == (0.25, ("registry.lan:5000",))
    (pool,) = config.node_pools
    assert pool.labels["spot"] == "true" and pool.allocatable == {"nvidia.com/gpu": 2}
    assert pool.labels["nvidia.com/cuda.driver-version.major"] == "550" and pool.taints[0].value == ""


# --- problems in the document's words ----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"rulez": {}}, "rulez: unknown key; did you mean 'rules'?"),
        ({"mutate_templates": True}, "mutate_templates: unknown key; did you mean 'mutateTemplates'?"),
        ({"bogus": 1}, "bogus: unknown key (expected one of rules, mutate, mutateTemplates,"),
        ({"rules": {"gpu-limit-mising": "off"}}, "rules.gpu-limit-mising: unknown rule id; did you mean 'gpu-limit-missing'?"),
        ({"rules": {"zzz": "off"}}, "rules.zzz: unknown rule id (`gpuguard rules` lists them)"),
        ({"rules": {"gpu-runtime-class": {"options": {"requird": "nvidia"}}}},
         "rules.gpu-runtime-class.options.requird: unknown option; did you mean 'required'?"),
        ({"rules": {"gpu-runtime-class": {"options": {"zzz": 1}}}},
         "rules.gpu-runtime-class.options.zzz: unknown option (this rule's options: required)"),
        ({"rules": {"gpu-limit-missing": {"options": {"x": 1}}}},
         "rules.gpu-limit-missing.options.x: unknown option (this rule has no options)"),
        ({"rules": {"gpu-limit-missing": {"severity": "warnign"}}},
         "rules.gpu-limit-missing.severity: expected one of error, warning, info, off, got 'warnign'; "
         "did you mean 'warning'?"),
        ({"rules": {"gpu-limit-missing": "warnign"}}, "rules.gpu-limit-missing: expected one of error, warning, info, "
         "off, got 'warnign'; did you mean 'warning'?"),
        ({"failureMode": "alow"}, "failureMode: expected allow or deny, got 'alow'; did you mean 'allow'?"),
        ({"mutate": ["gpu-limit-mising"]}, "mutate[0]: unknown rule id 'gpu-limit-mising'; did you mean 'gpu-limit-missing'?"),
        ({"allowIgnoreRules": ["gpu-device-acess-bypass"]},
         "allowIgnoreRules[0]: unknown rule id 'gpu-device-acess-bypass'; did you mean 'gpu-device-access-bypass'?"),
        ({"registry": {"timeoutSecond": 3}}, "registry.timeoutSecond: unknown key; did you mean 'timeoutSeconds'?"),
        ({"nodePools": [{"name": "a", "taints": [{"key": "k", "effect": "NoSchedul"}]}]},
         "nodePools[0].taints[0].effect: expected one of NoSchedule, PreferNoSchedule, NoExecute, got 'NoSchedul'; "
         "did you mean 'NoSchedule'?"),
        ({"allowIgnoreAnnotation": "yes"}, "allowIgnoreAnnotation: expected true, false or a list, got 'yes'"),
        ({"allowIgnoreAnnotation": ["ml", ""]}, "allowIgnoreAnnotation[1]: expected a non-empty string, got ''"),
        ({"exemptNamespaces": ["Kube_System"]},
         "exemptNamespaces[0]: expected a namespace name (lowercase letters, digits and '-'), got 'Kube_System'"),
        ({"podTemplatePaths": [{"kind": "X", "template": "/spec"}]},
         "podTemplatePaths[0].apiVersion: expected a non-empty string (required), got nothing"),
        ({"registry": {"timeoutSeconds": 0}}, "registry.timeoutSeconds: must be at least 0.001, got 0"),
        ({"registry": {"cacheEntries": True}}, "registry.cacheEntries: expected an integer, got true"),
        ({1: True}, "1: unknown key (expected one of"),
        ("rules: {}", "config: expected a mapping, got 'rules: {}'"),
    ],
)
def test_a_problem_names_the_key_and_the_nearest_valid_name(raw: Any, expected: str) -> None:
    assert problems(raw)[0].startswith(expected)


def test_every_problem_is_reported_once() -> None:
    found = problems({"enforcement": "audit", "rules": {"gpu-limit-mising": {}}, "mutate": "x",
                      "allowIgnoreAnnotation": 3})
    assert sorted(p.split(":")[0] for p in found) == ["allowIgnoreAnnotation", "enforcement", "mutate",
                                                     "rules.gpu-limit-mising"]


def test_problems_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"^nodePools\[1\]\.name: 'a' is declared twice"):
        load_config({"nodePools": [{"name": "a"}, {"name": "a"}]})


# --- the JSON Schema ---------------------------------------------------------------------------


def test_documented_configs_are_valid_against_the_schema() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Configuration", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    deploy = yaml.safe_load((ROOT / "deploy" / "gpuguard-config.yaml").read_text())
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "gpuguard" / "values.yaml").read_text())["config"]
    for raw in (yaml.safe_load(block), deploy, chart):
        VALIDATOR.validate(raw)
        load_config(raw)


names = st.sampled_from(["", "x", "off", "Error", "warning", "enforce", "warn", "allow", "deny", "kube-system",
                         "Kube_System", "/spec/template", "spec/x", "a:5000", "https://a", "550.90.07", "550",
                         "NoSchedule", "8", "500m", "many", "team-*", "static", "nvidia", "example.com/v1"])
scalars = st.none() | st.booleans() | st.integers(-2, 5000) | st.floats(-1, 10, allow_nan=False) | names
leaf = scalars | st.lists(scalars, max_size=3)


def _mapping(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys), values, max_size=4)


_rule_ids = ["gpu-limit-missing", "gpu-topology-alignment", "gpu-runtime-class", "gpu-device-access-bypass",
             "gpu-cuda-driver-mismatch", "gpu-request-limit-mismatch", "nope"]
_options = _mapping(["cpuManagerPolicy", "topologyManagerPolicy", "gpusPerNumaNode", "required",
                     "envvarWhenUnprivileged", "infrastructureNamespaces", "imageRules", "x"],
                    leaf | st.lists(_mapping(["pattern", "cudaVersion"], scalars), max_size=2))
_taint = _mapping(["key", "value", "effect", "operator"], scalars)
_pool = _mapping(["name", "labels", "taints", "resources", "gpuProduct", "driverVersion", "size"],
                 leaf | _mapping(["a", "nvidia.com/gpu"], leaf) | st.lists(_taint, max_size=2))
_severity = st.sampled_from(["error", "warning", "info", "off", "Warning", False])
_namespaces = st.lists(st.sampled_from(["kube-system", "ml", "team-a"]), max_size=2)
_valid_pool = st.fixed_dictionaries({"name": st.sampled_from(["a", "b"])}, optional={
    "labels": _mapping(["pool", "spot"], names | st.booleans() | st.integers(0, 9)),
    "taints": st.lists(st.fixed_dictionaries({"key": st.just("k"), "effect": st.sampled_from(["NoSchedule", "x"])},
                                             optional={"value": scalars}), max_size=2),
    "resources": _mapping(["nvidia.com/gpu", "cpu"], st.integers(0, 8) | st.sampled_from(["500m", "many", "-1"])),
    "driverVersion": st.sampled_from(["550.90.07", "550", 550.9]),
})
_values: dict[str, st.SearchStrategy[Any]] = {
    "rules": st.none() | _mapping(_rule_ids, scalars | _severity | st.none() | _mapping(
        ["severity", "options", "level"], _severity | scalars | _options)),
    "mutate": leaf | st.lists(st.sampled_from([*_rule_ids, "gpu-taint-not-tolerated"]), max_size=2),
    "mutateTemplates": st.booleans() | scalars,
    "exemptNamespaces": _namespaces | leaf,
    "enforcement": st.sampled_from(["enforce", "warn"]) | scalars,
    "warnNamespaces": _namespaces | leaf,
    "allowIgnoreAnnotation": st.booleans() | _namespaces | leaf,
    "allowIgnoreRules": leaf | st.lists(st.sampled_from(_rule_ids), max_size=2),
    "gpuResourceNames": st.lists(st.sampled_from(["example.com/fpga", ""]), max_size=2) | leaf,
    "failureMode": st.sampled_from(["allow", "deny"]) | scalars,
    "extendedResourceToleration": st.booleans() | scalars,
    "rulez": scalars,
    "podTemplatePaths": st.none() | scalars | st.lists(
        _mapping(["apiVersion", "kind", "template", "podSpec", "resource", "x"], scalars), max_size=2),
    "registry": st.none() | scalars | _mapping(
        ["enabled", "ca", "insecure", "timeoutSeconds", "reviewBudgetMilliseconds", "cacheEntries", "enable"],
        st.booleans() | st.integers(-1, 5000) | st.floats(0, 2) | st.lists(st.sampled_from(["a:5000", "x/y"])) | leaf),
    "nodePools": st.none() | scalars | st.lists(_valid_pool | _pool, max_size=2),
}
# Documents of one to three keys, so that many are valid and both sides of the property are seen.
documents = st.lists(st.sampled_from(list(_values)), min_size=1, max_size=3, unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({k: _values[k] for k in keys}))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(documents)
# what YAML 1.1 readers (Helm) and people write that gpuguard takes: bare off, any case, nulls for defaults
@example({"rules": {"gpu-limit-missing": False, "gpu-shared-memory": "off", "gpu-runtime-class": None}})
@example({"rules": {"gpu-limit-missing": {"severity": "Warning", "options": None}}, "mutate": None})
@example({"exemptNamespaces": None, "warnNamespaces": None, "registry": None, "nodePools": None, "rules": None})
@example({"registry": {"timeoutSeconds": 2, "reviewBudgetMilliseconds": 0.5, "insecure": None, "ca": "ca.pem"}})
@example({"nodePools": [{"name": "a", "labels": {"n": 1, "b": True}, "resources": {"cpu": "500m"},
                         "taints": [{"key": "k", "value": None, "effect": "NoExecute"}]}]})
def test_the_schema_never_refuses_what_gpuguard_accepts(raw: dict[str, Any]) -> None:
    """The Helm chart validates its config with the schema: it must not be stricter than gpuguard.
    (It may be more lenient: pointer syntax, CUDA image rules, duplicate pool names, quantities and
    driver versions are the engine's to check.)  Whatever the document, problems, never a crash."""
    try:
        load_config(raw)
    except ConfigProblems:
        return
    assert VALIDATOR.is_valid(raw), list(VALIDATOR.iter_errors(raw))[:3]
