"""Config validation: every mistake is an error naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuguard.sources.configfile import find_config, load_config_file
from gpuguard.sources.configmodel import load_config
from gpuguard.sources.yamlsafe import InputError
from policies.config import ConfigError
from policies.types import Severity


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"rulez": {}}, "rulez"),
        ({"rules": {"gpu-limit-mising": {}}}, "rules.gpu-limit-mising"),
        ({"rules": {"gpu-limit-missing": {"severity": "fatal"}}}, "rules.gpu-limit-missing.severity"),
        ({"rules": {"gpu-limit-missing": {"level": "error"}}}, "rules.gpu-limit-missing.level"),
        ({"rules": {"gpu-limit-missing": {"options": {"x": 1}}}}, "rules.gpu-limit-missing.options.x"),
        ({"rules": []}, "rules"),
        ({"mutate": ["gpu-nope"]}, "mutate[0]"),
        ({"mutate": ["gpu-whole-number"]}, "mutate[0]"),
        ({"mutate": "gpu-limit-missing"}, "mutate"),
        ({"exemptNamespaces": "kube-system"}, "exemptNamespaces"),
        ({"failureMode": "maybe"}, "failureMode"),
        ({"podTemplatePaths": [{"apiVersion": "x/v1", "kind": "X"}]}, "podTemplatePaths[0]"),
        ({"podTemplatePaths": [{"apiVersion": "x/v1", "kind": "X", "template": "spec/x"}]}, "podTemplatePaths[0].template"),
        ([1, 2], "config"),
    ],
)
def test_errors_name_the_key(raw: Any, key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(raw)
    assert str(exc.value).startswith(key)


def test_severity_off_and_shorthand() -> None:
    config = load_config(
        {"rules": {"gpu-shared-memory": "off", "gpu-memory-limit-missing": {"severity": False},
                   "gpu-limit-missing": {"severity": "warning"}}}
    )
    assert config.settings("gpu-shared-memory").severity is None
    assert config.settings("gpu-memory-limit-missing").severity is None
    assert config.settings("gpu-limit-missing").severity is Severity.WARNING
    assert config.settings("gpu-limit-missing").explicit
    assert config.settings("gpu-whole-number").severity is Severity.ERROR
    assert not config.settings("gpu-whole-number").explicit


def test_defaults() -> None:
    config = load_config(None)
    assert config.mutate == ()
    assert config.failure_mode == "allow"
    assert config.is_gpu("nvidia.com/gpu") and not config.is_gpu("example.com/fpga")
    assert load_config({"gpuResourceNames": ["example.com/fpga"]}).is_gpu("example.com/fpga")


def test_config_found_upward(tmp_path: Path) -> None:
    (tmp_path / ".gpuguard.yaml").write_text("exemptNamespaces: [ci]\n")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert find_config(nested) == tmp_path / ".gpuguard.yaml"
    config, source = load_config_file(None, nested)
    assert source == tmp_path / ".gpuguard.yaml"
    assert config.exempt_namespaces == {"ci"}


def test_config_file_error_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("rules:\n  gpu-limit-missing:\n    severity: loud\n")
    with pytest.raises(InputError) as exc:
        load_config_file(str(path))
    assert exc.value.file == str(path)
    assert "rules.gpu-limit-missing.severity" in exc.value.message


def test_admission_safety_keys_are_validated() -> None:
    from gpuguard.sources.configmodel import load_config
    from policies.config import DEFAULT_EXEMPT_NAMESPACES, ConfigError

    config = load_config({"enforcement": "warn", "warnNamespaces": ["team-*"], "allowIgnoreAnnotation": ["ml"],
                          "mutateTemplates": True})
    assert config.enforcement_in("prod") == "warn" and config.mutate_templates
    assert config.honours_ignore_annotation("ml") and not config.honours_ignore_annotation("prod")
    assert load_config(None).exempt_namespaces == DEFAULT_EXEMPT_NAMESPACES
    assert load_config({}).enforcement_in("team-a") == "enforce"
    assert load_config({"warnNamespaces": ["team-*"]}).enforcement_in("team-a") == "warn"
    bad = [
        ({"enforcement": "audit"}, "enforcement: expected enforce or warn"),
        ({"warnNamespaces": "team-*"}, "warnNamespaces: expected a list"),
        ({"warnNamespaces": [""]}, r"warnNamespaces\[0\]: expected a non-empty string"),
        ({"allowIgnoreAnnotation": "yes"}, "allowIgnoreAnnotation: expected true, false or a list"),
        ({"mutateTemplates": "true"}, "mutateTemplates: expected true or false"),
    ]
    for raw, message in bad:
        with pytest.raises(ConfigError, match=message):
            load_config(raw)
