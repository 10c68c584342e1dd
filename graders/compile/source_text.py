"""Views of a CUDA source as the preprocessor sees it: lines spliced, comments blanked.

The one lexer of the compile stage: every check that reads the student's text (the
preprocessor view, the include and pragma rule, the declarations reader, the static checks)
reads these views and `code_tokens`, never its own scan. Every view keeps the text's length
and its newlines, so an index or a line number in a view is the same in the student's file.

The scanner reads literals as the C++ preprocessor does (translation phase 3): a quote after an
identifier starts a character or string literal (`X'/*'` is `X` then the literal `'/*'`), a
quote inside a number is a digit separator (`1'000`), the prefixes u8, u, U and L belong to the
literal they start, and R"d( ... )d" is a raw string (from C++11 on: under `-std=c++03` NVRTC
reads `R"(` as a name and a string). Lines are spliced before any of this, inside raw strings
too, as NVRTC does (it does not revert a splice there: `)`, a backslash-newline and `"` end a
raw string). A
scanner that read `X'/*'` as a digit separator and a comment hid the lines after it (a `#line`
directive among them) from every check. A line that starts inside a raw string is text, never
a directive (`R"(` ... `#include <vector>` ... `)"` is a string). All work is one pass over the
text (see `graders.compile.work`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graders.compile import work

# A backslash, optional spaces (GCC and EDG accept them, with a warning), then a newline.
_SPLICE = re.compile(r"\\[ \t]*\r?\n")
_STRING_PREFIXES = frozenset({"u8", "u", "U", "L"})
_RAW_PREFIXES = frozenset({"R", "u8R", "uR", "UR", "LR"})
# What the scanner stops at: a comment, an identifier, a pp-number or a quote. Each branch
# matches in one pass (the pp-number's repetition ends the pattern, so it never backtracks).
_LEXEME = re.compile(
    r"""(?P<comment>//|/\*)
      | (?P<ident>[A-Za-z_]\w*)
      | (?P<number>\.?\d(?:[eEpP][+-]|'\w|[\w.])*)
      | (?P<quote>["'])""",
    re.X | re.ASCII,  # NVRTC reads no other letters ($, é) as part of a name or a number
)
_STRING_BODY = re.compile(r'[^"\\\n]*(?:\\.[^"\\\n]*)*')
_CHAR_BODY = re.compile(r"[^'\\\n]*(?:\\.[^'\\\n]*)*")
_RAW_DELIMITER = re.compile(r'[^\s()\\"]{0,16}\(')
_COMMENT_START = re.compile(r"//|/\*")
_NOT_NEWLINE = re.compile(r"[^\n]+")
# A token of code whose comments and literal contents are blanked: names, pp-numbers, what is
# left of a literal, and punctuators (the longest first). Each branch matches in one pass.
TOKEN = re.compile(
    r"""[A-Za-z_]\w*|\d[\w.']*|"[^"\n]*"?|'[^'\n]*'?|::|->|<<=|>>=|[-+*/%&|^<>=!]="""
    r"""|&&|\|\||\+\+|--|<<|>>|\S""",
    re.ASCII,
)
DIRECTIVE_LINE = re.compile(r"^[ \t]*(?:#|%:)[^\n]*", re.M)


@dataclass(frozen=True)
class LogicalLine:
    """A line after splicing: its text in one view and the physical line (1-based) it starts on."""

    number: int
    text: str


def splice(source: str) -> tuple[str, list[int]]:
    """Join backslash-continued lines; return the text and, per character, its physical line."""
    work.add(len(source))
    out: list[str] = []
    lines: list[int] = []
    line = 1
    pos = 0
    for match in _SPLICE.finditer(source):
        chunk = source[pos : match.start()]
        out.append(chunk)
        for part in chunk.split("\n")[:-1]:
            lines.extend([line] * (len(part) + 1))
            line += 1
        lines.extend([line] * (len(chunk) - chunk.rfind("\n") - 1))
        line += 1  # the newline the splice removed
        pos = match.end()
    rest = source[pos:]
    out.append(rest)
    for part in rest.split("\n")[:-1]:
        lines.extend([line] * (len(part) + 1))
        line += 1
    lines.extend([line] * (len(rest) - rest.rfind("\n") - 1))
    return "".join(out), lines


def _blanked(text: str) -> str:
    return _NOT_NEWLINE.sub(lambda m: " " * len(m.group()), text)


def _literal_contents(text: str, quote_at: int, raw: bool) -> tuple[int, int]:
    """(start, end) of the contents of the literal whose opening quote is at `quote_at`, and
    the scan resumes after the closing quote. A plain literal ends at an unescaped newline at
    the latest, as the compiler reads an unterminated one."""
    if raw:
        delimiter = _RAW_DELIMITER.match(text, quote_at + 1)
        if delimiter:
            close = ")" + delimiter.group()[:-1] + '"'
            end = text.find(close, delimiter.end())
            return (quote_at + 1, len(text)) if end < 0 else (quote_at + 1, end + len(close) - 1)
    quote = text[quote_at]
    body = (_STRING_BODY if quote == '"' else _CHAR_BODY).match(text, quote_at + 1)
    end = body.end() if body else quote_at + 1
    return quote_at + 1, end


def lexical_spans(
    text: str, *, raw_strings: bool = True
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(comments, literal contents): spans of the text, in order, as the preprocessor lexes it
    (`raw_strings`: C++11 and later)."""
    work.add(len(text))
    comments: list[tuple[int, int]] = []
    contents: list[tuple[int, int]] = []
    pos = 0
    n = len(text)
    while pos < n:
        match = _LEXEME.search(text, pos)
        if match is None:
            break
        work.add()
        kind = match.lastgroup
        start = match.start()
        if kind == "comment":
            if match.group() == "//":
                end = text.find("\n", start)
                end = n if end < 0 else end
            else:
                end = text.find("*/", start + 2)
                end = n if end < 0 else end + 2
            comments.append((start, end))
            pos = end
            continue
        if kind == "quote":
            quote_at, raw = start, False
        elif kind == "ident" and match.end() < n:
            word, after = match.group(), text[match.end()]
            raw_prefix = raw_strings and word in _RAW_PREFIXES
            if after == '"' and (word in _STRING_PREFIXES or raw_prefix):
                quote_at, raw = match.end(), raw_prefix
            elif after == "'" and word in _STRING_PREFIXES:
                quote_at, raw = match.end(), False
            else:
                pos = match.end()  # a quote right after it starts a literal of its own
                continue
        else:
            pos = match.end()  # a pp-number (digit separators included) or the last word
            continue
        start, end = _literal_contents(text, quote_at, raw)
        contents.append((start, end))
        pos = end + 1  # past the closing quote (or the newline that ended it)
    return comments, contents


def _apply(text: str, spans: list[tuple[int, int]]) -> str:
    """The text with each span (in order, not overlapping) blanked, newlines kept."""
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.append(text[pos:start])
        out.append(_blanked(text[start:end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _continued(text: str, contents: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of literals that lie on lines after the literal's first one (only a raw
    string spans lines): from its first newline to its end."""
    spans = []
    for start, end in contents:
        newline = text.find("\n", start, end)
        if newline >= 0:
            spans.append((newline, end))
    return spans


def blank_comments(text: str, *, strings: bool = True, blank_strings: bool = False) -> str:
    """Replace comments by spaces (newlines kept). With `strings`, quotes start literals whose
    contents are skipped (and blanked with `blank_strings`); without, quotes are plain text, which
    gives a second, differently-wrong view for the include policy to cross-check.
    """
    if not strings:
        return _apply(text, _comments_ignoring_quotes(text))
    comments, contents = lexical_spans(text)
    if not blank_strings:
        return _apply(text, comments)
    return _apply(text, sorted(comments + contents))


def _comments_ignoring_quotes(text: str) -> list[tuple[int, int]]:
    work.add(len(text))
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        match = _COMMENT_START.search(text, pos)
        if match is None:
            return spans
        work.add()
        start = match.start()
        if match.group() == "//":
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
        else:
            end = text.find("*/", start + 2)
            end = len(text) if end < 0 else end + 2
        spans.append((start, end))
        pos = end


@dataclass(frozen=True)
class SourceViews:
    """The views of one source the checks need, all aligned with the spliced text."""

    spliced: str
    line_of: list[int]  # physical line (1-based) of each character of `spliced`
    code: str  # comments blanked, string literals kept
    bare: str  # comments and the contents of string and character literals blanked
    quoteless: str  # comments blanked treating quotes as plain text (a cross-check)
    # `code` with every line that starts inside a literal blanked up to the literal's end: the
    # lines the preprocessor reads as lines, where a `#` first on the line is a directive.
    directives: str

    @classmethod
    def of(cls, source: str, *, raw_strings: bool = True) -> SourceViews:
        # NVRTC takes a lone carriage return as a space (not as a newline), and a byte-order
        # mark at the start as nothing: `\r#include "/etc/passwd"` is a directive to it, so
        # both must be white space here too, or a directive hides from every check.
        text = source.replace("\r\n", "\n").replace("\r", " ").replace("\ufeff", " ")
        spliced, line_of = splice(text)
        comments, contents = lexical_spans(spliced, raw_strings=raw_strings)
        work.add(len(spliced))
        return cls(
            spliced=spliced,
            line_of=line_of,
            code=_apply(spliced, comments),
            bare=_apply(spliced, sorted(comments + contents)),
            quoteless=_apply(spliced, _comments_ignoring_quotes(spliced)),
            directives=_apply(spliced, sorted(comments + _continued(spliced, contents))),
        )

    def line_at(self, index: int) -> int:
        if index < len(self.line_of):
            return self.line_of[index]
        if not self.line_of:
            return 1
        return self.line_of[-1] + (1 if self.spliced.endswith("\n") else 0)

    def lines(self, view: str) -> list[LogicalLine]:
        """The logical lines of one view (a string aligned with `spliced`)."""
        work.add(len(view))
        out: list[LogicalLine] = []
        start = 0
        for part in view.split("\n"):
            out.append(LogicalLine(self.line_at(start), part))
            start += len(part) + 1
        return out


def code_tokens(views: SourceViews) -> list[tuple[str, int]]:
    """(token, index in the spliced text) of the code outside directives, comments and literal
    contents: what the declarations reader and the static checks walk."""
    bare = DIRECTIVE_LINE.sub(lambda m: " " * len(m.group()), views.bare)
    work.add(len(bare))
    tokens = [(m.group(), m.start()) for m in TOKEN.finditer(bare)]
    work.add(len(tokens))
    return tokens


_BRACKETS = {"{": "}", "(": ")", "[": "]"}
_IDENT = re.compile(r"[A-Za-z_]\w*", re.ASCII)
# Words between a function's `)` and its body's `{`.
_FUNCTION_QUALIFIERS = frozenset({"const", "noexcept", "override", "final"})


def match_table(tokens: list[str]) -> dict[int, int]:
    """Index of each opening bracket -> index of its closing one, in one pass."""
    table: dict[int, int] = {}
    stacks: dict[str, list[int]] = {"{": [], "(": [], "[": []}
    closers = {v: k for k, v in _BRACKETS.items()}
    for j, tok in enumerate(tokens):
        if tok in _BRACKETS:
            stacks[tok].append(j)
        elif tok in closers and stacks[closers[tok]]:
            table[stacks[closers[tok]].pop()] = j
    work.add(len(tokens))
    return table


def function_bodies(tokens: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(name, start, end) token ranges of function bodies: a top-level `{` right after `)` (or
    a qualifier); other top-level braces (namespace, extern "C", struct) are looked into."""
    toks = [t for t, _ in tokens]
    table = match_table(toks)
    opening = {close: open_ for open_, close in table.items() if toks[open_] == "("}
    bodies: list[tuple[str, int, int]] = []
    i = 0
    while i < len(toks):
        work.add()
        if toks[i] != "{":
            i += 1
            continue
        end = table.get(i, len(toks))
        j = i - 1
        while j >= 0 and toks[j] in _FUNCTION_QUALIFIERS and i - j < 6:
            j -= 1
        if j >= 0 and toks[j] == ")":
            open_ = opening.get(j, 0)
            name = toks[open_ - 1] if open_ > 0 and _IDENT.fullmatch(toks[open_ - 1]) else ""
            bodies.append((name, i + 1, end))
            i = end + 1
        elif i > 0 and toks[i - 1] == "=":
            i = end + 1  # an initializer list
        else:
            i += 1  # namespace / extern "C" / struct: its functions are found inside
    return bodies
