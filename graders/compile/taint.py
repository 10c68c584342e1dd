"""Which variables hold a value that depends on the thread index, at each point of a function.

The barrier check asks this of every condition. Two answers, both linear in the function:

- `tainted_anywhere`: names assigned, directly or through others, from the thread index
  anywhere in the function (one search along the edges name -> names assigned from it);
- `FlowState`: the same, following the statements in order, so a variable reassigned from a
  value the whole block shares is clean again (a dot product that reuses `i` as the stride of
  its reduction after using it as the element index). Branches are merged (a name tainted on
  either side stays tainted); a loop first adds what its body can taint through any number of
  iterations. Past `FLOW_DEPTH` nested branches or `LOOP_DEPTH` nested loops the state only
  grows and also counts `tainted_anywhere`, so deep nesting costs no more than shallow code.
"""

from __future__ import annotations

import bisect
import re
from collections import deque
from dataclasses import dataclass

from graders.compile import work

TAINT_SOURCES = frozenset({"threadIdx", "thread_rank", "__lane_id", "laneid"})
# Block-wide reductions: every thread of the block gets the same value, whatever its argument
# (`__syncthreads_or(i < n)`), so names in their argument make nothing thread-dependent.
BLOCK_REDUCTIONS = frozenset({"__syncthreads_or", "__syncthreads_and", "__syncthreads_count"})
ASSIGNMENT_OPS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "|=", "&=", "^="})
FLOW_DEPTH = 16
LOOP_DEPTH = 8
_IDENT = re.compile(r"[A-Za-z_]\w*", re.ASCII)
# Words before a `{` or `(` that make it no initialiser of a variable named there.
_NOT_DECLARED = frozenset(
    {"return", "else", "do", "try", "case", "goto", "throw", "new", "delete", "sizeof",
     "alignof", "decltype", "typedef", "using", "namespace", "struct", "class", "union", "enum",
     "if", "while", "for", "switch", "catch", "operator", "template", "typename",
     "static_assert", "co_return", "co_yield", "co_await", "asm", "__asm__", "__asm",
     "requires", "noexcept"}
)  # fmt: skip


@dataclass(frozen=True)
class Assignment:
    op: int  # token index of the operator
    target: str
    sources: tuple[str, ...]  # the names its right-hand side reads
    compound: bool  # `+=`, ...: the target's old value is read too
    chained: bool  # its right-hand side ends at another assignment: `a = b = c`


def _initialiser(toks: list[str], i: int) -> bool:
    """Whether the `{` or `(` at i initialises the variable named before it: `unsigned i{...}`,
    `int i(...)`, `dim3 g(...)`, `float* p{...}` (not a call, a block or a cast)."""
    if i < 2 or not _IDENT.fullmatch(toks[i - 1]) or toks[i - 1] in _NOT_DECLARED:
        return False
    before = toks[i - 2]
    if _IDENT.fullmatch(before):
        return before not in _NOT_DECLARED
    return toks[i] == "{" and before in ("*", "&", "&&", ">", ",")


def _initialiser_sources(toks: list[str], i: int) -> tuple[list[str], int]:
    """The names inside the initialiser's brackets (to the matching one, or a `;`)."""
    sources: list[str] = []
    depth = 0
    j = i + 1
    while j < len(toks) and toks[j] != ";":
        t = toks[j]
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            if depth == 0:
                break
            depth -= 1
        elif _IDENT.fullmatch(t):
            sources.append(t)
        j += 1
    return sources, j


def assignments(toks: list[str]) -> list[Assignment]:
    """Every assignment to a plain variable, in order; an initialiser in braces or parentheses
    (`unsigned i{threadIdx.x};`) counts as one.

    A right-hand side is read up to the next `;`, brace, assignment (at any depth: `a = (b =
    c)` makes `a` read `b`), or a comma or unmatched `)` at its own depth, so each token is read
    once; an initialiser's, to its closing bracket.
    """
    found: list[Assignment] = []
    n = len(toks)
    for i, tok in enumerate(toks):
        if tok in ("{", "(") and _initialiser(toks, i):
            initial, j = _initialiser_sources(toks, i)
            work.add(j - i + 1)
            found.append(Assignment(i, toks[i - 1], tuple(initial), False, False))
            continue
        if tok not in ASSIGNMENT_OPS or i == 0:
            continue
        target = toks[i - 1]
        if not _IDENT.fullmatch(target) or (i >= 2 and toks[i - 2] in (".", "->")):
            continue  # `a[i] = ...`, `s.x = ...`: an element, not a variable
        sources: list[str] = []
        depth = 0
        j = i + 1
        while j < n:
            t = toks[j]
            if t in (";", "{", "}") or t in ASSIGNMENT_OPS or (depth == 0 and t == ","):
                break
            if t in BLOCK_REDUCTIONS and j + 1 < n and toks[j + 1] == "(":
                j = _past_call(toks, j + 1)  # the block's shared answer
                continue
            if t in ("(", "["):
                depth += 1
            elif t in (")", "]"):
                depth -= 1
                if depth < 0:
                    break
            elif _IDENT.fullmatch(t):
                sources.append(t)
            j += 1
        work.add(j - i)
        # `a = b = c`: `a` reads `b` (the last name before the next operator) after `b = c`;
        # FlowState.apply runs a chain from its right end.
        chained = j < n and toks[j] in ASSIGNMENT_OPS
        found.append(Assignment(i, target, tuple(sources), tok != "=", chained))
    return found


