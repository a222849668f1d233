"""A container's command and args within fixed bounds (policies.command_words)."""

from __future__ import annotations

from policies.command_words import MAX_WORD_CHARS, MAX_WORDS, all_words, leading_words


def test_leading_words_keep_the_strings_within_the_bounds() -> None:
    container = {"command": ["sh", "-c", 7, None], "args": ["x" * (MAX_WORD_CHARS + 5)]}
    assert leading_words(container) == ["sh", "-c", "x" * MAX_WORD_CHARS]
    assert leading_words({"args": ["a"] * MAX_WORDS + ["late"]}) == ["a"] * MAX_WORDS
    assert leading_words({"command": "not a list"}) == [] and leading_words("not a mapping") == []


def test_all_words_or_none() -> None:
    assert all_words({"command": ["mpirun"], "args": ["-N", "1"]}) == ["mpirun", "-N", "1"]
    assert all_words({"args": ["a"] * (MAX_WORDS + 1)}) is None
    assert all_words({"args": ["a", 1]}) is None
    assert all_words({"args": ["x" * (MAX_WORD_CHARS + 1)]}) is None
    assert all_words({}) == []
