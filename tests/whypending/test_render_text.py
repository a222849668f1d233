"""The text report: what an SRE reads at 3 a.m., pinned line by line for the fragmentation case."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpuguard.cli import main
from policies.pending import diagnose as dg
from tests.support.paths import ROOT
from tests.whypending.support import objects, without_ages, write_dump
from whypending.render_text import KIND_WIDTH

FRAGMENTATION_BLOCK = """\
ml/big-train: 4 nvidia.com/gpu, priority 500, preemptionPolicy Never, owner Job/big-train, pending for <age>
  static             warning gpu-shared-memory: container 'main' uses 4 GPUs but has only the
                     runtime's 64 MiB /dev/shm, and its image names pytorch: NCCL and DataLoader
                     workers fail or slow down there; mount an emptyDir with medium: Memory at
                     /dev/shm
                     > fix the pod spec; `gpuguard rules RULE` explains each rule
  scheduler          PodScheduled condition
                     - 3 of 10 nodes: not enough nvidia.com/gpu left: the requests of pods already
                       on the node leave less than the pod asks
                     - 1 of 10 nodes: the node is cordoned (spec.unschedulable)
                     - 1 of 10 nodes: the node has taint node.kubernetes.io/not-ready and the pod
                       does not tolerate it
                     - 5 of 10 nodes: the node's labels do not match the pod's nodeSelector or
                       required node affinity
                     - the pod has preemptionPolicy: Never, so it never evicts others
  fragmentation      fragmented: enough GPUs are free in total, but not on any single node that fits
                     the pod (nvidia.com/gpu: 4 free on the 3 nodes that fit the pod otherwise, at
                     most 2 on one; the pod needs 4 on one node; 14 more free on nodes the pod
                     cannot use)
                     - h100-a (NVIDIA-H100-80GB-HBM3 (p5.48xlarge)): 2 nvidia.com/gpu free
                     - h100-b (NVIDIA-H100-80GB-HBM3 (p5.48xlarge)): 2 nvidia.com/gpu free
                     > free GPUs are spread over several nodes: move smaller pods off one of the
                       best nodes, or pack nodes (NodeResourcesFit scoringStrategy MostAllocated)
"""


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dump(objects(), tmp_path_factory.mktemp("dump") / "cluster.json", "json")


def text(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str, columns: int = 100) -> str:
    """why-pending's text on a terminal of ``columns`` (lines wrap only on a terminal)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["why-pending", *args]) == 0
    out: str = capsys.readouterr().out
    return out


def test_the_fragmentation_case_reads_like_this(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                dump: Path) -> None:
    out = text(capsys, monkeypatch, "--dump", str(dump), "-n", "ml", "big-train")
    heading = " ".join(out[:out.index("\n\n")].split())  # the dump's path decides where it wraps
    assert heading == (f"gpuguard why-pending: 1 pending GPU pod among the 1 named "
                       f"dump {dump}: 11 nodes (10 with GPUs), 20 pods, 4 FailedScheduling events "
                       "GPU utilization: not measured (pass --prometheus URL to name idle GPU holders)")
    start = out.index("ml/big-train:")
    block = out[start:out.index("\n\n", start) + 1]
    # the heading line is re-joined: its wrap point depends on the age's length
    first, _, rest = block.partition("\n    ")
    joined = " ".join([first, rest.split("\n", 1)[0]]) + "\n" + rest.split("\n", 1)[1]
    assert without_ages(joined) == FRAGMENTATION_BLOCK


def test_lines_fit_the_terminal_and_kinds_line_up(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, dump: Path) -> None:
    for columns in (80, 120):
        out = text(capsys, monkeypatch, "--dump", str(dump), "-A", columns=columns)
        body = out[:out.index("\nGPU pools\n")]
        assert max(len(line) for line in body.splitlines()) <= columns
        kinds = [line for line in body.splitlines() if line.startswith("  ") and not line.startswith("   ")]
        assert kinds and all(line[2:2 + KIND_WIDTH].rstrip() in (*dg.KINDS, "fits now") for line in kinds)
        assert all(line[2 + KIND_WIDTH] == " " for line in kinds)


def test_a_pipe_keeps_each_line_whole(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                      dump: Path) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["why-pending", "--dump", str(dump), "-A"]) == 0  # stdout is no terminal here
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) > 80  # no line was cut to the 80 columns COLUMNS says


def test_pools_and_notes(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, dump: Path) -> None:
    out = text(capsys, monkeypatch, "--dump", str(dump), "-A")
    pools = out[out.index("GPU pools\n"):].splitlines()
    assert pools[1].split() == ["pool", "resource", "nodes", "allocatable", "allocated", "reserved", "free",
                                "unhealthy", "unavailable", "nodes"]
    h100 = next(line for line in pools if line.startswith("NVIDIA-H100"))
    # 24 allocatable; 18 held; research/urgent reserves 4 on h100-c; free = 2 + 2 + 0
    assert h100.split()[-7:] == ["3", "24", "18", "4", "4", "0", "0"]
    assert "notes:\n  - 1 unbound GPU pod has no scheduling attempt recorded yet" in out


def test_the_readme_shows_this_very_output() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Why GPU pods are Pending: `gpuguard why-pending`"):readme.index("## Benchmarks")]
    body = FRAGMENTATION_BLOCK.split("\n", 1)[1]
    assert body in section
