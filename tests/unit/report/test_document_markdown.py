"""report.md keeps text from the records text: whatever a record holds, a CommonMark parser (with GFM
tables) finds no HTML and no link in what the document made of it, and the report's own code spans
(`squeue -j <id>`) are written as before. markdown-it-py parses as CommonMark does (it is what the
dev tools' rich uses); Hypothesis builds the texts from the pieces that could make Markdown more
than text."""
from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from harness.report.document import _md_blocks, md_inline

PIECES = ["`", "``", "```", "\\", "\\`", "<", ">", "<img src=x onerror=alert(1)>", "<script>", "</p>", "<!--",
          "<?x", "<http://evil.example>", "<a href='`'>", "[", "]", "(", ")", "](", "[x]: javascript:alert(1)",
          "javascript:alert(1)", "![i](", "|", "---", "\n", "\r", "\n\n", "    ", "- ", "1. ", "# ", "> ", "*", "_",
          "&", "&lt;", "&#60;", "x", "id", " ", ":", "=", '"', "'", "~~~"]
TEXT = st.lists(st.sampled_from(PIECES), max_size=24).map("".join)
PARSER = MarkdownIt("commonmark").enable("table")
OWN_HTML = re.compile(r"</?sub>|<details><summary>[^<>]*</summary>|</details>")


def _bad_tokens(md: str) -> list[str]:
    bad = []
    stack = list(PARSER.parse(md))
    while stack:
        t = stack.pop()
        if t.type in ("html_inline", "html_block") and not OWN_HTML.fullmatch(t.content.strip()):
            bad.append(f"{t.type}: {t.content!r}")
        if t.type in ("link_open", "image"):
            bad.append(f"{t.type}: {t.attrs}")
        stack.extend(t.children or [])
    return bad


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_no_record_text_becomes_html_or_a_link_in_any_block(text):
    for blocks in ([("p", text)], [("ul", [text, "next"])], [("h3", text)], [("small", text)],
                   [("table", (["a", text], [[text, "b"], ["c", text]]))], [("pre", text)],
                   [("details", (text, [("p", text)]))]):
        md = "\n".join(_md_blocks("t", blocks))
        assert _bad_tokens(md) == [], (blocks, md)


def test_the_reports_own_code_spans_and_plain_text_are_written_as_before():
    for text in ("`squeue -j <id>` and `kubectl logs -f <pod>`", "`recovery_s:<fault>`: fault injected → back",
                 "12.27 ± <0.01 s", "x > y & z", "a | b", "[0.5, 1.2] s"):
        assert md_inline(text) == text


def test_html_outside_code_is_escaped_and_code_stays_literal():
    assert md_inline("<img src=x onerror=alert(1)> `<b>`") == "&lt;img src=x onerror=alert(1)> `<b>`"
    # a backslash outside a code span escapes a backtick, as CommonMark reads it: the tag is outside code
    assert md_inline("\\`<img>`") == "\\`&lt;img>`"
    # a run of two does not close a run of one: no code span, the tag is text
    assert md_inline("`<img>``") == "`&lt;img>``"
    assert md_inline("[a](javascript:x)") == "[a]\\(javascript:x)"
    assert md_inline("[x]: javascript:x") == "\\[x]: javascript:x"
    assert md_inline("line\n|---|\n<b>") == "line |---| &lt;b>"


def test_a_yaml_block_cannot_be_closed_by_what_it_quotes():
    md = "\n".join(_md_blocks("t", [("pre", "a: 1\n```\n<script>x</script>\n````")]))
    assert md.startswith("`````yaml\n") and _bad_tokens(md) == []
