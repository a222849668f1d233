"""The SARIF rule catalogue: schema-valid, every rule's ``helpUri`` at its own README anchor, and its
docstring as Markdown that a CommonMark parser (GitHub's is CommonMark with extensions) reads as
the docstring meant: code blocks, code spans, lists and emphasis, and no stray markup."""

from __future__ import annotations

import json
import re
import textwrap
import tomllib
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from gpuguard import sarif
from policies.registry import RULES
from policies.rule import rule_doc
from tests.support.paths import ROOT, SARIF_SCHEMA

README = (ROOT / "README.md").read_text()
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
RST_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def catalogue() -> dict[str, dict[str, Any]]:
    log = sarif.log([], [])
    return {r["id"]: r for r in log["runs"][0]["tool"]["driver"]["rules"]}


def test_the_log_validates_against_the_sarif_schema() -> None:
    import jsonschema  # type: ignore[import-untyped]

    jsonschema.validate(sarif.log([], []), json.loads(SARIF_SCHEMA.read_text()))
    for rule in catalogue().values():
        assert set(rule["help"]) == {"text", "markdown"} and rule["help"]["text"] and rule["help"]["markdown"]


# --- helpUri ------------------------------------------------------------------------------------

def test_every_rule_has_a_readme_anchor_that_its_help_uri_names() -> None:
    rules = catalogue()
    assert list(rules) == list(RULES)
    anchors = re.findall(r'<a id="([^"]+)"></a>', README)
    for rule_id, rule in rules.items():
        assert rule["helpUri"] == f"{sarif.REPOSITORY}/blob/v{VERSION}/README.md#rule-{rule_id}"
        fragment = rule["helpUri"].rsplit("#", 1)[1]
        assert anchors.count(fragment) == 1, fragment
        # in the rule's own row of the Rules table
        row = re.search(rf'^\| <a id="{re.escape(fragment)}"></a>`([a-z-]+)` \|', README, re.MULTILINE)
        assert row is not None and row.group(1) == rule_id
    assert {a for a in anchors if a.startswith("rule-")} == {f"rule-{r}" for r in RULES}


def test_the_repository_is_the_one_the_readme_and_chart_name() -> None:
    assert f"pipx install git+{sarif.REPOSITORY}@v{VERSION}" in README
    assert f"git clone {sarif.REPOSITORY} " in README
    chart = (ROOT / "deploy" / "helm" / "gpuguard" / "Chart.yaml").read_text()
    assert f"home: {sarif.REPOSITORY}\n" in chart


def test_an_uninstalled_tree_points_at_main() -> None:
    assert sarif.help_uri("gpu-limit-missing", sarif.UNKNOWN_VERSION) == (
        f"{sarif.REPOSITORY}/blob/main/README.md#rule-gpu-limit-missing"
    )
    assert sarif.help_uri("gpu-limit-missing", "1.2.3").endswith("/blob/v1.2.3/README.md#rule-gpu-limit-missing")


# --- help.markdown ------------------------------------------------------------------------------

def test_a_docstring_converts_exactly() -> None:
    doc = textwrap.dedent("""\
        gpu-x: a *thing* is wrong with ``a.b``.

        The API server rejects it ("a <b> [c](d)",
        ``f(x)`` and ``a`b``).

        * **first** item, with
          a continuation;
        * second ``item``.

        Failing::

            resources:
              requests: {nvidia.com/gpu: 1}   # ```

        Passing (a note)::

            x: 1

        Fix: add ``limits``.""")
    assert sarif.docstring_markdown(doc) == textwrap.dedent("""\
        gpu-x: a *thing* is wrong with `a.b`.

        The API server rejects it ("a \\<b\\> \\[c\\](d)", `f(x)` and ``a`b``).

        - **first** item, with a continuation;
        - second `item`.

        Failing:

        ````
        resources:
          requests: {nvidia.com/gpu: 1}   # ```
        ````

        Passing (a note):

        ```
        x: 1
        ```

        Fix: add `limits`.""")


def test_remediation_markdown_escapes_what_is_not_markup() -> None:
    text = "add it to podTemplatePaths ({kind, template: <JSON pointer, * for any key>}); drop `request`"
    assert sarif.inline_markdown(text, sarif._MD_LITERAL, emphasis=False) == (
        "add it to podTemplatePaths ({kind, template: \\<JSON pointer, \\* for any key\\>}); drop `request`"
    )
    assert sarif.inline_markdown("NVIDIA_VISIBLE_DEVICES and _x_", sarif._MD_LITERAL, emphasis=False) == (
        "NVIDIA_VISIBLE_DEVICES and \\_x\\_"
    )


def _inline_tokens(tokens: list[Token]) -> list[Token]:
    return [child for t in tokens if t.type == "inline" for child in (t.children or [])]


def _rst_literals(text: str) -> list[str]:
    return [" ".join(m.split()) for m in RST_LITERAL.findall(text)]


def _split(doc: str) -> tuple[str, list[str]]:
    """The docstring's prose and its ``::`` blocks, read the simple way these docstrings write them:
    the lines indented further than the top-level paragraph that ends in ``::``, dedented."""
    prose: list[str] = []
    blocks: list[str] = []
    lines = doc.split("\n")
    i = 0
    while i < len(lines):
        prose.append(lines[i])
        if lines[i].rstrip().endswith("::"):
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" ")):
                j += 1
            blocks.append(textwrap.dedent("\n".join(lines[i + 1 : j])).strip("\n"))
            i = j
        else:
            i += 1
    return "\n".join(prose), blocks


@pytest.mark.parametrize("rule_id", list(RULES))
def test_help_markdown_renders_as_the_docstring_means(rule_id: str) -> None:
    doc, module = rule_doc(RULES[rule_id]), RULES[rule_id]
    markdown = catalogue()[rule_id]["help"]["markdown"]
    tokens = MarkdownIt("commonmark").parse(markdown)
    kinds = [t.type for t in tokens]
    inline = _inline_tokens(tokens)
    # no HTML, no links: text the parser would take for markup was escaped
    assert not {"html_block", "html_inline", "link_open", "image", "heading_open", "hr"} & {
        t.type for t in [*tokens, *inline]
    }
    # literal blocks are fenced code, verbatim
    prose, blocks = _split(doc)
    fences = [t.content.rstrip("\n") for t in tokens if t.type == "fence"]
    assert fences == blocks and blocks and "code_block" not in kinds
    # ``literals`` are code spans, and nothing of rST's markup is left in the text
    code = [" ".join(t.content.split()) for t in inline if t.type == "code_inline"]
    assert code == _rst_literals(prose) + [m for m in re.findall(r"`([^`]+)`", module.REMEDIATION)]
    for t in inline:
        if t.type == "text":
            assert "``" not in t.content and not t.content.endswith("::"), t.content
    # bullets are list items; emphasis and strong are what the docstring marks
    bullets = re.findall(r"^\* ", prose, re.MULTILINE)
    assert kinds.count("list_item_open") == len(bullets)
    prose = RST_LITERAL.sub("x", prose)
    assert sum(t.type == "strong_open" for t in inline) == len(re.findall(r"\*\*[^*\s][^*]*\*\*", prose)) + 1
    assert sum(t.type == "em_open" for t in inline) == len(re.findall(r"(?<![*\w])\*[^*\s][^*]*?\*(?![*\w])", prose))
    assert markdown.endswith(f"**Remediation:** {sarif.inline_markdown(module.REMEDIATION, sarif._MD_LITERAL, False)}")
