"""Refuse, before compiling, anything in a submission that would make NVRTC open a host file.

NVRTC opens whatever path an `#include` names (`#include "/etc/passwd"` prints that file into the
compile log), and `__has_include` tells whether a path exists. A submission is one self-contained
`.cu` file, so the only includes allowed are a few headers that kernels copied from course
material start with; the grader serves them from memory (`BUILTIN_HEADERS`), never from disk.

The policy reads the preprocessed program (`graders.compile.preprocess`) through the one lexer
of `graders.compile.source_text` (a line that starts inside a raw string is no directive): a
directive the compiler reads (LIVE), or may read (UNKNOWN: a condition the grader cannot
evaluate), is judged; `#include <cstdlib>` inside a comment or under `#if 0` / `#ifndef
__CUDACC__` (an old host harness) is not the compiler's business and is accepted. The policy
does not trust its own reading for that: every line that any of three views (comments blanked
with literals understood, comments blanked with quotes ignored, the raw text) shows as an
include, or as a pragma that can reach outside the file (`FILE_PRAGMAS`, or a path-like
operand in any pragma but `TEXT_PRAGMAS`), and that the grader judged dead, commented out or
inside a raw string, has its directive's name rewritten to `error` in the text NVRTC compiles
(`#include <cstdlib>` becomes `#error <cstdlib>`, never longer than before, line numbers
kept). Where the grader was right, that text is a comment, a skipped branch or a string's
text and changes nothing the kernel does (a raw string's text reads `#error` there); where it
was wrong, NVRTC stops at the `#error` instead of opening the file, and the pipeline refuses
the line (`refused_by_compiler`). The rewritten text is scanned again before NVRTC sees it.

Any other pragma is the compiler's business: `#pragma nv_diagnostic push`, `#pragma unroll`,
`#pragma warning(disable: 4996)` reach nothing outside the file (NVRTC ignores those it does
not know, with a warning).

`#include` spellings with digraphs (`%:include`), spaces, comments or line continuations are
all directives here, as they are to the compiler. `__has_include`, token pasting and
`_Pragma` are refused wherever they are, dead code included: no rewrite could make them safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from graders.compile import work
from graders.compile.headers import BUILTIN_HEADERS
from graders.compile.preprocess import DIRECTIVE, Live, Program, program_of
from graders.compile.source_text import SourceViews

__all__ = [
    "BUILTIN_HEADERS",
    "Review",
    "check_includes",
    "refused_by_compiler",
    "review",
    "without_line_directives",
]

# Pragmas that can reach outside the submission: they name a file or a directory, or change how
# later includes are found or what they mean (MSVC's and EDG's include and precompiled-header
# pragmas, GCC's dependency check, linker comments). Refused wherever the compiler may read them.
FILE_PRAGMAS = frozenset(
    {
        "include_alias", "include_directory", "include_path", "dependency", "system_header",
        "hdrstop", "no_pch", "create_pch", "use_pch", "pch_dir", "pch_preprocess", "comment",
        "include", "include_next", "import", "embed", "linker", "lib", "library",
    }
)  # fmt: skip
# Pragmas whose string operand is only text or a macro's name, never a file: a string in any
# other pragma may be a path (`hdrstop("x.pch")`), so such a pragma counts as naming one.
TEXT_PRAGMAS = frozenset(
    {"message", "warning", "error", "ident", "push_macro", "pop_macro", "diagnostic",
     "nv_diagnostic", "region", "endregion", "deprecated", "poison", "unroll", "nounroll"}
)  # fmt: skip
# A first word that names a vendor's family of pragmas: the pragma is the word after it.
_PRAGMA_FAMILIES = frozenset({"GCC", "clang", "nv", "NV", "STDC", "omp", "acc"})
_INCLUDE_FAMILY = frozenset({"include", "include_next", "import", "embed"})
_DIRECTIVE = DIRECTIVE
_HEADER_OPERAND = re.compile(r'^\s*(?:<([^<>"]+)>|"([^<>"]+)")\s*$')
# In the raw view comments are still there: `#include <math.h> // for INFINITY` is allowed.
_HEADER_OPERAND_RAW = re.compile(r'^\s*(?:<([^<>"]+)>|"([^<>"]+)")\s*(?://.*|/\*.*)?$')
_PRAGMA_NAME = re.compile(r"\s*([A-Za-z_]\w*)(?:\s+([A-Za-z_]\w*))?", re.ASCII)
# A string literal or a header name in a pragma's operand: something that can name a file.
_PRAGMA_PATH = re.compile(r'"|<[^<>\s]*>')
_PRAGMA_OPERATOR = re.compile(r"\b_Pragma\b")
_PRAGMA_LITERAL = re.compile(r'\s*\(\s*(?:L|u8|u|U)?"((?:[^"\\\n]|\\.)*)"\s*\)')
_FILE_QUERY = re.compile(r"__has_include(?:_next)?\b|__has_embed\b")
# `CAT(__has_, include)("/etc/shadow")` builds the file query from pieces, so any `##` is refused.
_TOKEN_PASTE = re.compile(r"##|%:%:")
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>-]")
_UNDECIDED = (
    " The line sits under a condition on a macro the grader cannot evaluate, so it counts as "
    "compiled; to keep host code in the file, guard it with `#ifndef __CUDACC_RTC__`."
)
# NVRTC's words for an `#error` it reached: "s.cu(12): catastrophic error: #error directive: x".
_ERROR_DIRECTIVE = "#error directive"
_ERROR_HEADER = re.compile(r"^(.+?)\((\d+)\): (?:catastrophic )?error")


@dataclass(frozen=True)
class Review:
    """The policy's answer: a refusal, or the text NVRTC compiles (lines the grader judged dead
    rewritten to `#error`, `#line` blanked) and, per rewritten line, the sentence that refuses
    it should NVRTC reach that `#error`."""

    problem: str | None
    compile_source: str = ""
    rewritten: dict[int, str] = field(default_factory=dict)


def allowed_headers_text() -> str:
    return ", ".join(f"<{name}>" for name in BUILTIN_HEADERS)


def check_includes(source: str | Program) -> str | None:
    """None when the source may be compiled; otherwise one sentence naming the line."""
    return _judge(program_of(source))[0]


def review(source: str | Program) -> Review:
    """The policy's decision and, when the file may be compiled, the text to compile."""
    program = program_of(source)
    problem, hidden = _judge(program)
    if problem:
        return Review(problem)
    text = _rewritten(program.source, hidden)
    views = SourceViews.of(text, raw_strings=program.target.raw_strings)
    leftover, line_directives = _scan(views, rewritten=bool(hidden))
    if leftover:
        return Review(leftover)
    text = _blank_lines(text, line_directives)
    return Review(None, text, {n: sentence for n, (_, sentence) in hidden.items()})


