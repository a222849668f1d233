"""Directory walking: every file that matches is linted or reported, never skipped silently; symbolic
links to directories are followed once, loops end, and an unreadable directory is an input error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.lint import run_lint
from tests.support.paths import FIXTURES
from tests.support.proc import gpuguard

BAD_POD = (FIXTURES / "lint" / "pod-limit-missing.yaml").read_text()
GOOD_POD = (FIXTURES / "lint" / "pod-good.yaml").read_text()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _report(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict]:  # type: ignore[type-arg]
    code, out, _ = run_lint([*argv, "--format", "json"], capsys, monkeypatch)
    report: dict = json.loads(out)  # type: ignore[type-arg]
    return code, report


@pytest.mark.integration
def test_unreadable_subdirectory_is_an_input_error(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree", {"ok.yaml": GOOD_POD, "locked/bad.yaml": BAD_POD, "open/bad.yaml": BAD_POD})
    (tree / "locked").chmod(0)
    try:
        # As root without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH: permissions apply as to any user.
        result = gpuguard("lint", str(tree), "--format", "json", drop_dac=True)
    finally:
        (tree / "locked").chmod(0o755)
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert result.code == 2
    assert [(e["file"], e["message"]) for e in report["errors"]] == [
        (str(tree / "locked"), f"cannot read {tree / 'locked'}: Permission denied")
    ]
    missing = {f["file"] for f in report["findings"] if f["rule"] == "gpu-limit-missing"}
    assert missing == {str(tree / "open" / "bad.yaml")}, "the rest is linted"


def test_symlinked_directory_is_linted_and_loops_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = _tree(tmp_path / "outside", {"pods/bad.yaml": BAD_POD})
    tree = _tree(tmp_path / "tree", {"a.yaml": BAD_POD, "sub/deeper/b.yaml": BAD_POD})
    (tree / "linked").symlink_to(outside / "pods", target_is_directory=True)
    (tree / "sub" / "deeper" / "loop").symlink_to("../..", target_is_directory=True)  # back to tree/
    (tree / "sub" / "self").symlink_to(".", target_is_directory=True)
    code, report = _report([str(tree)], capsys, monkeypatch)
    assert code == 1 and report["errors"] == []
    files = sorted(Path(f["file"]).relative_to(tree).as_posix() for f in report["findings"] if f["rule"] == "gpu-limit-missing")
    assert files == ["a.yaml", "linked/bad.yaml", "sub/deeper/b.yaml"], "each file once, the linked one included"


def test_dangling_symlink_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(tmp_path / "tree", {"a.yaml": GOOD_POD})
    (tree / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    code, report = _report([str(tree)], capsys, monkeypatch)
    assert code == 2
    (error,) = report["errors"]
    assert error["file"] == str(tree / "gone.yaml")
    assert error["message"].startswith(f"cannot read {tree / 'gone.yaml'}: No such file or directory")
    assert error["line"] is None


def test_special_file_in_a_tree_is_reported_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(tmp_path / "tree", {"a.yaml": BAD_POD})
    os.mkfifo(tree / "pipe.yaml")  # reading it would wait forever for a writer
    code, report = _report([str(tree)], capsys, monkeypatch)
    assert code == 2
    assert [(e["file"], e["message"]) for e in report["errors"]] == [
        (str(tree / "pipe.yaml"), "not a regular file (a FIFO); name it on the command line to read it")
    ]
    assert [f["file"] for f in report["findings"] if f["rule"] == "gpu-limit-missing"] == [str(tree / "a.yaml")]


def test_charts_and_kustomizations_are_recorded_not_walked(tmp_path: Path) -> None:
    from gpuguard.sources.walk import walk

    (tmp_path / "chart" / "templates").mkdir(parents=True)
    (tmp_path / "chart" / "Chart.yaml").write_text("name: c\n")
    (tmp_path / "chart" / "templates" / "a.yaml").write_text("kind: {{ x }}\n")
    (tmp_path / "kust" / "sub").mkdir(parents=True)
    (tmp_path / "kust" / "Kustomization").write_text("resources: []\n")
    (tmp_path / "kust" / "sub" / "b.yaml").write_text("a: 1\n")
    (tmp_path / "plain.yaml").write_text("a: 1\n")
    rendered: list[tuple[Path, str]] = []
    found, errors = walk(tmp_path, rendered)  # type: ignore[arg-type]
    assert found == [tmp_path / "plain.yaml"] and errors == []
    assert sorted(rendered) == [(tmp_path / "chart", "helm"), (tmp_path / "kust", "kustomize")]
    # Without the list (audit reads dumps), nothing is rendered: every file is read.
    assert len(walk(tmp_path)[0]) == 4


def test_a_walked_root_that_is_a_chart_is_one_rendered_input(tmp_path: Path) -> None:
    from gpuguard.sources.walk import walk

    (tmp_path / "Chart.yaml").write_text("name: c\n")
    rendered: list[tuple[Path, str]] = []
    assert walk(tmp_path, rendered) == ([], [])  # type: ignore[arg-type]
    assert rendered == [(tmp_path, "helm")]
