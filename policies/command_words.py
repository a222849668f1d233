"""A container's own command and args, read within fixed bounds.

Every rule that reads a command meets user strings, so each reading is bounded: at most
``MAX_WORDS`` words of at most ``MAX_WORD_CHARS`` characters.  Two readings: the words as far as
the bound (what a scan for a word may look at), and all of them or none (what a parser of one
launch needs: past the bound it cannot know what the rest says).
"""

from __future__ import annotations

from typing import Any

from policies.shapes import as_dict, as_list

MAX_WORDS = 256
MAX_WORD_CHARS = 65536


def leading_words(container: Any) -> list[str]:
    """The string words among the first ``MAX_WORDS`` of command and args, each cut to
    ``MAX_WORD_CHARS`` characters."""
    c = as_dict(container)
    words = [*as_list(c.get("command")), *as_list(c.get("args"))][:MAX_WORDS]
    return [w[:MAX_WORD_CHARS] for w in words if isinstance(w, str)]


def all_words(container: Any) -> list[str] | None:
    """Every word of command and args, or None when there are more than ``MAX_WORDS``, one is not
    a string or one is longer than ``MAX_WORD_CHARS``."""
    c = as_dict(container)
    words = [*as_list(c.get("command")), *as_list(c.get("args"))]
    if len(words) > MAX_WORDS or not all(isinstance(w, str) and len(w) <= MAX_WORD_CHARS for w in words):
        return None
    return words