def refused_by_compiler(log: str, filename: str, rewritten: dict[int, str]) -> str | None:
    """The sentence for a rewritten line whose `#error` NVRTC reached (the grader had judged
    the line dead or commented out, and the compiler did not)."""
    if not rewritten:
        return None
    for line in log.split("\n"):
        work.add(len(line) + 1)
        if _ERROR_DIRECTIVE not in line:
            continue
        header = _ERROR_HEADER.match(line[:400])
        if header and header.group(1) == filename and int(header.group(2)) in rewritten:
            return rewritten[int(header.group(2))]
    return None


def _judge(program: Program) -> tuple[str | None, dict[int, tuple[int, str]]]:
    """(the first refusal, {first physical line: (last physical line, sentence)} of the
    logical lines to rewrite)."""
    source = program.source
    work.add(len(source))
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = source.count("\n", 0, exc.start) + 1
        return f"Line {line} is not valid UTF-8 text; save the file as UTF-8 and resubmit.", {}
    if "\x00" in source:
        line = source.count("\n", 0, source.index("\x00")) + 1
        return f"Line {line} contains a NUL character; submit plain CUDA source text.", {}
    if program.target.trigraphs:  # C++17 has no trigraphs: `??)` is text there
        trigraph = _TRIGRAPH.search(source)
        if trigraph:
            line = source.count("\n", 0, trigraph.start()) + 1
            return (
                f"Line {line} contains the trigraph `{trigraph.group()}`, which the grader does "
                "not accept; write the character it stands for instead."
            ), {}
    views = program.full
    query = _FILE_QUERY.search(views.spliced)
    if query:
        return (
            f"Line {views.line_at(query.start())} uses `{query.group()}`, which asks about "
            "files on the grading machine; a submission must be one self-contained file, so "
            "remove it."
        ), {}
    pasting = _TOKEN_PASTE.search(views.bare)
    if pasting:
        return (
            f"Line {views.line_at(pasting.start())} uses token pasting (`{pasting.group()}`), "
            "which the grader does not accept: pasted names can ask about files on the grading "
            "machine. Write the names out in full."
        ), {}
    problem, hidden = _check_directives(program)
    return problem or _check_pragma_operators(views), hidden


