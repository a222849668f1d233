"""Judged precision on the fresh corpus (tests/corpus/fresh): every error and warning gpuguard reports
on it, in five cluster contexts, carries a verdict written by a person after reading the manifest —
``earned`` (the problem is real in that context) or ``false`` (a misreading) — and a one-line
``because``.  Precision per context and per rule is earned / (earned + false).

The judgements live in tests/fixtures/corpus-judged.json, one record per finding, keyed by
(context, file, document, rule, path): the file relative to tests/corpus/fresh, the index of the YAML
document in it (0-based, counting every document of the file), the rule id and the finding's JSON
pointer.  A finding repeated under the same key (the same rule at the same pointer) gets ``#2``,
``#3``… after its path.  Messages and severities are stored to read, not keyed: a rule may reword a
message or move between error and warning without losing its judgement.

    python -m tests.support.judge_corpus            # precision tables; unjudged and vanished findings
    python -m tests.support.judge_corpus --update   # add new findings as "verdict": null, drop
                                                    # vanished ones, keep every other judgement
    python -m tests.support.judge_corpus --markdown # the README tables

After ``--update`` fill in each ``null`` by hand (read the manifest, ``gpuguard rules ID``, and the
operator's source where it matters); tests/linter/test_corpus_judged.py fails while any finding is
unjudged, while a judged one has vanished, and when a context's precision falls below its floor.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import CORPUS, FIXTURES, ROOT

FRESH = CORPUS / "fresh"
JUDGED = FIXTURES / "corpus-judged.json"
# Each judged corpus and its judgements: ``fresh`` (what the misreadings were found and fixed on),
# ``holdout`` (gathered after those fixes; its first-contact misreadings were fixed in turn) and
# ``holdout2`` (gathered after those; three of its classes fixed in turn) and ``holdout3`` (gathered
# after those fixes, from repositories in no other corpus; two classes fixed in turn) and ``holdout4``
# and ``holdout5`` (the same, after those fixes; both judged as first linted, nothing changed between),
# ``holdout6`` (after the holdout5 fixes, judged as first linted), ``holdout7`` (after holdout6, from
# repositories in no other corpus, judged as first linted) ``holdout8`` (the same, after holdout7's fixes)
# ``holdout9`` (the same, after holdout8's), ``holdout10`` (the same, after holdout9's), ``holdout11``
# (the same, after holdout10's), ``holdout12`` (gathered with holdout11 unchanged; two classes fixed in turn)
# ``holdout13`` (the same, after holdout12's), ``holdout14`` (the same, after holdout13's) and ``holdout15``
# (gathered with holdout14; two classes fixed in turn) ``holdout16`` (after holdout15's fixes)
# ``holdout17`` (after holdout16's), ``holdout18`` (after gpu-shared-memory began to ask what a
# container runs) and ``holdout19`` (gathered after holdout18, the engine unchanged).  A held-out corpus lives in tests/corpus/<name> and is judged in
# tests/fixtures/corpus-<name>-judged.json.
HOLDOUT_NAMES: tuple[str, ...] = ("holdout", *(f"holdout{n}" for n in range(2, 20)))
CORPORA: dict[str, tuple[Path, Path]] = {
    "fresh": (FRESH, JUDGED),
    **{name: (CORPUS / name, FIXTURES / f"corpus-{name}-judged.json") for name in HOLDOUT_NAMES},
}
CLUSTERS = FIXTURES / "clusters"
README = ROOT / "README.md"
JUDGED_SEVERITIES = ("error", "warning")
VERDICTS = ("earned", "false")

# The five contexts: the extra `gpuguard lint` arguments of each, relative to the repository.
CONTEXTS: dict[str, list[str]] = {
    "none": [],
    "sample": ["--cluster", "sample"],
    "eks": ["--cluster", "tests/fixtures/clusters/judged/eks-p5-g5.yaml"],
    "gke": ["--cluster", "tests/fixtures/clusters/gke.yaml", "--config", "tests/fixtures/clusters/gke-pools.yaml"],
    "onprem-mig": ["--cluster", "tests/fixtures/clusters/judged/onprem-mig-mixed.yaml"],
}
CONTEXT_TITLES = {
    "none": "no cluster facts",
    "sample": "`--cluster sample`",
    "eks": "EKS, p5/g5 node groups tainted `nvidia.com/gpu`",
    "gke": "GKE, A100/L4/T4/H100 pools",
    "onprem-mig": "on-prem, MIG mixed strategy",
}

Key = tuple[str, str, int, str, str]  # context, file, document, rule, path (with #n when repeated)


@dataclass(frozen=True)
class Finding:
    context: str
    file: str
    document: int
    rule: str
    path: str
    severity: str
    kind: str
    name: str
    message: str

    @property
    def key(self) -> Key:
        return (self.context, self.file, self.document, self.rule, self.path)


def document_starts(text: str) -> list[int]:
    """The 1-based line on which each YAML document of ``text`` starts (its ``---`` or first token)."""
    starts: list[int] = []
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, yaml.DocumentStartEvent) and event.start_mark is not None:
                starts.append(event.start_mark.line + 1)
    except yaml.YAMLError:
        pass  # documents before the error keep their starts; the linter reports the error itself
    return starts


def document_index(starts: Sequence[int], line: int | None) -> int:
    """Which document (0-based) holds ``line``: the last one starting at or before it."""
    if line is None or not starts:
        return 0
    index = 0
    for i, start in enumerate(starts):
        if start <= line:
            index = i
    return index


def lint(context: str, corpus: Path = FRESH) -> dict[str, Any]:
    """``gpuguard lint`` over ``corpus`` in ``context``, in a child process, as JSON.

    It runs offline, from an empty directory (no ``.gpuguard.yaml`` found upward from the working
    directory can change a context), with every path absolute."""
    args = [a if not a.startswith("tests/") else str(ROOT / a) for a in CONTEXTS[context]]
    cmd = [sys.executable, "-m", "gpuguard.cli", "lint", str(corpus), *args, "--offline", "--format", "json"]
    with tempfile.TemporaryDirectory() as cwd:
        env = {**os.environ, "NO_COLOR": "1"}
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1, 2) or not done.stdout.strip():
        raise RuntimeError(f"gpuguard lint ({context}) exited {done.returncode}: {done.stderr.strip()}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def findings(context: str, report: Mapping[str, Any], corpus: Path = FRESH) -> list[Finding]:
    """The report's errors and warnings as keyed findings (repeats of a key numbered #2, #3…)."""
    starts: dict[str, list[int]] = {}
    out: list[Finding] = []
    seen: Counter[tuple[str, str, int, str, str]] = Counter()
    for f in report["findings"]:
        if f["severity"] not in JUDGED_SEVERITIES:
            continue
        file = Path(f["file"]).resolve().relative_to(corpus.resolve()).as_posix()
        if file not in starts:
            starts[file] = document_starts((corpus / file).read_text(encoding="utf-8"))
        doc = document_index(starts[file], f.get("line"))
        base = (context, file, doc, f["rule"], f["path"])
        seen[base] += 1
        path = f["path"] if seen[base] == 1 else f"{f['path']}#{seen[base]}"
        out.append(Finding(context, file, doc, f["rule"], path, f["severity"], f.get("kind") or "",
                           f.get("name") or "", f["message"]))
    return out


