"""Static warnings at compile time: the barrier problem (a barrier in thread-divergent code).

A block barrier (`__syncthreads()`, `__syncwarp()`, `cg::sync(g)`, `g.sync()`, `bar.sync` in
inline PTX) must be reached by every thread of the block. This check walks each function's
statements and reports a barrier that sits under an `if`, `else`, loop or `switch` whose
condition depends on the thread index, and an early `return` under such a condition that
comes before a barrier. A call to a `__device__` function that reaches a barrier (directly or
through further calls), and a macro whose body does (`#define SYNC __syncthreads()`,
`#define SYNC() __syncthreads()`), count as that barrier, named with both lines.

"Depends on the thread index" means the condition uses `threadIdx` (or `thread_rank()`), or a
variable assigned from one, followed through assignments (`int Row = blockIdx.y * blockDim.y +
threadIdx.y;`). A condition on `blockIdx` or `blockDim` alone is the same for the whole block,
so it is not reported; nor is `__syncwarp()` under a condition that splits threads at warp
boundaries (`if (tid < 32)`, `lane`, `warpSize`).

It is a heuristic over tokens, not a compiler: it errs towards silence on code it cannot
follow, since the sanitizer's synccheck confirms the problem on a GPU. Every step is linear in
the file (see `graders.compile.work`).
"""

from __future__ import annotations

import bisect
import re
from collections import deque
from dataclasses import dataclass

from graders.compile import work
from graders.compile.barrier_walk import Barrier, FunctionBody, Walker, match_table
from graders.compile.preprocess import Program, program_of
from graders.compile.source_text import SourceViews
from graders.results import Finding

_TOKEN = re.compile(
    r"""[A-Za-z_]\w*|\d[\w.']*|"[^"\n]*"?|'[^'\n]*'?|::|->|<<=|>>=|[-+*/%&|^<>=!]="""
    r"""|&&|\|\||\+\+|--|<<|>>|\S""",
    re.ASCII,
)
_BARRIER = re.compile(
    r"\b__syncthreads(?:_count|_and|_or)?\s*\(|\b__syncwarp\s*\(|\b__barrier_sync\s*\("
    r"|(?:::|\.|\bcg\s*::\s*)\s*sync\s*\("
)
# In inline PTX (inside an asm statement's string).
_PTX_BARRIER = re.compile(r"\bbar(?:rier)?\.(?:sync|cta\.sync)\b")
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_STATEMENT_BOUNDARY = re.compile(r"[;{}]")
_IDENT = re.compile(r"[A-Za-z_]\w*", re.ASCII)
_DIRECTIVE_LINE = re.compile(r"^[ \t]*(?:#|%:)[^\n]*", re.M)
_DEFINE = re.compile(r"[ \t]*(?:#|%:)[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)\n]*\))?", re.ASCII)
_NOT_CALLS = frozenset({"if", "while", "for", "switch", "return", "sizeof", "do", "else"})
_QUALIFIERS = frozenset({"const", "noexcept", "override", "final"})


@dataclass(frozen=True)
class _Reach:
    """How a function or macro reaches a barrier: the barrier, its line, and whether it is only
    a warp barrier."""

    barrier: str
    line: int
    warp_only: bool


def find_barrier_problems(source: str | Program) -> list[Finding]:
    """Findings (tool "static", kind "divergent_barrier") with the student's line numbers, in
    the code the compiler may read (dead branches left out)."""
    views = program_of(source).views
    directives = list(_DIRECTIVE_LINE.finditer(views.bare))
    work.add(len(views.bare) + len(directives))
    bare = _blank_spans(views.bare, [(m.start(), m.end()) for m in directives])
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(bare)]
    work.add(len(tokens))
    barrier_at = _barrier_positions(views)
    macros = _macros(views, directives, barrier_at)
    # Barriers in code, not in a macro's body (a `#define` may sit inside a function).
    starts = [m.start() for m in directives]
    in_code = {
        pos: barrier
        for pos, barrier in barrier_at.items()
        if not (k := bisect.bisect_right(starts, pos)) or directives[k - 1].end() <= pos
    }
    bodies = _function_bodies(tokens)
    reach = _reaching(tokens, bodies, macros, in_code, views)
    findings: list[Finding] = []
    for _name, start, end in bodies:
        body = tokens[start:end]
        if not body:
            continue
        fn = FunctionBody(body, {})
        _map_barriers(fn, in_code)
        _map_calls(fn, reach, macros)
        if fn.barriers:
            findings += Walker(fn, views.line_at, views.code).run()
    return findings


def _blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.append(text[pos:start])
        out.append(" " * (end - start))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _barrier_name(spelled: str) -> str:
    compact = re.sub(r"\s+", "", spelled).rstrip("(")
    if compact.startswith(("bar.", "barrier.")):
        return f"`{compact}` (inline PTX)"
    return f"`{compact.lstrip(':.')}()`"


