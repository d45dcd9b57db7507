"""Untrusted text (model output, log lines, hostnames, labels) made safe for XML and for annotation Markdown."""

from __future__ import annotations

import html
import re
import string
import textwrap

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Everything outside XML 1.0's Char production: C0 controls except tab/LF/CR, surrogates, U+FFFE/U+FFFF.
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# ASCII punctuation that Markdown, GFM tables or autolinks give a meaning to; '<', '>', '&' and '"' become entities.
_MARKDOWN_PUNCTUATION = set(string.punctuation) - set("<>&\"',;/=?%@$^")
_HTML_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;"}


def xml_text(text: object) -> str:
    """Drop ANSI colour codes and show characters XML cannot hold as visible escapes such as ``\\x1b``."""
    return _XML_INVALID.sub(lambda match: ascii(match.group())[1:-1], _ANSI_ESCAPE.sub("", str(text)))


def cut_marker(cut: int, whole: str | None) -> str:
    """What a cut says: how much went and where the whole text is."""
    return f"[{cut:,} characters cut" + (f"; the whole text is in {whole}]" if whole else "]")


def cut_head(text: str, limit: int, whole: str | None) -> str:
    """The last ``limit`` characters of ``text`` (the end of a log explains a failure), led by what was cut."""
    if len(text) <= limit:
        return text
    return f"{cut_marker(len(text) - limit, whole)}\n{text[-limit:]}"


def one_line(text: object, limit: int = 300, whole: str | None = "results.json") -> str:
    """Collapse whitespace to single spaces, for messages and table cells; past ``limit`` characters it is cut and
    says so (and where the whole text is)."""
    line = " ".join(xml_text(text).split())
    return line if len(line) <= limit else f"{line[:limit]}… {cut_marker(len(line) - limit, whole)}"


def picture_text(text: object, width: int) -> str:
    """Text as an image shows it: whole, wrapped at ``width`` characters (a longer word broken), so it fits its place
    by construction; never cut, since a cut marker's "the whole text is in results.json" is no help in a picture.
    '$' is escaped: matplotlib would start mathtext at it."""
    return "\n".join(line.replace("$", r"\$") for line in textwrap.wrap(" ".join(xml_text(text).split()), width))


def markdown_text(text: object, limit: int = 300, whole: str | None = "results.json") -> str:
    """One line of untrusted text that renders literally in Markdown: no HTML, links, emphasis or table breaks."""
    return "".join(
        _HTML_ENTITIES.get(ch) or (f"\\{ch}" if ch in _MARKDOWN_PUNCTUATION else ch)
        for ch in one_line(text, limit, whole)
    )


def preformatted(text: object, limit: int | None = None, whole: str | None = None) -> str:
    """Untrusted multi-line text as an HTML ``<pre>`` block, which Markdown leaves alone and cannot be closed early;
    past ``limit`` characters only its end is kept, led by what was cut."""
    body = xml_text(text)
    if limit is not None:
        body = cut_head(body, limit, whole)
    return f"<pre>{html.escape(body, quote=False)}</pre>"