def _past_call(toks: list[str], j: int) -> int:
    """Index after the parentheses that open at j (or where a `;` or brace ends them first)."""
    depth = 0
    k = j
    while k < len(toks) and toks[k] not in (";", "{", "}"):
        if toks[k] == "(":
            depth += 1
        elif toks[k] == ")":
            depth -= 1
            if depth == 0:
                return k + 1
        k += 1
    return k


def tainted_anywhere(assigns: list[Assignment]) -> set[str]:
    """Names assigned (directly or through others) from the thread index, anywhere."""
    assigned_from: dict[str, set[str]] = {}
    for a in assigns:
        for name in a.sources:
            assigned_from.setdefault(name, set()).add(a.target)
    tainted = set(TAINT_SOURCES)
    todo = list(tainted)
    while todo:
        for name in assigned_from.get(todo.pop(), ()):
            work.add()
            if name not in tainted:
                tainted.add(name)
                todo.append(name)
    return tainted


class FlowState:
    """The tainted names at the current point of a walk through one function."""

    def __init__(self, assigns: list[Assignment], anywhere: set[str]) -> None:
        self.assigns = assigns
        self.ops = [a.op for a in assigns]
        self.anywhere = anywhere
        self.tainted: set[str] = set(TAINT_SOURCES)
        self.journals: list[dict[str, bool]] = []  # name -> its value before this branch
        self.branches = 0
        self.loops = 0
        self.loose = 0  # > 0: past the depth limits, the state only grows

    def is_tainted(self, name: str) -> bool:
        return name in self.tainted or (self.loose > 0 and name in self.anywhere)

    def _set(self, name: str, value: bool) -> None:
        if (name in self.tainted) == value:
            return
        if self.loose and not value:
            return
        if self.journals:
            self.journals[-1].setdefault(name, not value)
        if value:
            self.tainted.add(name)
        else:
            self.tainted.discard(name)

    def apply(self, start: int, end: int) -> None:
        """The assignments whose operator lies in tokens [start, end), in order; a chain
        `a = b = c` from its right end."""
        lo, hi = bisect.bisect_left(self.ops, start), bisect.bisect_left(self.ops, end)
        work.add(hi - lo + 1)
        k = lo
        while k < hi:
            last = k
            while last + 1 < hi and self.assigns[last].chained:
                last += 1
            for a in reversed(self.assigns[k : last + 1]):
                value = any(self.is_tainted(s) for s in a.sources)
                self._set(a.target, value or (a.compound and self.is_tainted(a.target)))
            k = last + 1

    def begin_branch(self) -> bool:
        """Start a branch; False when past the depth limit (then nothing is undone after it)."""
        if self.loose or self.branches >= FLOW_DEPTH:
            self.loose += 1
            return False
        self.branches += 1
        self.journals.append({})
        return True

    def end_branch(self, exact: bool) -> dict[str, bool]:
        """Undo the branch's changes; return name -> the value the branch left."""
        if not exact:
            self.loose -= 1
            return {}
        self.branches -= 1
        journal = self.journals.pop()
        left = {name: name in self.tainted for name in journal}
        for name, before in journal.items():
            self._set(name, before)
        return left

    def merge(self, *branches: dict[str, bool]) -> None:
        """After the branches: a name is tainted if any path left it tainted (a path that
        did not change a name left its value from before)."""
        for name in {n for branch in branches for n in branch}:
            work.add()
            before = name in self.tainted
            self._set(name, before or any(branch.get(name, before) for branch in branches))

    def enter_loop(self, start: int, end: int) -> bool:
        """Before a loop over tokens [start, end): taint what its assignments can taint over
        any number of iterations. False when past the loop depth (then the state is loose)."""
        if self.loose or self.loops >= LOOP_DEPTH:
            self.loose += 1
            return False
        self.loops += 1
        lo, hi = bisect.bisect_left(self.ops, start), bisect.bisect_left(self.ops, end)
        assigned_from: dict[str, list[str]] = {}
        todo: deque[str] = deque()
        for a in self.assigns[lo:hi]:
            work.add(len(a.sources) + 1)
            for name in a.sources:
                assigned_from.setdefault(name, []).append(a.target)
            if any(self.is_tainted(s) for s in a.sources):
                todo.append(a.target)
        while todo:
            name = todo.popleft()
            work.add()
            if self.is_tainted(name):
                continue
            self._set(name, True)
            todo.extend(assigned_from.get(name, ()))
        return True

    def leave_loop(self, exact: bool) -> None:
        if exact:
            self.loops -= 1
        else:
            self.loose -= 1