def _check_directives(program: Program) -> tuple[str | None, dict[int, tuple[int, str]]]:
    views = program.full
    per_view = [
        (view, views.lines(view)) for view in (views.directives, views.quoteless, views.spliced)
    ]
    hidden: dict[int, tuple[int, str]] = {}
    code_lines = per_view[0][1]
    for index, code_line in enumerate(code_lines):
        live = program.states[index] != Live.DEAD
        found: list[str] = []  # the sentence for each view that shows a forbidden directive
        code_is_directive = False
        for view, lines in per_view:
            line = lines[index]
            work.add(len(line.text) + 1)
            sentence, is_directive = _forbidden(views, view, line.number, line.text)
            if view is views.directives:
                code_is_directive = is_directive
            if sentence:
                found.append(sentence)
        if not found:
            continue
        if live and code_is_directive:
            if program.states[index] == Live.UNKNOWN:
                return found[0] + _UNDECIDED, {}
            return found[0], {}
        last = code_lines[index + 1].number - 1 if index + 1 < len(code_lines) else None
        hidden[code_line.number] = (last or code_line.number, found[0])
    return None, hidden


def _forbidden(views: SourceViews, view: str, number: int, text: str) -> tuple[str | None, bool]:
    """(the sentence refusing this line in this view, whether it is an include or a pragma
    directive in it); pragmas count in the view with comments blanked only (and lines inside
    raw strings)."""
    match = _DIRECTIVE.match(text)
    if not match or not match.group(1):
        return None, False
    name, operand = match.group(1), match.group(2)
    if name in _INCLUDE_FAMILY:
        pattern = _HEADER_OPERAND_RAW if view is views.spliced else _HEADER_OPERAND
        header = pattern.match(operand)
        target = (header.group(1) or header.group(2)) if header else None
        if name == "include" and target in BUILTIN_HEADERS:
            return None, True
        return _include_sentence(number, name, operand.strip(), target), True
    if name == "pragma" and view is views.directives:
        problem = _pragma_problem(operand)
        sentence = f"Line {number} has `#pragma {operand.strip()}`: {problem}" if problem else None
        return sentence, True
    return None, False


def _rewritten(source: str, hidden: dict[int, tuple[int, str]]) -> str:
    """The source with each hidden line's directive turned into `#error`, line numbers kept:
    `#include <cstdlib>` in a comment becomes `#error <cstdlib>`."""
    if not hidden:
        return source
    physical = source.split("\n")
    work.add(len(source))
    for number, (last, _) in sorted(hidden.items()):
        if not 0 < number <= len(physical):
            continue
        text = physical[number - 1]
        keyword = _DIRECTIVE_KEYWORD.match(text.replace("\r", " ").replace("\ufeff", " "))
        marker = "error"
        plain = keyword is not None and keyword.group(1) in _INCLUDE_FAMILY | {"pragma"}
        if plain and keyword is not None and last == number:
            physical[number - 1] = text[: keyword.start(1)] + marker + text[keyword.end(1) :]
            continue
        # A directive spelled across line splices or with comments inside: the logical line
        # goes whole (its first physical line becomes the marker, the others empty).
        physical[number - 1] = "#" + marker
        for blank in range(number, min(last, len(physical))):
            physical[blank] = ""
    return "\n".join(physical)


# The directive's name where the raw line spells it plainly (`#include`, `# pragma`, `%:import`).
_DIRECTIVE_KEYWORD = re.compile(r"[ \t\f\v]*(?:#|%:)[ \t\f\v]*([A-Za-z_]\w*)", re.ASCII)


