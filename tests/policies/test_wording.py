"""policies.wording: counted nouns, did-you-mean ranking and sentence joins, and that every face
uses them (no hand-made plural or suggestion elsewhere in the source)."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator

import pytest

from policies.registry import RULES
from policies.wording import did_you_mean, noun, plural, sentence, suggest
from tests.support.paths import ROOT

SOURCE_PACKAGES = ("policies", "linter", "webhook", "certs", "audit", "whypending", "gpuguard")


@pytest.mark.parametrize(("n", "word", "expected"), [
    (0, "error", "0 errors"), (1, "error", "1 error"), (2, "error", "2 errors"), (1, "info", "1 info"),
    (3, "info", "3 info"), (2, "GPU", "2 GPUs"), (2, "class", "2 classes"), (2, "policy", "2 policies"),
    (2, "day", "2 days"), (1, "node", "1 node"), (2, "input error", "2 input errors"),
])
def test_plural(n: int, word: str, expected: str) -> None:
    assert plural(n, word) == expected


def test_plural_irregular_and_noun_alone() -> None:
    assert plural(2, "was", "were") == "2 were" and plural(1, "was", "were") == "1 was"
    assert noun(1, "node") == "node" and noun(4, "node") == "nodes" and noun(0, "node") == "nodes"


def test_a_prefix_comes_before_a_merely_similar_name() -> None:
    # The case: gpu-topology-alignment is about as similar to gpu-taint as
    # gpu-taint-not-tolerated by difflib's ratio, but only the latter starts with it.
    assert suggest("gpu-taint", RULES, limit=3, cutoff=0.5)[0] == "gpu-taint-not-tolerated"
    assert suggest("gpu-limit-missin", RULES, cutoff=0.75) == ["gpu-limit-missing"]
    assert suggest("gpu-limt-missing", RULES, cutoff=0.75) == ["gpu-limit-missing"]


def test_case_differences_and_near_misses() -> None:
    assert suggest("Sample", ["sample"], cutoff=0.8) == ["sample"]
    assert suggest("mutate_templates", ["mutate", "mutateTemplates"]) == ["mutateTemplates"]  # separators, case
    assert suggest("sampel", ["sample"], cutoff=0.8) == ["sample"]
    assert suggest("cluster.yaml", ["sample"], cutoff=0.8) == []
    assert suggest("zzz", RULES) == []
    assert suggest("", RULES) == []
    assert suggest("x" * 10_000, RULES) == []  # bounded: no ratio over a huge name
    assert suggest("gpu", ["gpu"]) == []  # the name itself is no suggestion


def test_spread_keeps_only_the_near_best() -> None:
    pool = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb"]
    assert suggest("nvidia.com/gpus", pool, limit=3, spread=0.05)[0] == "nvidia.com/gpu"
    assert "nvidia.com/mig-1g.10gb" not in suggest("nvidia.com/gpus", pool, limit=3, spread=0.05)


def test_did_you_mean() -> None:
    assert did_you_mean([]) == ""
    assert did_you_mean(["a"]) == "did you mean a?"
    assert did_you_mean(["a", "b"]) == "did you mean a or b?"
    assert did_you_mean(["a", "b", "c"]) == "did you mean a, b or c?"
    assert did_you_mean(["a"], quote=True) == "did you mean 'a'?"
    assert did_you_mean(["sample"], aside="the bundled one") == "did you mean sample (the bundled one)?"


def test_sentence() -> None:
    assert sentence("driver 470.256.02", "Note: x.") == "driver 470.256.02. Note: x."
    assert sentence("done.", "Note: x.") == "done. Note: x."
    assert sentence("why?", "Because.") == "why? Because."
    assert sentence("alone", "") == "alone"


def _sources() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text()) for pkg in SOURCE_PACKAGES for p in (ROOT / pkg).rglob("*.py")]


def test_one_suggestion_helper() -> None:
    offenders = [name for name, text in _sources()
                 if "get_close_matches" in text or ("SequenceMatcher" in text and name != "policies/wording.py")]
    assert offenders == []
    hand_made = [name for name, text in _sources() if name != "policies/wording.py" and "did you mean {" in text]
    assert hand_made == []




# Messages quoted from upstream code, word for word (so that they can be recognised or matched):
# the scheduler's (policies/pending/schedmsg.py) and the Go semver library's (policies/dra/cel/semver.py).
QUOTED = frozenset({"policies/pending/schedmsg.py", "policies/dra/cel/semver.py"})
HAND_PLURAL = re.compile(r"[A-Za-z](?<!http)\(s\)(?![}\w])|\{'s' if |\{'' if [^}]* else 's'\}")
# A count before a plural noun, in an f-string: "{n} errors" says "1 errors" when n is 1.  Not a
# count: a constant (NODE_LIMIT, always more than one) or a limit/budget/kind; the API server's
# validation messages ("Too many: 9: must have at most 8 items") are quoted as it words them.
COUNTED = re.compile(r"\{(?!(?:[A-Z_]+|budget|limit|kind)\})[^{}]+\} (?:more )?"
                     r"(?:errors|warnings|rules|items|objects|files|documents|nodes|pods)\b")


def _strings(text: str) -> Iterator[tuple[int, str]]:
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.STRING:
            yield token.start[0], token.string


def test_one_plural_helper() -> None:
    offenders = []
    for name, text in _sources():
        if name in QUOTED:
            continue
        for number, literal in _strings(text):
            if literal.startswith(('"' * 3, "'" * 3)) or "Too many: " in literal:  # docstrings; API server words
                continue
            if HAND_PLURAL.search(literal) or (literal[:2].lower() in ("f'", 'f"') and COUNTED.search(literal)):
                offenders.append(f"{name}:{number}: {literal}")
    assert offenders == []
