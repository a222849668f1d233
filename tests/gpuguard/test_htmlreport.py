"""The shared HTML look: whole offline documents, text always escaped, cells passed through."""

from __future__ import annotations

import re

from gpuguard.htmlreport import badge, escape, page, section, table, tiles

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
