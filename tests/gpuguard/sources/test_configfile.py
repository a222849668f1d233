"""Config files: problems at the file:line:column of the offending key, YAML as before, and no
pydantic for a run without a config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuguard.sources.configfile import ConfigFileError, find_config, load_config_file
from gpuguard.sources.yamlsafe import InputError
from tests.support.paths import EXAMPLES, ROOT


def errors(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "gpuguard.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as caught:
        load_config_file(str(path))
    assert str(caught.value) == str(caught.value.errors[0])
    return [f"{e.line}:{e.column}: {e.message}" for e in caught.value.errors]


def test_each_problem_at_its_key_in_file_order(tmp_path: Path) -> None:
    text = (
        "mutate: [gpu-limit-missing, gpu-whole-number]\n"  # 1
        "rules:\n"
        "  gpu-limit-mising: off\n"  # 3
        "  gpu-shared-memory:\n"
        "    severity: loud\n"  # 5
        "registry:\n"
        "  enable: true\n"  # 7
        "nodePools:\n"
        "  - labels: {pool: a}\n"  # 9: the item whose name is missing
        "    resources:\n"
        "      nvidia.com/gpu: many\n"  # 11
    )
    assert errors(tmp_path, text) == [
        "1:29: config error: mutate[1]: rule 'gpu-whole-number' has no automatic fix",
        "3:3: config error: rules.gpu-limit-mising: unknown rule id; did you mean 'gpu-limit-missing'?",
        "5:5: config error: rules.gpu-shared-memory.severity: expected one of error, warning, info, off, got 'loud'",
        "7:3: config error: registry.enable: unknown key; did you mean 'enabled'?",
        "9:5: config error: nodePools[0].name: expected a non-empty string (required), got nothing",
        "11:7: config error: nodePools[0].resources.nvidia.com/gpu: expected a non-negative quantity (such as 8 or "
        "\"500m\"), got 'many'",
    ]


def test_positions_through_flow_style_anchors_and_merges(tmp_path: Path) -> None:
    text = (
        "base: &pool {name: a, taints: [{key: k, effect: Sometimes}]}\n"
        "nodePools:\n"
        "  - <<: *pool\n"
        "    labels: {7: x}\n"
    )
    found = errors(tmp_path, text)
    assert found[0] == "1:1: config error: base: unknown key (expected one of rules, mutate, mutateTemplates, " \
        "exemptNamespaces, enforcement, warnNamespaces, allowIgnoreAnnotation, allowIgnoreRules, gpuResourceNames, " \
        "podTemplatePaths, failureMode, registry, nodePools, extendedResourceToleration)"
    # the merged taint is reported where it is written: in the anchored mapping
    assert found[1].startswith("1:41: config error: nodePools[0].taints[0].effect: expected one of NoSchedule")
    assert found[2].startswith("4:14: config error: nodePools[0].labels.7: expected a string")


def test_yaml_reads_as_before(tmp_path: Path) -> None:
    """YAML 1.2, as config files were always read: a bare off is the severity off, yes is no boolean."""
    path = tmp_path / ".gpuguard.yaml"
    path.write_text("rules:\n  gpu-shared-memory: off\n  gpu-limit-missing: {severity: off}\n")
    config, source = load_config_file(None, tmp_path)
    assert source == path
    assert config.settings("gpu-shared-memory").severity is None
    assert config.settings("gpu-limit-missing").severity is None
    assert errors(tmp_path, "allowIgnoreAnnotation: yes\n") == [
        "1:1: config error: allowIgnoreAnnotation: expected true, false or a list, got 'yes'"
    ]


def test_documents_and_yaml_errors(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("enforcement: warn\n---\n# the second\nfailureMode: deny\n")
    with pytest.raises(InputError) as caught:
        load_config_file(str(path))
    assert (caught.value.line, caught.value.column) == (4, 1)
    assert caught.value.message == "config must be a single YAML document"
    path.write_text("rules:\n  gpu-limit-missing: {severity: off\n")
    with pytest.raises(InputError, match="invalid YAML") as caught:
        load_config_file(str(path))
    assert caught.value.line == 3
    path.write_text("# nothing yet\n")
    assert load_config_file(str(path))[0] == load_config_file(None, tmp_path / "none")[0]


def test_a_run_without_a_config_never_imports_pydantic(tmp_path: Path) -> None:
    """`gpuguard lint` without a config pays nothing for the config model (pydantic and the models
    cost about 0.15 s); with one, it does import them (so the measurement can see it)."""
    assert find_config(tmp_path) is None
    manifest = tmp_path / "pod.yaml"
    manifest.write_text((EXAMPLES / "manifests" / "notebook-typo.yaml").read_text())

    def imported(*args: str) -> set[str]:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "gpuguard.cli", "lint", str(manifest), *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )
        assert done.returncode in (0, 1), done.stderr[-2000:]
        return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}

    without = imported()
    assert "linter.report" in without  # the run got as far as reporting
    assert not {m for m in without if m.split(".")[0] == "pydantic" or m == "gpuguard.sources.configmodel"}
    # Nor for what only other runs need: the CEL parser's lark (DRA selectors) and asyncio (registry
    # lookups), about 25 and 30 ms of every start-up.
    assert not {m for m in without if m.split(".")[0] in ("lark", "asyncio")}, sorted(without)
    with_config = imported("--config", str(ROOT / "deploy" / "gpuguard-config.yaml"))
    assert {"pydantic", "gpuguard.sources.configmodel"} <= with_config
