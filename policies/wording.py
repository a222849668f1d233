"""How every message words the same things: counted nouns, did-you-mean suggestions, sentences.

One place, so that every face says them alike: ``plural(1, "error")`` is "1 error" and
``plural(2, "error")`` "2 errors" wherever a count is printed; ``suggest`` ranks the names a typo may
have meant the same way for rule ids, cluster names, RuntimeClasses or DRA names (a name the typo
is the start of before one merely similar: ``gpu-taint`` means ``gpu-taint-not-tolerated``, not
``gpu-topology-alignment``); ``sentence`` joins two sentences with a full stop and a space.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

# Nouns counted without a plural form of their own.
UNCOUNTED = frozenset({"info"})
_ES_ENDINGS = ("s", "x", "z", "ch", "sh")


def plural_form(word: str) -> str:
    """English plural of a lower-case noun or an upper-case acronym (GPU → GPUs)."""
    if word in UNCOUNTED:
        return word
    if word.endswith(_ES_ENDINGS):
        return word + "es"
    if len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 error``, ``2 errors``, ``0 errors``; ``many`` for irregular plurals; ``info`` is not counted
    as a noun (``2 info``)."""
    return f"{n} {word}" if n == 1 else f"{n} {many if many is not None else plural_form(word)}"


def noun(n: int, word: str, many: str | None = None) -> str:
    """The noun alone, in the form ``n`` takes (``node`` or ``nodes``)."""
    return word if n == 1 else (many if many is not None else plural_form(word))


# Names no longer than this are compared; longer ones are no typo of a short name (and comparing
# them costs time proportional to their length).
MAX_COMPARED = 253
MIN_PREFIX = 3


def _plain(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def suggest(name: str, candidates: Iterable[str], *, limit: int = 1, cutoff: float = 0.6,
            spread: float | None = None) -> list[str]:
    """The candidates ``name`` most likely meant, best first, at most ``limit`` of them.

    Ranked: the same name in another case or with other separators (``Sample`` → ``sample``,
    ``mutate_templates`` → ``mutateTemplates``); then candidates that start
    with ``name`` or that ``name`` starts with (at least MIN_PREFIX characters: ``gpu-taint`` →
    ``gpu-taint-not-tolerated``); then candidates at least ``cutoff`` similar (difflib's ratio,
    case-insensitive).  Within each group the more similar first, then by name.  ``spread``: keep
    only similar candidates within ``spread`` of the best ratio.
    """
    if len(name) > MAX_COMPARED or not name:
        return []
    lowered = name.lower()
    pool = sorted({c for c in candidates if c and c != name and len(c) <= MAX_COMPARED})
    if not pool:
        return []
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(lowered)

    def ratio(candidate: str) -> float:
        matcher.set_seq1(candidate.lower())
        return matcher.ratio()

    plain = _plain(name)
    same = [c for c in pool if _plain(c) == plain]
    prefixed = [
        c for c in pool
        if c not in same and min(len(c), len(name)) >= MIN_PREFIX
        and (c.lower().startswith(lowered) or lowered.startswith(c.lower()))
    ]
    prefixed.sort(key=lambda c: (-ratio(c), c))
    taken = set(same) | set(prefixed)
    scored = sorted(((ratio(c), c) for c in pool if c not in taken), key=lambda rc: (-rc[0], rc[1]))
    similar = [(r, c) for r, c in scored if r >= cutoff]
    if spread is not None and similar:
        best = similar[0][0]
        similar = [(r, c) for r, c in similar if r >= best - spread]
    return [*same, *prefixed, *(c for _, c in similar)][:limit]


def did_you_mean(suggestions: Sequence[str], quote: bool = False, aside: str = "") -> str:
    """``did you mean a?`` / ``did you mean a, b or c?`` / ``did you mean a (aside)?``; "" without
    suggestions."""
    if not suggestions:
        return ""
    names = [repr(s) if quote else s for s in suggestions]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"did you mean {listed}{f' ({aside})' if aside else ''}?"


def sentence(first: str, then: str) -> str:
    """``first`` and ``then`` as two sentences: a full stop after ``first`` unless it ends one
    already, and a space."""
    head = first.rstrip()
    if not then:
        return head
    if not head:
        return then
    return f"{head}{'' if head.endswith(('.', '!', '?')) else '.'} {then}"
