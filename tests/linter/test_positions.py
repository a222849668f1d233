"""Pointer → file:line:column: key of the field, nearest existing parent, absolute across documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuguard.sources import yamlstream
from gpuguard.sources.configmodel import load_config
from gpuguard.sources.loader import parse_text
from gpuguard.sources.yamlsafe import decode
from linter.lint import lint_text
from linter.positions import locate
from policies import ClusterFacts, Config
from policies.registry import RULES
from tests.support.paths import FIXTURES

LINT = FIXTURES / "lint"

SNIPPET = """\
# leading comment
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: a
    image: x
    resources:
      requests: {nvidia.com/gpu: 1, "a/b~c": 2}
  - name: b
    image: y
"""


def _only_limit_missing() -> Config:
    return load_config({"rules": {rid: "off" for rid in RULES if rid != "gpu-limit-missing"}})


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", (2, 1)),
        ("/kind", (3, 1)),
        ("/metadata/name", (5, 3)),
        ("/spec/containers/0", (8, 5)),
        ("/spec/containers/1/image", (13, 5)),
        ("/spec/containers/0/resources/requests/nvidia.com~1gpu", (11, 18)),
        ("/spec/containers/0/resources/requests/a~1b~0c", (11, 37)),
        # missing fields: the key of the nearest existing ancestor
        ("/spec/containers/0/resources/limits/nvidia.com~1gpu", (10, 5)),
        ("/spec/containers/1/resources", (12, 5)),
        ("/spec/containers/7/resources", (7, 3)),
        ("/spec/nodeSelector", (6, 1)),
        ("/metadata/name/deeper", (5, 3)),
    ],
)
def test_locate(path: str, expected: tuple[int, int]) -> None:
    (doc,) = parse_text(SNIPPET, "snippet.yaml").documents
    assert locate(doc.positions, path) == expected


def _gpu_findings(path: Path) -> list[tuple[int, int, str]]:
    result = lint_text(path.read_text(), str(path), _only_limit_missing(), ClusterFacts.empty())
    assert result.errors == []
    return [(f.line, f.column, f.finding.path) for f in result.findings]


def _find(text: str, needle: str) -> tuple[int, int]:
    for i, line in enumerate(text.splitlines()):
        if needle in line:
            return i + 1, line.index(needle) + 1
    raise AssertionError(needle)


def test_positions_are_absolute_in_multi_document_files() -> None:
    path = LINT / "multi-doc.yaml"
    line, col = _find(path.read_text(), "nvidia.com/gpu: 2")
    assert _gpu_findings(path) == [(line, col, "/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu")]
    assert line > 30  # the third document, not a document-relative line


def test_json_positions() -> None:
    path = LINT / "deployment.json"
    line, col = _find(path.read_text(), '"nvidia.com/gpu"')
    assert _gpu_findings(path) == [(line, col, "/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu")]


def test_crlf_and_bom_do_not_shift_positions() -> None:
    text = (LINT / "pod-limit-missing.yaml").read_text()
    line, col = _find(text, "nvidia.com/gpu: 1")
    raw = b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()
    result = lint_text(decode(raw, "crlf.yaml"), "crlf.yaml", _only_limit_missing(), ClusterFacts.empty())
    assert [(f.line, f.column) for f in result.findings] == [(line, col)]


def test_document_start_lines_and_sources() -> None:
    text = (LINT / "helm-rendered.yaml").read_text()
    parsed = parse_text(text, "helm.yaml")
    assert [d.source for d in parsed.documents] == [
        "gpu-app/templates/configmap.yaml",
        "gpu-app/templates/deployment.yaml",
        "gpu-app/templates/job.yaml",
    ]
    lines = text.splitlines()
    for doc in parsed.documents:
        assert lines[doc.line - 1].startswith("apiVersion:")
        assert lines[doc.segment.start - 1] == "---"


@pytest.mark.parametrize("name", ["multi-doc.yaml", "deployment.json", "helm-rendered.yaml", "list.yaml"])
def test_pure_python_fallback_agrees(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without libyaml, PyYAML's pure-Python parser gives the same data and positions."""
    text = (LINT / name).read_text()
    fast = lint_text(text, name, _only_limit_missing(), ClusterFacts.empty())
    fast_docs = [d.data for d in parse_text(text, name).documents]
    monkeypatch.setattr(yamlstream, "_PURE", True)
    assert not type(yamlstream._parser("a: 1", 0)).__module__.startswith("yaml._yaml")
    slow = lint_text(text, name, _only_limit_missing(), ClusterFacts.empty())
    assert [d.data for d in parse_text(text, name).documents] == fast_docs
    assert [f.to_dict() for f in slow.findings] == [f.to_dict() for f in fast.findings]
    assert slow.findings
