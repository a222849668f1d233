"""The shared HTML look: escaped text, self-contained pages, and a page Chromium really draws."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuguard import htmlreport as h
from tests.support.browser import ink, render


def test_text_is_escaped_everywhere() -> None:
    hostile = '<script>alert("x")</script> & \'q\''
    page = h.page(hostile, hostile, h.section(hostile, h.table([hostile], [[h.escape(hostile)]], caption=hostile))
                  + h.badge(hostile, "error") + h.tiles([(hostile, hostile, "warning")]))
    assert "<script>" not in page
    assert page.count("&lt;script&gt;") == 10  # title, heading, subtitle, section, th, td, caption, badge, tile x2


def test_a_page_is_self_contained() -> None:
    page = h.page("t", "s", h.section("x", "<p>y</p>", anchor="x"))
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert not re.search(r"""(src|href)\s*=|@import|url\(|<script|<link""", page, re.IGNORECASE)


def test_unknown_tile_levels_fall_back_to_muted() -> None:
    assert 'class="tile muted"' in h.tiles([("a", "1", "bogus")])


@pytest.mark.integration
def test_chromium_draws_every_element(tmp_path: Path) -> None:
    body = h.tiles([("errors", "3", "error"), ("warnings", "1", "warning"), ("ok", "0", "ok")])
    body += h.section("Table", h.table(["a", "b"], [[h.badge("error", "error"), "x"], [h.badge("ok", "ok"), "y"]],
                                       caption="caption"))
    page = tmp_path / "page.html"
    page.write_text(h.page("gpuguard", "a test page", body))
    png = tmp_path / "page.png"
    render(page, png, (1000, 700))
    drawn = ink(png)
    assert drawn.size == (1000, 700)
    assert drawn.share > 0.02 and drawn.colours > 20  # text, borders, tiles and badges in several colours