def current(contexts: Iterable[str] = CONTEXTS, corpus: Path = FRESH) -> list[Finding]:
    return [f for c in contexts for f in findings(c, lint(c, corpus), corpus)]


def record_key(record: Mapping[str, Any]) -> Key:
    return (record["context"], record["file"], int(record["document"]), record["rule"], record["path"])


def load(path: Path = JUDGED) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    records: list[dict[str, Any]] = data["judgements"]
    return records


def merge(records: Sequence[Mapping[str, Any]], now: Sequence[Finding]) -> tuple[list[dict[str, Any]], list[Key], list[Key]]:
    """(the new records, the keys added, the keys dropped): one record per current finding, the
    verdict, ``because`` and ``class`` of an existing record kept, severity/kind/name/message
    refreshed; findings without a record get ``"verdict": null``."""
    old = {record_key(r): r for r in records}
    merged: list[dict[str, Any]] = []
    added: list[Key] = []
    for f in now:
        prior = old.get(f.key)
        if prior is None:
            added.append(f.key)
        record: dict[str, Any] = {
            "context": f.context, "file": f.file, "document": f.document, "rule": f.rule, "path": f.path,
            "severity": f.severity, "kind": f.kind, "name": f.name, "message": f.message,
            "verdict": prior.get("verdict") if prior else None,
            "because": prior.get("because", "") if prior else "",
        }
        if prior and prior.get("class"):
            record["class"] = prior["class"]
        merged.append(record)
    current_keys = {f.key for f in now}
    dropped = sorted(k for k in old if k not in current_keys)
    merged.sort(key=lambda r: (list(CONTEXTS).index(r["context"]) if r["context"] in CONTEXTS else 99, *record_key(r)[1:]))
    return merged, added, dropped


def write(records: Sequence[Mapping[str, Any]], path: Path = JUDGED, corpus: Path = FRESH) -> None:
    """Write the judgements atomically (a temporary file renamed over the old one)."""
    data = {
        "about": f"Verdicts on every error and warning of `gpuguard lint` over {corpus.relative_to(ROOT).as_posix()} "
                 "in each context; see tests/support/judge_corpus.py.",
        "contexts": CONTEXTS,
        "judgements": list(records),
    }
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


