"""Static warnings at compile time: the barrier problem (a barrier in thread-divergent code).

A block barrier (`__syncthreads()` and its `_and`/`_or`/`_count` forms, `__barrier_sync`, a
cooperative-groups sync of a thread block or grid: `block.sync()`, `cg::sync(block)`,
`cg::this_thread_block().sync()`, `bar.sync` in inline PTX) must be reached by every thread of
the block. This check walks each function's statements and reports a barrier that sits under an
`if`, `else`, loop or `switch` whose condition depends on the thread index, and an early
`return` under such a condition that comes before a barrier. A call to a `__device__` function
that reaches a barrier (directly or through further calls), and a macro whose body does
(`#define SYNC __syncthreads()`, `#define SYNC() __syncthreads()`), count as that barrier,
named with both lines.

"Depends on the thread index" means the condition uses `threadIdx` (or `thread_rank()`), or a
variable assigned from one, followed through assignments (`int Row = blockIdx.y * blockDim.y +
threadIdx.y;`). A condition on `blockIdx` or `blockDim` alone is the same for the whole block,
so it is not reported; nor is a condition that is itself a block-wide reduction
(`while (__syncthreads_or(i < n))`: the same value in every thread, by definition), nor a value
assigned from one. A warp barrier is judged by its mask: `__syncwarp()` with the full mask
(none, or `0xffffffff`) is reported only under a condition that does not split threads at warp
boundaries (`if (tid < 32)`, `lane`, `warpSize` do), and `__syncwarp(mask)` with any other mask
names the threads that take part, which a branch may rightly be (`if (tid < 16)
__syncwarp(0xffff)`), so it is not reported. A sync of a group this check cannot tell is a
block or a grid (a tile, a coalesced group) is not reported either.

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
from graders.compile.barrier_walk import Barrier, FunctionBody, Walker
from graders.compile.preprocess import Program, program_of
from graders.compile.source_text import (
    DIRECTIVE_LINE,
    SourceViews,
    code_tokens,
    function_bodies,
)
from graders.results import Finding

_BARRIER = re.compile(
    r"\b__syncthreads(?:_count|_and|_or)?\s*\(|\b__syncwarp\s*\(|\b__barrier_sync\s*\("
    r"|(?:::|\.|->|\bcg\s*::\s*)\s*sync\s*\("
)
# What a group's sync is called on: `block.sync(`, `this_thread_block().sync(` (read on at most
# `_LOOK` characters before it), or `cg::sync(block)` (after it).
_LOOK = 80
_ARGUMENT = re.compile(r"\s*([A-Za-z_]\w*)\s*\)", re.ASCII)
# Groups that are a whole block (or a whole grid) and the calls that make them.
_BLOCK_GROUP_TYPES = frozenset({"thread_block", "grid_group"})
_BLOCK_GROUP_MAKERS = frozenset({"this_thread_block", "this_grid"})
# `__syncwarp`'s argument when it is every lane of the warp (absent means the same).
_FULL_MASK = re.compile(
    r"\s*(?:0[xX][fF]{8}[uU]?[lL]{0,2}|~0[uU]?|-1|4294967295[uU]?[lL]{0,2})?\s*\)", re.ASCII
)
# In inline PTX (inside an asm statement's string).
_PTX_BARRIER = re.compile(r"\bbar(?:rier)?\.(?:sync|cta\.sync)\b")
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_STATEMENT_BOUNDARY = re.compile(r"[;{}]")
_IDENT = re.compile(r"[A-Za-z_]\w*", re.ASCII)
_DEFINE = re.compile(r"[ \t]*(?:#|%:)[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)\n]*\))?", re.ASCII)
_NOT_CALLS = frozenset({"if", "while", "for", "switch", "return", "sizeof", "do", "else"})


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
    directives = list(DIRECTIVE_LINE.finditer(views.bare))
    work.add(len(views.bare) + len(directives))
    tokens = code_tokens(views)
    barrier_at = _barrier_positions(views, _block_groups(tokens))
    macros = _macros(views, directives, barrier_at)
    # Barriers in code, not in a macro's body (a `#define` may sit inside a function).
    starts = [m.start() for m in directives]
    in_code = {
        pos: barrier
        for pos, barrier in barrier_at.items()
        if not (k := bisect.bisect_right(starts, pos)) or directives[k - 1].end() <= pos
    }
    bodies = function_bodies(tokens)
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


def _barrier_name(spelled: str) -> str:
    compact = re.sub(r"\s+", "", spelled).rstrip("(")
    if compact.startswith(("bar.", "barrier.")):
        return f"`{compact}` (inline PTX)"
    return f"`{compact.lstrip(':.->')}()`"


def _block_groups(tokens: list[tuple[str, int]]) -> set[str]:
    """Names of cooperative groups that are a whole block or grid: declared with such a type
    (`cg::thread_block block = ...`, `const thread_block& b`) or made by `this_thread_block()`
    or `this_grid()` (`auto block = cg::this_thread_block();`). One look at each token and a
    few after it."""
    names: set[str] = set()
    toks = [t for t, _ in tokens]
    for i, tok in enumerate(toks):
        if tok in _BLOCK_GROUP_TYPES:
            j = i + 1
            while j < len(toks) and j - i < 4 and toks[j] in ("&", "const", "*"):
                j += 1
            if j < len(toks) and _IDENT.fullmatch(toks[j]):
                names.add(toks[j])
        elif tok == "=" and i > 0 and _IDENT.fullmatch(toks[i - 1]):
            ahead = toks[i + 1 : i + 6]
            if any(t in _BLOCK_GROUP_MAKERS for t in ahead):
                names.add(toks[i - 1])
    work.add(len(toks))
    return names


def _barrier_kind(bare: str, match: re.Match[str], block_groups: set[str]) -> Barrier | None:
    """The barrier a `_BARRIER` match is, or None where it is one this check leaves to the
    sanitizer: a warp sync with a mask that is not the full warp's, a sync of a group that is
    not known to be a block or a grid."""
    spelled = match.group()
    name = _barrier_name(spelled)
    if "syncwarp" in spelled:
        full = _FULL_MASK.match(bare, match.end(), match.end() + _LOOK)
        return Barrier(name, warp_only=True) if full else None
    if spelled.lstrip().startswith(("__syncthreads", "__barrier_sync")):
        return Barrier(name)
    if spelled.lstrip().startswith((".", "->")):  # `block.sync()`, `cg::this_thread_block().sync()`
        before = _receiver(bare, match.start())
        if before is None:
            return None
        receiver, called = before
        is_block = receiver in _BLOCK_GROUP_MAKERS if called else receiver in block_groups
        return Barrier(name) if is_block else None
    argument = _ARGUMENT.match(bare, match.end(), match.end() + _LOOK)  # `cg::sync(block)`
    return Barrier(name) if argument and argument.group(1) in block_groups else None


def _receiver(bare: str, end: int) -> tuple[str, bool] | None:
    """(name, whether it is called with no arguments) of what ends just before `end`:
    `block` in `block.sync(`, `this_thread_block` in `this_thread_block().sync(`; read
    backwards over at most `_LOOK` characters."""
    low = max(0, end - _LOOK)

    def blanks_before(i: int) -> int:
        while i > low and bare[i - 1].isspace():
            i -= 1
        return i

    i = blanks_before(end)
    called = i > low and bare[i - 1] == ")"
    if called:
        i = blanks_before(i - 1)
        if not (i > low and bare[i - 1] == "("):
            return None
        i = blanks_before(i - 1)
    start = i
    while (
        start > low
        and bare[start - 1].isascii()
        and (bare[start - 1].isalnum() or bare[start - 1] == "_")
    ):
        start -= 1
    name = bare[start:i]
    return (name, called) if _IDENT.fullmatch(name) else None


def _barrier_positions(views: SourceViews, block_groups: set[str]) -> dict[int, Barrier]:
    """Every barrier in the file (macro bodies included), by its index in the spliced text."""
    work.add(2 * len(views.bare))
    found: dict[int, Barrier] = {}
    for m in _BARRIER.finditer(views.bare):
        work.add(_LOOK)
        barrier = _barrier_kind(views.bare, m, block_groups)
        if barrier is not None:
            found[m.start()] = barrier
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
