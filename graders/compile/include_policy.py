"""Refuse, before compiling, anything in a submission that would make NVRTC open a host file.

NVRTC opens whatever path an `#include` names (`#include "/etc/passwd"` prints that file into the
compile log), and `__has_include` tells whether a path exists. A submission is one self-contained
`.cu` file, so the only includes allowed are a few headers that kernels copied from course
material start with; the grader serves them from memory (`BUILTIN_HEADERS`), never from disk.

The check runs on three views of the source (comments blanked with string literals understood,
comments blanked with quotes ignored, and the raw text), so a construct this scanner
misreads one way is still seen in another; `#include` spellings with digraphs (`%:include`),
spaces, comments or line continuations are all directives here, as they are to the compiler.
"""

from __future__ import annotations

import re

from graders.compile import work
from graders.compile.headers import BUILTIN_HEADERS
from graders.compile.source_text import SourceViews

__all__ = ["BUILTIN_HEADERS", "check_includes", "without_line_directives"]

ALLOWED_PRAGMAS = frozenset(
    {
        "unroll", "nounroll", "once", "message", "push_macro", "pop_macro",
        "nv_diag_suppress", "nv_diag_warning", "nv_diag_error", "nv_diag_default",
        "nv_diag_once", "diag_suppress", "diag_warning", "diag_error", "diag_default",
    }
)  # fmt: skip
_INCLUDE_FAMILY = frozenset({"include", "include_next", "import", "embed"})
_DIRECTIVE = re.compile(r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*([A-Za-z_]\w*)?(.*)$")
_HEADER_OPERAND = re.compile(r'^\s*(?:<([^<>"]+)>|"([^<>"]+)")\s*$')
# In the raw view comments are still there: `#include <math.h> // for INFINITY` is allowed.
_HEADER_OPERAND_RAW = re.compile(r'^\s*(?:<([^<>"]+)>|"([^<>"]+)")\s*(?://.*|/\*.*)?$')
_PRAGMA_NAME = re.compile(r"\s*([A-Za-z_]\w*)", re.ASCII)
_PRAGMA_OPERATOR = re.compile(r"\b_Pragma\b")
_PRAGMA_LITERAL = re.compile(r'\s*\(\s*(?:L|u8|u|U)?"((?:[^"\\\n]|\\.)*)"\s*\)')
_FILE_QUERY = re.compile(r"__has_include(?:_next)?\b|__has_embed\b")
# `CAT(__has_, include)("/etc/shadow")` builds the file query from pieces, so any `##` is refused.
_TOKEN_PASTE = re.compile(r"##|%:%:")
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>-]")


def allowed_headers_text() -> str:
    return ", ".join(f"<{name}>" for name in BUILTIN_HEADERS)


def check_includes(source: str) -> str | None:
    """None when the source may be compiled; otherwise one sentence naming the line."""
    work.add(len(source))
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = source.count("\n", 0, exc.start) + 1
        return f"Line {line} is not valid UTF-8 text; save the file as UTF-8 and resubmit."
    if "\x00" in source:
        line = source.count("\n", 0, source.index("\x00")) + 1
        return f"Line {line} contains a NUL character; submit plain CUDA source text."
    trigraph = _TRIGRAPH.search(source)
    if trigraph:
        line = source.count("\n", 0, trigraph.start()) + 1
        return (
            f"Line {line} contains the trigraph `{trigraph.group()}`, which the grader does not "
            "accept; write the character it stands for instead."
        )
    views = SourceViews.of(source)
    query = _FILE_QUERY.search(views.spliced)
    if query:
        return (
            f"Line {views.line_at(query.start())} uses `{query.group()}`, which asks about files "
            "on the grading machine; a submission must be one self-contained file, so remove it."
        )
    pasting = _TOKEN_PASTE.search(views.bare)
    if pasting:
        return (
            f"Line {views.line_at(pasting.start())} uses token pasting (`{pasting.group()}`), "
            "which the grader does not accept: pasted names can ask about files on the grading "
            "machine. Write the names out in full."
        )
    for view in (views.code, views.quoteless, views.spliced):
        problem = _check_directives(views, view, pragmas=view is views.code)
        if problem:
            return problem
    return _check_pragma_operators(views)


def _check_directives(views: SourceViews, view: str, *, pragmas: bool) -> str | None:
    operand_pattern = _HEADER_OPERAND_RAW if view is views.spliced else _HEADER_OPERAND
    for line in views.lines(view):
        work.add(len(line.text) + 1)
        match = _DIRECTIVE.match(line.text)
        if not match or not match.group(1):
            continue
        name, operand = match.group(1), match.group(2)
        if name in _INCLUDE_FAMILY:
            header = operand_pattern.match(operand)
            target = (header.group(1) or header.group(2)) if header else None
            if name == "include" and target in BUILTIN_HEADERS:
                continue
            return _include_sentence(line.number, name, operand.strip(), target)
        if pragmas and name == "pragma":
            problem = _pragma_problem(operand)
            if problem:
                return f"Line {line.number} has `#pragma {operand.strip()}`: {problem}"
    return None


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
    # The pragma's name is the first identifier: `#pragma message("...")` names `message`.
    first = _PRAGMA_NAME.match(operand)
    if first and first.group(1) in ALLOWED_PRAGMAS:
        return None
    return (
        "the grader accepts only the pragmas " + ", ".join(sorted(ALLOWED_PRAGMAS)) + "; "
        "remove the line."
    )


def _check_pragma_operators(views: SourceViews) -> str | None:
    work.add(len(views.code))
    for found in _PRAGMA_OPERATOR.finditer(views.code):
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
    views = SourceViews.of(source)
    blank: set[int] = set()
    for view in (views.code, views.quoteless, views.spliced):
        logical = views.lines(view)
        for i, line in enumerate(logical):
            work.add(len(line.text) + 1)
            match = _DIRECTIVE.match(line.text)
            if match is None:
                continue
            is_line = match.group(1) == "line" or (
                match.group(1) is None and match.group(2).strip()[:1].isdigit()
            )
            if is_line:
                last = logical[i + 1].number - 1 if i + 1 < len(logical) else line.number
                blank.update(range(line.number, last + 1))
    if not blank:
        return source
    physical = source.split("\n")  # newlines only, as the views count lines
    for number in blank:
        if 0 < number <= len(physical):
            physical[number - 1] = "\r" if physical[number - 1].endswith("\r") else ""
    return "\n".join(physical)