@dataclass(frozen=True)
class Tally:
    earned: int = 0
    false: int = 0
    unjudged: int = 0

    @property
    def precision(self) -> float | None:
        judged = self.earned + self.false
        return self.earned / judged if judged else None

    def add(self, verdict: str | None) -> Tally:
        if verdict == "earned":
            return Tally(self.earned + 1, self.false, self.unjudged)
        if verdict == "false":
            return Tally(self.earned, self.false + 1, self.unjudged)
        return Tally(self.earned, self.false, self.unjudged + 1)


def tallies(records: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Tally], dict[tuple[str, str], Tally]]:
    """(per context, per (context, rule)) tallies of the verdicts."""
    per_context: dict[str, Tally] = {c: Tally() for c in CONTEXTS}
    per_rule: dict[tuple[str, str], Tally] = {}
    for r in records:
        per_context[r["context"]] = per_context.get(r["context"], Tally()).add(r["verdict"])
        key = (r["context"], r["rule"])
        per_rule[key] = per_rule.get(key, Tally()).add(r["verdict"])
    return per_context, per_rule


def false_classes(records: Iterable[Mapping[str, Any]]) -> Counter[tuple[str, str, str]]:
    """How many false findings each (context, rule, class of misreading) has."""
    return Counter((r["context"], r["rule"], r.get("class") or "unclassified") for r in records if r["verdict"] == "false")


def _pct(t: Tally) -> str:
    p = t.precision
    return "–" if p is None else f"{p:.2f}"


def markdown(records: Sequence[Mapping[str, Any]]) -> str:
    """The README tables: precision per context, then per rule and context."""
    per_context, per_rule = tallies(records)
    lines = ["| context | earned | false | precision |", "| --- | ---: | ---: | ---: |"]
    for c, t in per_context.items():
        lines.append(f"| {CONTEXT_TITLES[c]} | {t.earned} | {t.false} | {_pct(t)} |")
    rules = sorted({rule for _, rule in per_rule})
    lines += ["", "| rule | " + " | ".join(CONTEXTS) + " |", "| --- |" + " ---: |" * len(CONTEXTS)]
    for rule in rules:
        cells = []
        for c in CONTEXTS:
            cell = per_rule.get((c, rule))
            cells.append("" if cell is None else f"{_pct(cell)} ({cell.earned}/{cell.earned + cell.false})")
        lines.append(f"| `{rule}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(records: Sequence[Mapping[str, Any]]) -> str:
    per_context, per_rule = tallies(records)
    out = ["precision of errors and warnings (earned / judged):"]
    for c, t in per_context.items():
        extra = f", {t.unjudged} unjudged" if t.unjudged else ""
        out.append(f"  {c:<11} {_pct(t):>5}  ({t.earned} earned, {t.false} false{extra})")
    out.append("per rule:")
    for (c, rule), t in sorted(per_rule.items(), key=lambda kv: (list(CONTEXTS).index(kv[0][0]), kv[0][1])):
        out.append(f"  {c:<11} {rule:<28} {_pct(t):>5}  ({t.earned}/{t.earned + t.false})")
    classes = false_classes(records)
    out.append("false findings by class of misreading:" + ("" if classes else " none"))
    if classes:
        for (c, rule, cls), n in sorted(classes.items(), key=lambda kv: (list(CONTEXTS).index(kv[0][0]), kv[0][1], kv[0][2])):
            out.append(f"  {c:<11} {rule:<28} {cls}: {n}")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.judge_corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="add new findings (verdict null), drop vanished ones")
    parser.add_argument("--markdown", action="store_true", help="print the README tables")
    parser.add_argument("--corpus", choices=list(CORPORA), default="fresh", help="which judged corpus (default: fresh)")
    args = parser.parse_args(argv)
    corpus, judged = CORPORA[args.corpus]
    records = load(judged) if judged.exists() else []
    if args.markdown:
        sys.stdout.write(markdown(records))
        return 0
    merged, added, dropped = merge(records, current(corpus=corpus))
    if args.update:
        write(merged, judged, corpus)
        records = merged
    for key in added:
        print(f"{'added' if args.update else 'unjudged'}: {' '.join(map(str, key))}")
    for key in dropped:
        print(f"{'dropped' if args.update else 'vanished'}: {' '.join(map(str, key))}")
    sys.stdout.write(report(merged if args.update else records))
    unjudged = sum(1 for r in merged if r["verdict"] not in VERDICTS)
    if unjudged:
        print(f"{unjudged} findings have no verdict yet: fill them in {judged.relative_to(ROOT)}")
    return 0 if not unjudged and not (dropped and not args.update) else 1


if __name__ == "__main__":
    sys.exit(main())
