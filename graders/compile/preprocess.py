"""The program as NVRTC will compile it: conditional directives evaluated, dead branches blanked.

NVRTC has no preprocess-only mode, so the grader keeps a view of its own. Walking the file's
directives in order (on the view with comments blanked), it keeps the macros defined so far
(NVRTC's predefined ones for the target, `-D` options, the file's `#define`s and `#undef`s, and
the macros of the headers it serves from memory where the file includes them) and evaluates
`#if`, `#ifdef`, `#ifndef`, `#elif`, `#else` and `#endif`. Each logical line is then:

- LIVE: the compiler reads it;
- DEAD: it sits in a branch the compiler skips (`#if 0`, `#ifndef __CUDACC__`);
- UNKNOWN: the grader cannot tell (a condition on a macro it does not know, such as one of
  NVRTC's reserved `__...` names it was not told about, or an expansion past its budget).

Directives are the lines of the source views' `directives` view: a `#` that starts a line
inside a raw string is text, as it is to NVRTC (which lexes raw strings in skipped branches
too).

`Program.views` are the source views (`graders.compile.source_text`) with the DEAD lines
blanked, newlines and line numbers kept, so the declaration reader and the static checks read
only what may be compiled. The include policy reads the states: a host include is refused
only when it is LIVE or UNKNOWN (`graders.compile.include_policy`), and a DEAD one is
neutralised so that, were this view wrong, NVRTC itself would say so.

Work is linear in the file: each line is read a bounded number of times, and every macro
expansion and evaluation is paid from one budget proportional to the file's length.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from graders.compile import work
from graders.compile.cexpr import (
    MAYBE,
    UNDEFINED,
    UNKNOWN,
    Budget,
    Macro,
    MacroEntry,
    evaluate_tokens,
    parse_define,
    pp_tokens,
)
from graders.compile.headers import BUILTIN_HEADERS
from graders.compile.source_text import LogicalLine, SourceViews

# A directive: `#` (or `%:`) first on its logical line, its name, the rest.
DIRECTIVE = re.compile(r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*([A-Za-z_]\w*)?(.*)$")
_HEADER_NAME = re.compile(r'^\s*(?:<([^<>"]+)>|"([^<>"]+)")\s*$')
_ARCH = re.compile(r"(?:sm|compute|lto)_(\d+)")
_STANDARDS = {"c++03": 199711, "c++11": 201103, "c++14": 201402, "c++17": 201703,
              "c++20": 202002}  # fmt: skip
# Host compilers and platforms NVRTC does not define (checked against NVRTC 13.5): host code
# guarded by them (`#ifdef _MSC_VER`, `#if defined(__GNUC__)`) is dead to it.
KNOWN_UNDEFINED = frozenset(
    {"__NVCC__", "__GNUC__", "__clang__", "__INTEL_COMPILER", "__NVCOMPILER", "_MSC_VER",
     "_WIN32", "_WIN64", "_M_X64", "__linux__", "__unix__", "__unix", "__APPLE__",
     "__x86_64__", "__HIPCC__", "__HIP__", "__CUDA__"}
)  # fmt: skip
# The budget for macro expansion and evaluation: steps per character of the file, plus a floor.
BUDGET_PER_CHAR = 4
BUDGET_FLOOR = 20_000


class Live(IntEnum):
    """Whether the compiler reads a line; `min` combines nested conditions."""

    DEAD = 0
    UNKNOWN = 1
    LIVE = 2


def _negated(taken: Live) -> Live:
    return Live(2 - taken)


@dataclass(frozen=True)
class Target:
    """What the preprocessor knows of the compilation: the macros defined before the file's
    first line (None: never defined), and whether `??=` and friends are trigraphs."""

    macros: Mapping[str, MacroEntry]
    trigraphs: bool
    standard: int | None  # __cplusplus, None where the option is one this reader does not know

    @property
    def raw_strings(self) -> bool:
        """Whether `R"(...)"` is a raw string (C++11 on; under -std=c++03 it is a name and a
        string); an unknown standard counts as a recent one."""
        return self.standard is None or self.standard >= _STANDARDS["c++11"]


def _object(value: str) -> Macro:
    return Macro(None, tuple(pp_tokens(value)))


def target_from_options(options: Sequence[str], version: tuple[int, int] | None = None) -> Target:
    """The target NVRTC compiles for under these options (arch, -std, -D, -U)."""
    macros: dict[str, MacroEntry] = {name: UNDEFINED for name in KNOWN_UNDEFINED}
    macros.update(
        {name: _object("1") for name in ("__CUDACC__", "__CUDACC_RTC__", "__LP64__", "__STDC__",
                                          "__EDG__", "__NVCC_DIAG_PRAGMA_SUPPORT__")}
    )  # fmt: skip
    standard: int | None = _STANDARDS["c++17"]  # NVRTC's default
    pending = list(options)
    while pending:
        option = pending.pop(0)
        name, _, value = option.partition("=")
        if name in ("-arch", "--gpu-architecture") and not value and pending:
            value = pending.pop(0)
        if name in ("-arch", "--gpu-architecture"):
            arch = _ARCH.fullmatch(value)
            code = f"{int(arch.group(1)) * 10}" if arch else None
            for macro in ("__CUDA_ARCH__", "__CUDA_ARCH_LIST__"):
                macros[macro] = _object(code) if code else MAYBE
        elif name in ("-std", "--std"):
            standard = _STANDARDS.get(value.replace("gnu++", "c++"))
        elif option.startswith(("-D", "--define-macro")):
            definition = option[2:] if option.startswith("-D") else value
            if option.startswith("--define-macro") and not value:
                definition = pending.pop(0) if pending else ""
            key, _, body = definition.partition("=")
            parsed = parse_define(f"{key} {body if _ else '1'}")
            if parsed:
                macros[parsed[0]] = parsed[1]
        elif option.startswith(("-U", "--undefine-macro")):
            key = option[2:] if option.startswith("-U") else value
            if option.startswith("--undefine-macro") and not value:
                key = pending.pop(0) if pending else ""
            macros[key.strip()] = UNDEFINED
    macros["__cplusplus"] = _object(f"{standard}L") if standard else MAYBE
    if version is not None:
        macros["__CUDACC_VER_MAJOR__"] = _object(str(version[0]))
        macros["__CUDACC_VER_MINOR__"] = _object(str(version[1]))
    # C++17 removed trigraphs; NVRTC reads them under -std=c++11 and c++14.
    trigraphs = standard is None or standard < _STANDARDS["c++17"]
    return Target(macros=macros, trigraphs=trigraphs, standard=standard)


DEFAULT_TARGET = target_from_options(["--gpu-architecture=sm_90", "-std=c++17", "-DKERNELGRADER=1"])


def _header_macros(text: str) -> tuple[tuple[str, Macro], ...]:
    """The `#define`s of a header the grader serves (each guarded by `#ifndef`)."""
    found = []
    for line in text.split("\n"):
        match = DIRECTIVE.match(line)
        if match and match.group(1) == "define":
            parsed = parse_define(match.group(2))
            if parsed:
                found.append(parsed)
    return tuple(found)


_SERVED: dict[str, tuple[tuple[str, Macro], ...]] = {}


def _served_macros(name: str, headers: Mapping[str, str]) -> tuple[tuple[str, Macro], ...]:
    text = headers.get(name, "")
    if text not in _SERVED:  # the few served texts, read once per process
        _SERVED[text] = _header_macros(text)
    return _SERVED[text]


@dataclass
class _Group:
    parent: Live
    taken: Live  # whether an earlier branch of this #if was taken


@dataclass
class Program:
    """A source with the preprocessor's view of it."""

    source: str
    full: SourceViews  # every character, as `SourceViews.of(source)`
    views: SourceViews  # DEAD lines blanked in every view
    states: list[Live]  # per logical line, in `views.lines(...)` order
    macros: dict[str, MacroEntry]  # as at the end of the file
    target: Target
    budget: Budget = field(repr=False)

    def macro(self, name: str) -> MacroEntry | None:
        """A name's entry at the end of the file: a Macro, UNDEFINED, MAYBE; None when the
        file never mentions it and the target says nothing."""
        return self.macros.get(name)

    def defined(self, name: str) -> Live:
        """Whether `name` is a macro at the end of the file."""
        return _is_defined(self.macros, name)


