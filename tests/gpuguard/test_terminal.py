"""Terminal text shared by the text reports."""

from __future__ import annotations

import pytest

from gpuguard.terminal import Paint, plural


def test_plural_counts_nouns_but_not_info() -> None:
    assert [plural(1, "error"), plural(2, "error"), plural(0, "input error"), plural(3, "info")] == [
        "1 error", "2 errors", "0 input errors", "3 info"]


def test_paint_wraps_only_when_enabled() -> None:
    assert Paint(True)("31", "error") == "\x1b[31merror\x1b[0m"
    assert Paint(False)("31", "error") == "error"


def test_wrap_counts_visible_characters_only() -> None:
    from gpuguard.terminal import NO_WRAP, wrap

    painted = Paint(True)("31", "error")
    text = f"{painted} " + " ".join(["word"] * 30)
    lines = wrap(text, 40, rest="    ")
    assert all(len(line.replace("\x1b[31m", "").replace("\x1b[0m", "")) <= 40 for line in lines)
    assert lines[0].startswith(painted) and all(line.startswith("    word") for line in lines[1:])
    assert wrap(text, NO_WRAP) == [text]
    assert wrap("a " + "x" * 50 + " b", 20) == ["a", "x" * 50, "b"]  # a long word is kept whole
    assert wrap("short", 40, "note: ", "      ") == ["note: short"]


@pytest.mark.parametrize(
    ("env", "choice", "tty", "expected"),
    [
        ({}, "auto", True, True),
        ({}, "auto", False, False),
        ({"NO_COLOR": "1"}, "auto", True, False),
        ({"NO_COLOR": ""}, "auto", True, True),
        ({"FORCE_COLOR": "1"}, "auto", False, True),
        ({"FORCE_COLOR": ""}, "auto", False, False),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, "auto", False, False),
        ({"TERM": "dumb"}, "auto", True, False),
        ({"NO_COLOR": "1"}, "always", False, True),
        ({"FORCE_COLOR": "1"}, "never", True, False),
    ],
)
def test_use_colour(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], choice: str, tty: bool, expected: bool) -> None:
    import io

    from gpuguard.terminal import use_colour

    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stream = io.StringIO()
    stream.isatty = lambda: tty  # type: ignore[method-assign]
    assert use_colour(stream, choice) is expected
