"""The registry: config key: validated like every other key, errors name the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuguard.sources.configfile import load_config_file
from gpuguard.sources.configmodel import load_config
from policies.config import ConfigError


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"registry": []}, "registry"),
        ({"registry": {"enable": True}}, "registry.enable"),
        ({"registry": {"enabled": "yes"}}, "registry.enabled"),
        ({"registry": {"ca": 3}}, "registry.ca"),
        ({"registry": {"insecure": "a:5000"}}, "registry.insecure"),
        ({"registry": {"insecure": ["https://a:5000"]}}, "registry.insecure[0]"),
        ({"registry": {"insecure": [5000]}}, "registry.insecure[0]"),
        ({"registry": {"timeoutSeconds": "10"}}, "registry.timeoutSeconds"),
        ({"registry": {"timeoutSeconds": 0}}, "registry.timeoutSeconds"),
        ({"registry": {"reviewBudgetMilliseconds": -1}}, "registry.reviewBudgetMilliseconds"),
        ({"registry": {"cacheEntries": 1.5}}, "registry.cacheEntries"),
        ({"registry": {"maxConfigBytes": True}}, "registry.maxConfigBytes"),
    ],
)
def test_errors_name_the_key(raw: Any, key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(raw)
    assert str(exc.value).startswith(key + ":")


def test_defaults_and_values() -> None:
    assert load_config({}).registry.enabled is False
    settings = load_config(
        {
            "registry": {
                "enabled": True,
                "insecure": ["Registry.LAN:5000", "[::1]:5000"],
                "reviewBudgetMilliseconds": 250,
                "tagTTLSeconds": 60,
                "timeoutSeconds": 2.5,
            }
        }
    ).registry
    assert settings.enabled
    assert settings.insecure == ("registry.lan:5000", "[::1]:5000")
    assert settings.review_budget == 0.25
    assert (settings.tag_ttl, settings.timeout) == (60, 2.5)


def test_relative_ca_is_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "gpuguard.yaml"
    path.write_text("registry: {enabled: true, ca: certs/ca.pem}\n")
    config, _ = load_config_file(str(path))
    assert config.registry.ca == str(tmp_path / "conf" / "certs" / "ca.pem")
