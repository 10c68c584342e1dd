"""Views of a CUDA source as the preprocessor sees it: lines spliced, comments blanked.

Every view keeps the text's length and its newlines, so an index or a line number in a view is
the same in the student's file. Used by the include policy, the declaration parser and the
static checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A backslash, optional spaces (GCC and EDG accept them, with a warning), then a newline.
_SPLICE = re.compile(r"\\[ \t]*\r?\n")
_RAW_PREFIXES = frozenset({"R", "u8R", "uR", "UR", "LR"})
_CHAR_PREFIXES = frozenset({"", "u8", "u", "U", "L"})


@dataclass(frozen=True)
class LogicalLine:
    """A line after splicing: its text in one view and the physical line (1-based) it starts on."""

    number: int
    text: str


def splice(source: str) -> tuple[str, list[int]]:
    """Join backslash-continued lines; return the text and, per character, its physical line."""
    out: list[str] = []
    lines: list[int] = []
    line = 1
    pos = 0
    for match in _SPLICE.finditer(source):
        chunk = source[pos : match.start()]
        for ch in chunk:
            out.append(ch)
            lines.append(line)
            if ch == "\n":
                line += 1
        line += 1  # the newline the splice removed
        pos = match.end()
    for ch in source[pos:]:
        out.append(ch)
        lines.append(line)
        if ch == "\n":
            line += 1
    return "".join(out), lines


def blank_comments(text: str, *, strings: bool = True, blank_strings: bool = False) -> str:
    """Replace comments by spaces (newlines kept). With `strings`, quotes start literals whose
    contents are skipped (and blanked with `blank_strings`); without, quotes are plain text, which
    gives a second, differently-wrong view for the include policy to cross-check.
    """
    out = list(text)
    i, n = 0, len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        ch = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if ch == "/" and nxt == "/":
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif ch == "/" and nxt == "*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif strings and ch == '"':
            raw = _word_before(text, i) in _RAW_PREFIXES
            end = _raw_string_end(text, i) if raw else _quoted_end(text, i, '"')
            if blank_strings:
                blank(i + 1, end - 1)
            i = end
        elif strings and ch == "'" and _word_before(text, i) in _CHAR_PREFIXES:
            # After a digit or another word, a quote is a C++14 digit separator (1'000).
            end = _quoted_end(text, i, "'")
            if blank_strings:
                blank(i + 1, end - 1)
            i = end
        else:
            i += 1
    return "".join(out)


def _word_before(text: str, i: int) -> str:
    """The run of identifier characters (or digits) that ends right before index i."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_") and i - j < 8:
        j -= 1
    return text[j:i]


def _quoted_end(text: str, i: int, quote: str) -> int:
    """Index after the closing quote; a literal ends at an unescaped newline at the latest."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n":
            return j
        j += 1
    return n


def _raw_string_end(text: str, i: int) -> int:
    """R"delim( ... )delim": index after the closing quote (or the end of the text)."""
    open_paren = text.find("(", i + 1, i + 18)
    if open_paren < 0:
        return _quoted_end(text, i, '"')
    delim = text[i + 1 : open_paren]
    close = text.find(f'){delim}"', open_paren + 1)
    return len(text) if close < 0 else close + len(delim) + 2


@dataclass(frozen=True)
class SourceViews:
    """The views of one source the checks need, all aligned with the spliced text."""

    spliced: str
    line_of: list[int]  # physical line (1-based) of each character of `spliced`
    code: str  # comments blanked, string literals kept
    bare: str  # comments and the contents of string and character literals blanked
    quoteless: str  # comments blanked treating quotes as plain text (a cross-check)

    @classmethod
    def of(cls, source: str) -> SourceViews:
        # NVRTC takes a lone carriage return as a space (not as a newline), and a byte-order
        # mark at the start as nothing: `\r#include "/etc/passwd"` is a directive to it, so
        # both must be white space here too, or a directive hides from every check.
        text = source.replace("\r\n", "\n").replace("\r", " ").replace("\ufeff", " ")
        spliced, line_of = splice(text)
        return cls(
            spliced=spliced,
            line_of=line_of,
            code=blank_comments(spliced),
            bare=blank_comments(spliced, blank_strings=True),
            quoteless=blank_comments(spliced, strings=False),
        )

    def line_at(self, index: int) -> int:
        if index < len(self.line_of):
            return self.line_of[index]
        if not self.line_of:
            return 1
        return self.line_of[-1] + (1 if self.spliced.endswith("\n") else 0)

    def lines(self, view: str) -> list[LogicalLine]:
        """The logical lines of one view (a string aligned with `spliced`)."""
        out: list[LogicalLine] = []
        start = 0
        for part in view.split("\n"):
            out.append(LogicalLine(self.line_at(start), part))
            start += len(part) + 1
        return out