def _include_sentence(line: int, directive: str, operand: str, target: str | None) -> str:
    allowed = allowed_headers_text()
    if directive != "include":
        return (
            f"Line {line} uses `#{directive}`, which the grader does not allow: a submission is "
            f"one self-contained .cu file (only {allowed} may be included); remove the line."
        )
    if target is None:
        return (
            f"Line {line} includes `{operand or '(nothing)'}`, a file name that is not written "
            f"out; the grader compiles one self-contained .cu file and allows only {allowed}, "
            "so remove the line."
        )
    return (
        f"Line {line} includes {operand}, which the grader does not allow: a submission is one "
        f"self-contained .cu file, and only {allowed} may be included (they are built in). "
        "Put what you need into your file and resubmit."
    )


def _pragma_problem(operand: str) -> str | None:
    """Why a pragma is refused (it can reach outside the file), or None: the pragma is named by
    its first word, or by the second after a family's (`GCC dependency`, `clang diagnostic`)."""
    words = _PRAGMA_NAME.match(operand)
    if not words:
        return None  # `#pragma` alone, or a number: nothing the compiler can act on
    name = words.group(1)
    if name in _PRAGMA_FAMILIES and words.group(2):
        name = words.group(2)
    if name in FILE_PRAGMAS:
        return (
            f"`{name}` is a pragma that names files or changes how they are included, which "
            "can reach outside your file; a submission is one self-contained file, so remove "
            "the line."
        )
    if name not in TEXT_PRAGMAS and _PRAGMA_PATH.search(operand, words.end()):
        return (
            "a pragma with a string or `<...>` operand may name a file on the grading machine, "
            "and the grader accepts such operands only in pragmas whose operand is text (such "
            "as `message`, `push_macro` and the diagnostic pragmas); remove the line."
        )
    return None


def _check_pragma_operators(views: SourceViews) -> str | None:
    work.add(len(views.code))
    # Found outside literals (`printf("_Pragma")` is text), read with its literal from `code`.
    for found in _PRAGMA_OPERATOR.finditer(views.bare):
        line = views.line_at(found.start())
        literal = _PRAGMA_LITERAL.match(views.code, found.end())
        # A literal that matches is not read again (the next `_Pragma` comes after it); one that
        # does not ends the check with a refusal: either way each character is read about once.
        work.add(1 + (literal.end() - found.end() if literal else 0))
        if not literal:
            return (
                f"Line {line} uses `_Pragma` without a plain string literal; write the pragma "
                "out, e.g. `#pragma unroll`."
            )
        text = literal.group(1).replace('\\"', '"').replace("\\\\", "\\")
        problem = _pragma_problem(text)
        if problem:
            return f'Line {line} has `_Pragma("{text}")`: {problem}'
    return None


def without_line_directives(source: str) -> str:
    """The source with `#line` directives (and `# 12 "file"` markers) blanked, newlines kept:
    they would rename the file and renumber the lines in the compiler's messages, and the log
    must point into the student's own file. A line that is such a directive in any view (with
    comments and literals understood, with quotes ignored, or raw) is blanked, so a construct
    this scanner misreads cannot hide one."""
    return _blank_lines(source, _scan(SourceViews.of(source), rewritten=False)[1])


def _scan(views: SourceViews, *, rewritten: bool) -> tuple[str | None, set[int]]:
    """(after a rewrite, a forbidden directive some view still shows: a check on the rewrite;
    the physical lines of every `#line` directive in any view), in one pass over the views."""
    blank: set[int] = set()
    for view in (views.directives, views.quoteless, views.spliced):
        logical = views.lines(view)
        for i, line in enumerate(logical):
            work.add(len(line.text) + 1)
            match = _DIRECTIVE.match(line.text)
            if match is None:
                continue
            if rewritten:
                sentence, _ = _forbidden(views, view, line.number, line.text)
                if sentence:
                    return sentence, blank
            is_line = match.group(1) == "line" or (
                match.group(1) is None and match.group(2).strip()[:1].isdigit()
            )
            if is_line:
                last = logical[i + 1].number - 1 if i + 1 < len(logical) else line.number
                blank.update(range(line.number, last + 1))
    return None, blank


def _blank_lines(source: str, blank: set[int]) -> str:
    if not blank:
        return source
    physical = source.split("\n")  # newlines only, as the views count lines
    for number in blank:
        if 0 < number <= len(physical):
            physical[number - 1] = "\r" if physical[number - 1].endswith("\r") else ""
    return "\n".join(physical)