def _reserved(name: str) -> bool:
    return name.startswith("__") or (name[:1] == "_" and name[1:2].isupper())


def _is_defined(macros: Mapping[str, MacroEntry], name: str) -> Live:
    entry = macros.get(name)
    if entry is None:
        # A reserved name the grader was not told about may be one of NVRTC's own.
        return Live.UNKNOWN if _reserved(name) else Live.DEAD
    if entry == MAYBE:
        return Live.UNKNOWN
    return Live.DEAD if entry == UNDEFINED else Live.LIVE


def _condition_value(name: str) -> int | None:
    """What a name left after expansion is worth in `#if`: 0, as the standard says, unless it
    may be a macro the grader does not know."""
    if name == "defined" or _reserved(name):
        return None
    return 0


def preprocess(
    source: str, target: Target | None = None, headers: Mapping[str, str] | None = None
) -> Program:
    """The preprocessor's view of `source` compiled for `target` (default: sm_90, C++17)."""
    return _Walk(source, target or DEFAULT_TARGET, headers or BUILTIN_HEADERS).run()


def program_of(source: str | Program) -> Program:
    """A Program for parsers that take either the text or the Program the pipeline made."""
    return source if isinstance(source, Program) else preprocess(source)


class _Walk:
    def __init__(self, source: str, target: Target, headers: Mapping[str, str]) -> None:
        self.source = source
        self.target = target
        self.headers = headers
        self.macros: dict[str, MacroEntry] = dict(target.macros)
        self.budget = Budget(BUDGET_PER_CHAR * len(source) + BUDGET_FLOOR)

    def run(self) -> Program:
        full = SourceViews.of(self.source, raw_strings=self.target.raw_strings)
        lines = full.lines(full.directives)
        states: list[Live] = []
        stack: list[_Group] = []
        current = Live.LIVE
        for line in lines:
            match = DIRECTIVE.match(line.text)
            work.add(1 + (match.end() if match else 0))
            name = match.group(1) if match else None
            if match is None or name is None:
                states.append(current)
                continue
            rest = match.group(2)
            if name in ("if", "ifdef", "ifndef"):
                states.append(current)
                cond = self._condition(name, rest) if current != Live.DEAD else Live.DEAD
                stack.append(_Group(parent=current, taken=cond))
                current = min(current, cond)
            elif name in ("elif", "elifdef", "elifndef", "else", "endif") and stack:
                group = stack[-1]
                states.append(group.parent)
                if name == "endif":
                    stack.pop()
                    current = group.parent
                    continue
                if group.parent == Live.DEAD or group.taken == Live.LIVE:
                    current = Live.DEAD
                    continue
                if name == "else":
                    cond = Live.LIVE
                elif name == "elif":
                    cond = self._condition("if", rest)
                else:  # #elifdef: C++23; NVRTC's C++17 mode ignores it in skipped text
                    cond = Live.UNKNOWN
                current = min(group.parent, cond, _negated(group.taken))
                group.taken = max(group.taken, cond)
            else:
                states.append(current)
                if current != Live.DEAD:
                    self._directive(name, rest, current)
        blanks = [
            (start, start + len(line.text))
            for line, state, start in zip(lines, states, _starts(lines), strict=True)
            if state == Live.DEAD and line.text.strip()
        ]
        return Program(
            source=self.source,
            full=full,
            views=_blanked_views(full, blanks),
            states=states,
            macros=self.macros,
            target=self.target,
            budget=self.budget,
        )

    def _condition(self, directive: str, rest: str) -> Live:
        tokens = pp_tokens(rest)
        if directive in ("ifdef", "ifndef"):
            if not tokens:
                return Live.UNKNOWN
            defined = _is_defined(self.macros, tokens[0])
            return defined if directive == "ifdef" else _negated(defined)
        value = evaluate_tokens(
            self._replace_defined(tokens),
            macros=self.macros.get,
            name_value=_condition_value,
            budget=self.budget,
        )
        if value is None:
            return Live.UNKNOWN
        return Live.LIVE if value else Live.DEAD

    def _replace_defined(self, tokens: list[str]) -> list[str]:
        """`defined X` and `defined(X)` as 1, 0, or a name that is unknown in `#if`."""
        out: list[str] = []
        i = 0
        while i < len(tokens):
            if tokens[i] != "defined":
                out.append(tokens[i])
                i += 1
                continue
            if tokens[i + 1 : i + 2] == ["("] and tokens[i + 3 : i + 4] == [")"]:
                name, i = tokens[i + 2], i + 4
            elif i + 1 < len(tokens):
                name, i = tokens[i + 1], i + 2
            else:
                return [*out, "defined"]  # malformed: unknown
            state = _is_defined(self.macros, name)
            out.append({Live.LIVE: "1", Live.DEAD: "0"}.get(state, UNKNOWN))
        return out

    def _directive(self, name: str, rest: str, state: Live) -> None:
        if name == "define":
            parsed = parse_define(rest)
            if parsed:
                self.macros[parsed[0]] = parsed[1] if state == Live.LIVE else MAYBE
        elif name == "undef":
            match = re.match(r"\s*([A-Za-z_]\w*)", rest, re.ASCII)
            if match:
                self.macros[match.group(1)] = UNDEFINED if state == Live.LIVE else MAYBE
        elif name == "include":
            header = _HEADER_NAME.match(rest)
            served = (header.group(1) or header.group(2)) if header else ""
            if served in self.headers:
                for macro_name, macro in _served_macros(served, self.headers):
                    work.add()
                    defined = _is_defined(self.macros, macro_name)
                    if defined == Live.DEAD:  # each is guarded by #ifndef
                        self.macros[macro_name] = macro if state == Live.LIVE else MAYBE


def _starts(lines: Sequence[LogicalLine]) -> list[int]:
    out, start = [], 0
    for line in lines:
        out.append(start)
        start += len(line.text) + 1
    return out


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for start, end in spans:
        parts.append(text[pos:start])
        parts.append(" " * (end - start))
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _blanked_views(views: SourceViews, spans: list[tuple[int, int]]) -> SourceViews:
    """The views with each span (within one line, no newline in it) blanked."""
    work.add(5 * len(views.spliced) if spans else 0)
    return SourceViews(
        spliced=_blank(views.spliced, spans),
        line_of=views.line_of,
        code=_blank(views.code, spans),
        bare=_blank(views.bare, spans),
        quoteless=_blank(views.quoteless, spans),
        directives=_blank(views.directives, spans),
    )
