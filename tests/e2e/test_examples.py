"""The bundled examples: what the README's first command shows must stay true."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.lint import run_lint
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"

EXPECTED = {
    "pytorchjob-llama-finetune.yaml": {
        "gpu-request-limit-mismatch",
        "gpu-taint-not-tolerated",
        "gpu-shared-memory",
        "gpu-cuda-driver-mismatch",
    },
    "notebook-typo.yaml": {"gpu-resource-unknown", "gpu-whole-number", "gpu-device-access-bypass"},
    "helm-rendered.yaml": {"gpu-limit-missing", "gpu-memory-limit-missing", "gpu-cuda-driver-mismatch"},
    "inference-vllm.yaml": set(),
}


def test_sample_profile_is_the_example_cluster() -> None:
    assert (ROOT / "gpuguard" / "sources" / "sample-cluster.yaml").read_bytes() == (EXAMPLES / "cluster.yaml").read_bytes()


def test_examples_show_what_the_readme_promises(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    code, out, _ = run_lint(
        ["examples/manifests", "--cluster", "examples/cluster.yaml", "--format", "json"], capsys, monkeypatch
    )
    report = json.loads(out)
    assert code == 1
    assert report["errors"] == []
    found: dict[str, set[str]] = defaultdict(set)
    for f in report["findings"]:
        found[Path(f["file"]).name].add(f["rule"])
    assert {name: found.get(name, set()) for name in EXPECTED} == EXPECTED
    assert set(found) <= set(EXPECTED)


def test_fixing_the_examples_leaves_only_unfixable_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "manifests"
    work.mkdir()
    for path in (EXAMPLES / "manifests").iterdir():
        (work / path.name).write_text(path.read_text())
    cluster = str(EXAMPLES / "cluster.yaml")
    run_lint([str(work), "--cluster", cluster, "--fix"], capsys, monkeypatch)
    _, out, _ = run_lint([str(work), "--cluster", cluster, "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    assert all(f["fix"] is None for f in report["findings"])
    remaining = {f["rule"] for f in report["findings"]}
    assert "gpu-limit-missing" not in remaining
    # The H100 pool is reserved by dedicated=training: a person decides whether the job belongs there.
    [taint] = [f for f in report["findings"] if f["rule"] == "gpu-taint-not-tolerated"]
    assert "dedicated=training:NoSchedule reserves the pool" in taint["message"]
    assert "# A distributed fine-tuning job" in (work / "pytorchjob-llama-finetune.yaml").read_text()
