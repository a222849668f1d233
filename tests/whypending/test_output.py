"""``--output FILE``: written atomically (same-directory temporary file, fsync, rename), or not at all."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpuguard.cli import main
from tests.support.proc import gpuguard
from tests.whypending.support import objects, write_dump
from whypending.output import OutputError, write_atomically


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dump(objects(), tmp_path_factory.mktemp("dump") / "cluster.json", "json")


def test_report_goes_to_the_file_and_notes_to_stderr(capsys: pytest.CaptureFixture[str], dump: Path,
                                                     tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    assert main(["why-pending", "--dump", str(dump), "-A", "--output", str(target)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert target.read_text().startswith("gpuguard why-pending: 6 pending GPU pods in all namespaces (1 gated)")
    assert "gpuguard why-pending: note: 1 unbound GPU pod has no scheduling attempt recorded yet" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]  # no temporary file left


def test_an_existing_file_keeps_its_mode_and_a_link_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.html"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.html"
    link.symlink_to(real)
    write_atomically(str(link), "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_a_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomically(str(tmp_path / "new.json"), "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640


def test_unwritable_targets_change_nothing(capsys: pytest.CaptureFixture[str], dump: Path, tmp_path: Path) -> None:
    code = main(["why-pending", "--dump", str(dump), "--output", str(tmp_path / "no" / "such" / "dir.txt")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith(f"gpuguard why-pending: {tmp_path / 'no' / 'such' / 'dir.txt'}: cannot create a file in")
    with pytest.raises(OutputError, match="is a directory"):
        write_atomically(str(tmp_path), "x")


def test_a_read_only_directory_keeps_the_old_report(dump: Path, tmp_path: Path) -> None:
    readonly = tmp_path / "ro"
    readonly.mkdir()
    (readonly / "report.txt").write_text("keep")
    readonly.chmod(0o555)
    try:
        # as an ordinary user would (root without the capabilities that bypass permissions)
        done = gpuguard("why-pending", "--dump", str(dump), "--output", str(readonly / "report.txt"), drop_dac=True)
    finally:
        readonly.chmod(0o755)
    assert done.code == 2 and done.stdout == ""
    assert "cannot create a file in" in done.stderr and "Permission denied" in done.stderr
    assert (readonly / "report.txt").read_text() == "keep"
    assert sorted(p.name for p in readonly.iterdir()) == ["report.txt"]


def test_a_failed_write_removes_its_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.txt"
    target.write_text("keep")

    def broken_replace(src: str, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OutputError, match="No space left on device"):
        write_atomically(str(target), "new")
    assert target.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]
