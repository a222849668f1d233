"""``--fix`` never loses data: it writes a temporary file beside the original, fsyncs it and renames
it over the original only if the original is unchanged since it was read; it never writes through a
symbolic link out of the given paths; and every failure is an input error naming the file (exit 2)
while the run goes on."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.engine import evaluate as real_evaluate
from tests.support.lint import only_rules, run_lint
from tests.support.paths import FIXTURES
from tests.support.proc import gpuguard

POD = (FIXTURES / "lint" / "pod-limit-missing.yaml").read_text()


def _pods(n: int, prefix: str = "p") -> str:
    return "".join(f"---\n{POD.replace('name: trainer', f'name: {prefix}{i}')}" for i in range(n))


def _fixed(text: str) -> bool:
    docs = [d for d in yaml.safe_load_all(text) if d]
    return all(
        c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") == 1
        for d in docs
        for c in d["spec"]["containers"]
        if "nvidia.com/gpu" in c.get("resources", {}).get("requests", {})
    )


def _fix(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any], str]:
    config = only_rules(tmp_path, "gpu-limit-missing")
    code, out, err = run_lint([*argv, "--config", config, "--fix", "--format", "json"], capsys, monkeypatch)
    report: dict[str, Any] = json.loads(out)
    return code, report, err


def _leftovers(directory: Path, *expected: str) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in expected and p.name != "gpuguard-config.yaml")


# --- resource failures: the original survives byte for byte ------------------------------------


@pytest.mark.integration
def test_file_size_limit_keeps_the_original_and_the_run_goes_on(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    big, small = tree / "a-55-pods.yaml", tree / "b-small.yaml"
    big.write_text(_pods(55))
    small.write_text(_pods(1, "s"))
    original = big.read_bytes()
    config = only_rules(tmp_path, "gpu-limit-missing")
    # Writing past RLIMIT_FSIZE fails with EFBIG (Python ignores SIGXFSZ): a real short write.
    result = gpuguard("lint", str(tree), "--config", config, "--fix", "--format", "json", file_size=len(original) + 64)
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert result.code == 2
    (error,) = report["errors"]
    assert error["file"] == str(big)
    assert "File too large" in error["message"] and "unchanged" in error["message"]
    assert big.read_bytes() == original, "the original is intact"
    assert _fixed(small.read_text()), "the other file was still fixed"
    assert report["summary"]["fixed_files"] == [str(small)]
    assert _leftovers(tree, big.name, small.name) == [], "no temporary file is left behind"


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here to fill a real file system: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@pytest.mark.integration
def test_full_file_system_keeps_the_original(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "fs", "256k") as fs:
        target = fs / "pods.yaml"
        target.write_text(_pods(220))
        original = target.read_bytes()
        assert 90_000 < len(original) < 110_000
        # Leave less room than the fixed file needs, even counting the space that truncating the
        # original would free: writing in place would cut the file; a temporary file cannot fit.
        free = os.statvfs(fs).f_bavail * os.statvfs(fs).f_frsize
        (fs / "filler").write_bytes(b"x" * (free - 4096))
        config = only_rules(tmp_path, "gpu-limit-missing")
        result = gpuguard("lint", str(target), "--config", config, "--fix", "--format", "json")
        assert "Traceback" not in result.stderr, result.stderr
        (error,) = json.loads(result.stdout)["errors"]
        assert result.code == 2 and error["file"] == str(target)
        assert "No space left on device" in error["message"]
        assert target.read_bytes() == original
        assert _leftovers(fs, target.name, "filler") == []


# --- files that cannot or must not be written --------------------------------------------------


@pytest.mark.integration
def test_read_only_file_is_an_input_error(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    locked, open_ = tree / "a-locked.yaml", tree / "b-open.yaml"
    locked.write_text(_pods(2))
    open_.write_text(_pods(2, "o"))
    locked.chmod(0o444)
    original = locked.read_bytes()
    config = only_rules(tmp_path, "gpu-limit-missing")
    result = gpuguard("lint", str(tree), "--config", config, "--fix", "--format", "json", drop_dac=True)
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert result.code == 2
    assert [(e["file"], e["message"]) for e in report["errors"]] == [
        (str(locked), "cannot write the fixes: the file is read-only; it is unchanged")
    ]
    assert locked.read_bytes() == original and _fixed(open_.read_text())


@pytest.mark.parametrize(
    ("name", "text"),
    [
        # libyaml accepts a tab after `key:`; the round-trip parser does not.
        ("tab.yaml", POD.replace("namespace: ml", "namespace:\tml")),
        # YAML 1.1 reads 0o10 as a string, YAML 1.2 as the integer 8: equal keys for the round trip.
        ("keys.yaml", POD.replace("namespace: ml", "namespace: ml\n  labels: {0o10: a, 8: b}")),
    ],
)
def test_documents_the_round_trip_parser_refuses_are_fixed_as_text_edits(
    name: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / name
    target.write_text(text)
    code, report, _ = _fix([str(target)], tmp_path, capsys, monkeypatch)
    assert code == 0 and report["errors"] == []
    fixed = target.read_text()
    (doc,) = yaml.load_all(fixed, Loader=yaml.CSafeLoader)  # libyaml, as the linter reads it
    assert doc["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    kept = iter(fixed.splitlines())
    assert all(line in kept for line in text.splitlines()), "every original line is kept, in order"


def test_round_trip_parser_refusals_are_input_errors_where_text_edits_cannot_help() -> None:
    from linter.fixer import FixError, fix_document
    from policies.types import PatchOp

    # A multi-line value in a flow collection is not replaced by a text edit; the round-trip
    # parser (YAML 1.2) cannot read the tab after `a:`.
    with pytest.raises(FixError, match="the round-trip YAML parser cannot read this document"):
        fix_document("a:\tml\nb: {k: [1,\n  2]}\n", [PatchOp("replace", "/b/k", 0)])


def test_concurrent_edit_is_not_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    edited, other = tmp_path / "edited.yaml", tmp_path / "other.yaml"
    edited.write_text(_pods(2))
    other.write_text(_pods(2, "o"))
    mine = _pods(2).replace("image: busybox:1.36", "image: busybox:1.37")
    done = False

    def editor_saves_meanwhile(*args: Any, **kwargs: Any) -> Any:
        nonlocal done
        if not done:  # someone saves the file after gpuguard read it, before it writes
            done = True
            edited.write_text(mine)
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr("linter.lint.evaluate", editor_saves_meanwhile)
    code, report, _ = _fix([str(edited), str(other)], tmp_path, capsys, monkeypatch)
    assert code == 2
    (error,) = report["errors"]
    assert error["file"] == str(edited) and "changed since it was read" in error["message"]
    assert edited.read_text() == mine, "the concurrent edit survives"
    assert _fixed(other.read_text())


def test_same_size_edit_with_restored_mtime_is_caught_by_the_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "pods.yaml"
    target.write_text(_pods(1))
    before = target.stat()
    mine = _pods(1).replace("busybox:1.36", "busybox:1.99")
    assert len(mine) == len(_pods(1))

    def sneaky_edit(*args: Any, **kwargs: Any) -> Any:
        if target.read_text() != mine:
            target.write_text(mine)
            os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr("linter.lint.evaluate", sneaky_edit)
    code, report, _ = _fix([str(target)], tmp_path, capsys, monkeypatch)
    assert code == 2 and "changed since it was read" in report["errors"][0]["message"]
    assert target.read_text() == mine


def test_symlink_out_of_the_tree_is_not_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(_pods(1, "x"))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "escape.yaml").symlink_to(outside)
    (tree / "inside.yaml").write_text(_pods(1))
    (tree / "alias.yaml").symlink_to("target.yaml")  # stays inside the tree
    (tree / "target.yaml").write_text(_pods(1, "t"))
    original = outside.read_text()
    code, report, _ = _fix([str(tree)], tmp_path, capsys, monkeypatch)
    assert code == 2
    (error,) = report["errors"]
    assert error["file"] == str(tree / "escape.yaml")
    assert error["message"] == (
        f"cannot write the fixes: it is a symbolic link to {outside}, outside {tree}; "
        "--fix does not write through it"
    )
    assert outside.read_text() == original
    assert _fixed((tree / "inside.yaml").read_text()) and _fixed((tree / "target.yaml").read_text())
    assert (tree / "alias.yaml").is_symlink(), "a link inside the tree stays a link; its target is fixed"

    code, report, _ = _fix([str(tree / "escape.yaml")], tmp_path, capsys, monkeypatch)
    assert code == 2 and report["errors"][0]["file"] == str(tree / "escape.yaml")
    assert outside.read_text() == original


def test_fix_keeps_mode_bom_and_leaves_no_temporary_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "pods.yaml"
    target.write_bytes(b"\xef\xbb\xbf" + _pods(2).encode())
    target.chmod(0o640)
    code, report, _ = _fix([str(target)], tmp_path, capsys, monkeypatch)
    assert code == 0 and report["summary"]["fixed_files"] == [str(target)]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    data = target.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and _fixed(data[3:].decode())
    assert _leftovers(tmp_path, target.name) == []


def test_hard_linked_file_is_not_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "pods.yaml"
    target.write_text(_pods(1))
    os.link(target, tmp_path / "other-name.yaml.bak")
    code, report, _ = _fix([str(target)], tmp_path, capsys, monkeypatch)
    assert code == 2
    assert report["errors"][0]["message"] == (
        "cannot write the fixes: the file has 2 hard links and replacing it would split them; it is unchanged"
    )
    assert target.read_text() == _pods(1)


def test_input_errors_the_file_already_had_do_not_stop_its_fixes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unrendered placeholder or a misshapen object in one document is reported either way; the
    other documents' fixes were refused as "the result does not lint"."""
    target = tmp_path / "mixed.yaml"
    broken = ("apiVersion: v1\nkind: Pod\nmetadata: {name: unrendered}\nspec:\n  containers:\n"
              "  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: '${GPUS}'}}}\n"
              "---\napiVersion: v1\nkind: Pod\nmetadata: {name: damaged}\nspec: [1]\n")
    target.write_text(broken + _pods(1))
    code, report, _ = _fix([str(target)], tmp_path, capsys, monkeypatch)
    assert code == 2
    messages = [e["message"] for e in report["errors"]]
    assert len(messages) == 2 and "unrendered placeholder ${GPUS}" in messages[0] and "spec is a list" in messages[1]
    assert report["summary"]["fixed_files"] == [str(target)]
    assert target.read_text().startswith(broken) and _fixed(target.read_text().split("spec: [1]\n", 1)[1])