def _barrier_positions(views: SourceViews) -> dict[int, Barrier]:
    """Every barrier in the file (macro bodies included), by its index in the spliced text."""
    work.add(2 * len(views.bare))
    found = {
        m.start(): Barrier(_barrier_name(m.group()), warp_only="syncwarp" in m.group())
        for m in _BARRIER.finditer(views.bare)
    }
    # `bar.sync` counts inside the string of an asm statement: the statement (from the last
    # `;`, `{` or `}` outside a literal) must start with an asm keyword.
    boundaries = [m.start() for m in _STATEMENT_BOUNDARY.finditer(views.bare)]
    asm_at = [m.start() for m in _ASM.finditer(views.bare)]
    for m in _PTX_BARRIER.finditer(views.code):
        work.add()
        b = bisect.bisect_left(boundaries, m.start())
        statement_start = boundaries[b - 1] if b else -1
        a = bisect.bisect_left(asm_at, m.start())
        if a and asm_at[a - 1] > statement_start:
            found[m.start()] = Barrier(_barrier_name(m.group()))
    return found


def _map_barriers(fn: FunctionBody, barrier_at: dict[int, Barrier]) -> None:
    """Tie each barrier inside the function to the token it starts in."""
    starts = [pos for _, pos in fn.tokens]
    first, last = starts[0], starts[-1] + len(fn.tokens[-1][0])
    for pos in sorted(barrier_at):
        if not first <= pos < last:
            continue
        work.add()
        i = bisect.bisect_right(starts, pos) - 1
        tok, start = fn.tokens[i]
        if start <= pos < start + len(tok):
            fn.barriers[i] = barrier_at[pos]
        elif tok in ("::", ".") and i + 1 < len(fn.tokens):
            fn.barriers[i + 1] = barrier_at[pos]  # `cg::sync(`, `g.sync(`: starts at `::`/`.`


@dataclass(frozen=True)
class _Macro:
    function_like: bool
    names: frozenset[str]  # identifiers in its body
    direct: _Reach | None


def _macros(
    views: SourceViews, directives: list[re.Match[str]], barrier_at: dict[int, Barrier]
) -> dict[str, _Macro]:
    """`#define NAME body` and `#define NAME(args) body`: what each body names, and the first
    barrier in it."""
    positions = sorted(barrier_at)
    macros: dict[str, _Macro] = {}
    for directive in directives:
        match = _DEFINE.match(views.bare, directive.start(), directive.end())
        if match is None:
            continue
        work.add(directive.end() - directive.start())
        body_start = match.end()
        names = frozenset(_IDENT.findall(views.bare, body_start, directive.end()))
        k = bisect.bisect_left(positions, body_start)
        direct = None
        if k < len(positions) and positions[k] < directive.end():
            barrier = barrier_at[positions[k]]
            direct = _Reach(barrier.text, views.line_at(positions[k]), barrier.warp_only)
        macros.setdefault(match.group(1), _Macro(match.group(2) is not None, names, direct))
    return macros


def _function_bodies(tokens: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
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
        while j >= 0 and toks[j] in _QUALIFIERS and i - j < 6:
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


def _reaching(
    tokens: list[tuple[str, int]],
    bodies: list[tuple[str, int, int]],
    macros: dict[str, _Macro],
    barrier_at: dict[int, Barrier],
    views: SourceViews,
) -> dict[str, _Reach]:
    """Functions and macros that reach a barrier, directly or through the functions and macros
    they use: a search backwards along the call edges, so each edge is followed once."""
    positions = sorted(barrier_at)
    callers: dict[str, set[str]] = {}
    reach: dict[str, _Reach] = {}
    for name, start, end in bodies:
        if not name:
            continue
        for j in range(start, end):
            tok = tokens[j][0]
            if tok in macros or (j + 1 < end and tokens[j + 1][0] == "(" and _is_callee(tok)):
                callers.setdefault(tok, set()).add(name)
        work.add(end - start)
        if name in reach or start >= end:
            continue
        first = tokens[start][1]
        k = bisect.bisect_left(positions, first)
        if k < len(positions) and positions[k] < tokens[end - 1][1] + len(tokens[end - 1][0]):
            barrier = barrier_at[positions[k]]
            reach[name] = _Reach(barrier.text, views.line_at(positions[k]), barrier.warp_only)
    for name, macro in macros.items():
        work.add(len(macro.names) + 1)
        for used in macro.names:
            callers.setdefault(used, set()).add(name)
        if macro.direct is not None:
            reach.setdefault(name, macro.direct)
    todo = deque(reach)
    while todo:
        callee = todo.popleft()
        for caller in callers.get(callee, ()):
            work.add()
            if caller not in reach:
                reach[caller] = reach[callee]
                todo.append(caller)
    return reach


def _is_callee(tok: str) -> bool:
    return tok not in _NOT_CALLS and _IDENT.fullmatch(tok) is not None


def _map_calls(fn: FunctionBody, reach: dict[str, _Reach], macros: dict[str, _Macro]) -> None:
    """Calls of functions and uses of macros that reach a barrier count as that barrier."""
    toks = fn.tokens
    for i, (tok, _) in enumerate(toks):
        found = reach.get(tok)
        if found is None or i in fn.barriers:
            continue
        followed_by_paren = i + 1 < len(toks) and toks[i + 1][0] == "("
        macro = macros.get(tok)
        if macro is not None and (followed_by_paren or not macro.function_like):
            text = f"`{tok}` (a macro that reaches {found.barrier} on line {found.line})"
        elif macro is None and followed_by_paren and _is_callee(tok):
            text = f"`{tok}()` (which reaches {found.barrier} on line {found.line})"
        else:
            continue
        fn.barriers[i] = Barrier(text, found.warp_only)
    work.add(len(toks))
