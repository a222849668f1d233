"""ReloadingConfig: a reload never applies what is not a whole, valid config, and never blocks."""

from __future__ import annotations

import os
from pathlib import Path

from gpuguard.sources.configmodel import load_config
from webhook.configsource import ReloadingConfig


def _source(path: Path) -> tuple[ReloadingConfig, list[str]]:
    results: list[str] = []
    initial = load_config({"enforcement": "enforce", "failureMode": "deny"})
    return ReloadingConfig(path, initial, results.append), results


def test_an_empty_file_keeps_the_last_good_config(tmp_path: Path) -> None:
    """Issue: an empty config file reloaded as valid and reset to the permissive defaults."""
    path = tmp_path / "gpuguard.yaml"
    path.write_text("enforcement: enforce\nfailureMode: deny\n")
    source, results = _source(path)
    for empty in ("", "\n  \n", "# only a comment\n"):
        path.write_text(empty)
        source.check()
        assert source.current().enforcement == "enforce" and source.current().failure_mode == "deny"
    assert results == ["invalid", "invalid", "invalid"]
    path.write_text("enforcement: warn\n")
    assert source.check() == "ok" and source.current().enforcement == "warn"


def test_a_fifo_is_unreadable_and_never_blocks_the_reload(tmp_path: Path) -> None:
    """Issue: a config path that blocks on open (a FIFO) hung reloads while /healthz stayed 200."""
    path = tmp_path / "gpuguard.yaml"
    path.write_text("enforcement: enforce\n")
    source, results = _source(path)
    path.unlink()
    os.mkfifo(path)  # nobody ever writes to it: an open that waits for a writer would never return
    assert source.check() == "unreadable"
    assert source.current().enforcement == "enforce" and results == ["unreadable"]


def test_a_huge_file_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "gpuguard.yaml"
    path.write_text("enforcement: enforce\n")
    source, _ = _source(path)
    path.write_text("# " + "x" * (2 << 20) + "\n")
    assert source.check() == "unreadable"
