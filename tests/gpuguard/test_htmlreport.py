"""The shared HTML look: escaped text, whole offline pages, cells passed through, and a page Chromium really draws."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuguard import htmlreport as h
from gpuguard.htmlreport import badge, escape, page, section, table, tiles
from tests.support.browser import ink, render

NASTY = '<b onclick="x()">&\'</b>'


def test_escape_covers_text_and_attributes() -> None:
    assert escape(NASTY) == "&lt;b onclick=&quot;x()&quot;&gt;&amp;&#x27;&lt;/b&gt;"
    assert escape(42) == "42"


def test_page_is_a_whole_offline_document() -> None:
    doc = page(NASTY, NASTY, "<p>body</p>")
    assert doc.startswith("<!DOCTYPE html>") and doc.rstrip().endswith("</html>")
    assert '<meta charset="utf-8">' in doc and "<style>" in doc and "<p>body</p>" in doc
    assert NASTY not in doc and escape(NASTY) in doc
    lowered = doc.lower()
    assert not re.search(r"(src=|href=|url\(|@import|<script|<link)", lowered)


def test_section_anchor_is_a_safe_id() -> None:
    html = section("ml/big <train>", "<p>x</p>", anchor='pod-ml/big "train"')
    assert 'id="pod-ml-big-train-"' in html and "<h2>ml/big &lt;train&gt;</h2>" in html and "<p>x</p>" in html


def test_table_escapes_headers_and_caption_not_cells() -> None:
    html = table(["a<b", "c"], [["<code>x</code>", "1"]], caption="n < m")
    assert "<th>a&lt;b</th>" in html and "<td><code>x</code></td>" in html and "n &lt; m" in html


def test_badges_and_tiles_escape_and_fall_back_to_muted() -> None:
    assert badge("<x>", "error") == '<span class="badge error">&lt;x&gt;</span>'
    assert 'class="badge muted"' in badge("y", "bogus")  # type: ignore[arg-type]
    html = tiles([("GPUs <free>", "3 / 8", "ok"), ("idle", "2", "nope")])
    assert "GPUs &lt;free&gt;" in html and 'class="tile ok"' in html and 'class="tile muted"' in html


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
