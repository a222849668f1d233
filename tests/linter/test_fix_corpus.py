"""`gpuguard lint --fix` on a copy of every corpus file keeps each file's own formatting.

For each context (no cluster facts; the sample cluster) the whole corpus is copied, fixed by
``gpuguard lint --fix`` in a child process, and then, for every file it changed:

- the diff touches at most 2 of the original lines, each one the line a fixable finding points at
  (the line a fix must change, e.g. ``resources: {}`` becoming ``resources:``); every other
  original line is kept byte for byte, in order;
- the file reads (YAML 1.1, as kubectl reads it) as exactly the original documents with the
  engine's patch applied;
- linting it again finds no fix left and none of the findings that were fixed.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from gpuguard.sources.configfile import load_config_file
from gpuguard.sources.dra_inputs import DraCollector
from gpuguard.sources.kserve_inputs import KServeCollector
from gpuguard.sources.layout import Layout
from gpuguard.sources.snapshot import load_cluster_facts
from linter.lint import lint_text
from policies.facts import ClusterFacts
from tests.support.paths import CORPUS
from tests.support.proc import GPUGUARD

pytestmark = pytest.mark.slow

CONTEXTS = {"no-facts": [], "sample": ["--cluster", "sample"]}
MAX_CHANGED = 2


def _corpus_files() -> list[Path]:
    return sorted(
        p for p in CORPUS.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json") and "LICENSES" not in p.parts
    )


def _copy_name(path: Path) -> str:
    return "__".join(path.relative_to(CORPUS).parts)


def changed_original_lines(before: str, after: str) -> list[int]:
    """1-based numbers of the original lines the diff replaces or deletes (insertions excluded).

    Line endings count, except that lines added after a last line without a line break give it one.
    """
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    if old and new and not old[-1].endswith(("\n", "\r")):
        old[-1] += "\n"
        new[-1] += "\n" if not new[-1].endswith(("\n", "\r")) else ""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [n + 1 for tag, i1, i2, _, _ in matcher.get_opcodes() if tag in ("replace", "delete") for n in range(i1, i2)]


def _documents(text: str) -> list[Any]:
    layout = Layout(text)
    return [yaml.load(text[s.begin : s.stop], Loader=yaml.CSafeLoader) for s in layout.segments]


@dataclass
class _Run:
    originals: dict[str, str]
    fixed: dict[str, str]
    before: dict[str, Any]  # file name -> its lint_text result (with fix ops)
    after: dict[str, list[dict[str, Any]]]  # file name -> its findings when linted again


def _lint_json(args: list[str], cwd: Path) -> dict[str, Any]:
    done = subprocess.run([*GPUGUARD, "lint", *args, "--format", "json"], capture_output=True, text=True, cwd=cwd)
    assert done.returncode in (0, 1, 2), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture(scope="module", params=sorted(CONTEXTS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> _Run:
    context: list[str] = CONTEXTS[request.param]
    work = tmp_path_factory.mktemp(f"fix-{request.param}")
    files = work / "corpus"
    files.mkdir()
    originals = {}
    for path in _corpus_files():
        shutil.copyfile(path, files / _copy_name(path))
        originals[_copy_name(path)] = path.read_text()
    _lint_json([str(files), "--fix", *context], work)
    fixed = {name: (files / name).read_text() for name in originals}
    fixed = {name: text for name, text in fixed.items() if text != originals[name]}
    again = _lint_json([str(files), *context], work)
    after: dict[str, list[dict[str, Any]]] = {name: [] for name in fixed}
    for finding in again["findings"]:
        after.setdefault(Path(finding["file"]).name, []).append(finding)
    config, _ = load_config_file(None, work)
    facts = load_cluster_facts("sample") if context else ClusterFacts.empty()
    # as the run saw them: the DRA objects and KServe runtimes and configs of every file (linter.cmd_lint)
    claims, served = DraCollector(), KServeCollector()
    for name, text in originals.items():
        claims.add(text, name)
        served.add(text, name)
    dra_inputs, kserve = claims.inputs(), served.view()
    before = {name: lint_text(originals[name], name, config, facts, fixes=True, dra_inputs=dra_inputs,
                              kserve=kserve) for name in fixed}
    return _Run(originals, fixed, before, after)


def test_some_files_are_fixed(run: _Run) -> None:
    assert len(run.fixed) >= 10, sorted(run.fixed)


def test_fixes_touch_only_the_lines_they_must(run: _Run) -> None:
    for name, text in run.fixed.items():
        changed = changed_original_lines(run.originals[name], text)
        allowed = {f.line for f in run.before[name].findings if f.finding.fix}
        assert len(changed) <= MAX_CHANGED, f"{name}: {len(changed)} original lines changed: {changed}"
        assert set(changed) <= allowed, f"{name}: lines {sorted(set(changed) - allowed)} changed, no fix is there"


def test_fixed_files_read_as_the_originals_plus_the_patch(run: _Run) -> None:
    for name, text in run.fixed.items():
        result = run.before[name]
        original = run.originals[name]
        layout = Layout(original)
        expected = _documents(original)
        for index, ops in result.patches().items():
            position = layout.segments.index(result.segments[index])
            expected[position] = jsonpatch.apply_patch(expected[position], [op.to_dict() for op in ops])
        assert _documents(text) == expected, name


def test_fixed_files_lint_without_the_fixed_findings(run: _Run) -> None:
    """No fixed finding comes back, and nothing fixable is left.  A finding the fix could not cover may
    stay at the same place with its own message: a CUDA image steered off the node whose driver cannot
    run it still needs the others' compatibility mode (a warning without a fix), which the fixed
    finding already named."""
    for name in run.fixed:
        fixed_before = {(f.finding.rule, f.finding.path, f.finding.message)
                        for f in run.before[name].findings if f.finding.fix}
        left = [f for f in run.after[name] if f["fix"] or (f["rule"], f["path"], f["message"]) in fixed_before]
        assert left == [], f"{name}: {left}"
