"""Memory stays proportional to the input, a small multiple of it, and an early error is reported
early: the file is parsed one document (or one List item) at a time, with size, depth, aliases and
duplicate keys checked while parsing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES
from tests.support.proc import Run, gpuguard

pytestmark = pytest.mark.slow

LINT = FIXTURES / "lint"
MB = 1_000_000
SIZE = 16 * MB
# Peak RSS above a run over a tiny file, per byte of input.  The text costs 1x (2x while its bytes
# are decoded), one document at a time next to nothing; every finding is kept for the report (about
# 0.5 KB each) and these inputs carry one per 165-200 bytes: measured 4.8x and 6.4x.  Building every
# document at once, as 0.1.0 did, cost 58x and 73x here.
PER_BYTE = 8


def _multi_document(path: Path, size: int) -> int:
    sources = [LINT / n for n in ("pod-limit-missing.yaml", "pod-good.yaml", "multi-doc.yaml", "helm-rendered.yaml")]
    texts = [s.read_text().rstrip("\n") + "\n" for s in sources]
    out, total, i = [], 0, 0
    while total < size:
        chunk = "---\n" + texts[i % len(texts)]
        out.append(chunk)
        total += len(chunk)
        i += 1
    path.write_text("".join(out))
    return total


def _list_document(path: Path, size: int, duplicate_on_line_2: bool = False) -> int:
    item = (
        "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p{i}\n  spec:\n    containers:\n"
        "    - name: main\n      image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        "      resources:\n        requests:\n          nvidia.com/gpu: 1\n"
    )
    head = "apiVersion: v1\napiVersion: v1\n" if duplicate_on_line_2 else "apiVersion: v1\n"
    parts, total, i = [head, "items:\n"], 0, 0
    while total < size:
        chunk = item.format(i=i)
        parts.append(chunk)
        total += len(chunk)
        i += 1
    parts.append("kind: List\nmetadata: {resourceVersion: ''}\n")
    path.write_text("".join(parts))
    return i


def _baseline(tmp_path: Path) -> int:
    tiny = tmp_path / "tiny.yaml"
    _multi_document(tiny, 1)
    return gpuguard("lint", str(tiny), "--format", "json", address_space=4 << 30).peak_rss


def _lint(path: Path) -> tuple[Run, float]:
    start = time.monotonic()
    result = gpuguard("lint", str(path), "--format", "json", address_space=4 << 30)
    return result, time.monotonic() - start


def test_multi_document_file_memory_is_a_small_multiple_of_its_size(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    size = _multi_document(path, SIZE)
    result, _ = _lint(path)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert result.code == 1 and report["errors"] == []
    assert report["summary"]["documents"] > 10_000
    extra = result.peak_rss - _baseline(tmp_path)
    assert extra < PER_BYTE * size, f"{extra / size:.1f} bytes of memory per byte of input"


def test_huge_list_is_checked_item_by_item(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    items = _list_document(path, SIZE)
    result, _ = _lint(path)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["errors"] == []
    missing = [f for f in report["findings"] if f["rule"] == "gpu-limit-missing"]
    assert len(missing) == items
    assert missing[-1]["path"] == f"/items/{items - 1}/spec/containers/0/resources/requests/nvidia.com~1gpu"
    extra = result.peak_rss - _baseline(tmp_path)
    assert extra < PER_BYTE * path.stat().st_size, f"{extra / path.stat().st_size:.1f} bytes per byte of input"


def test_duplicate_key_on_line_2_of_a_16_mb_document_is_reported_early(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    _list_document(path, SIZE, duplicate_on_line_2=True)
    result, seconds = _lint(path)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert result.code == 2
    assert [(e["line"], e["message"]) for e in report["errors"]] == [
        (2, "duplicate key 'apiVersion' (first at line 1); Kubernetes rejects objects with duplicate fields")
    ]
    assert seconds < 5, f"{seconds:.1f} s to report an error on line 2"
    assert result.peak_rss - _baseline(tmp_path) < 3 * path.stat().st_size
