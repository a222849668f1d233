"""Terminal text shared by the text reports."""

from __future__ import annotations

from gpuguard.terminal import Paint, plural


def test_plural_counts_nouns_but_not_info() -> None:
    assert [plural(1, "error"), plural(2, "error"), plural(0, "input error"), plural(3, "info")] == [
        "1 error", "2 errors", "0 input errors", "3 info"]


def test_paint_wraps_only_when_enabled() -> None:
    assert Paint(True)("31", "error") == "\x1b[31merror\x1b[0m"
    assert Paint(False)("31", "error") == "error"
