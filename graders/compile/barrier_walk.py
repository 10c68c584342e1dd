"""Walk one function's statements with the conditions that enclose them; report barriers that
only some threads of a block reach. Used by `graders.compile.static_checks`.

Linear in the function's tokens: bracket pairs come from one table, each statement's end is
found once (a `do` body's end was found by walking the body, then the body was walked again:
nested `do { } while` loops took 2^depth steps), and the enclosing conditions are a chain
whose innermost thread-dependent link is kept at each node, so a barrier costs O(1).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

from graders.compile import work
from graders.compile.source_text import match_table
from graders.compile.taint import BLOCK_REDUCTIONS, FlowState, assignments, tainted_anywhere
from graders.results import Finding

# Statements nest deeper than this only in generated or hostile code; the walk recurses per level.
MAX_DEPTH = 300
# Conditions that split threads only at warp boundaries (a warp barrier under them is fine).
_WARP_ALIGNED = re.compile(r"\b(?:32|31|warpSize|WARP_SIZE|warp\w*|lane\w*)\b")
_IDENT = re.compile(r"[A-Za-z_]\w*", re.ASCII)


@dataclass
class Cond:
    keyword: str  # "if", "else", "for", "while", "do", "switch"
    text: str
    line: int
    tainted_by: list[str]


@dataclass(frozen=True)
class Conds:
    """The enclosing conditions, innermost last, as a chain: pushing one is O(1)."""

    cond: Cond | None = None
    parent: Conds | None = None
    divergent: Cond | None = None  # the innermost condition that depends on the thread index
    warp_aligned: bool = True  # every thread-dependent condition splits at warp boundaries

    def push(self, cond: Cond) -> Conds:
        if not cond.tainted_by:
            return Conds(cond, self, self.divergent, self.warp_aligned)
        aligned = self.warp_aligned and bool(_WARP_ALIGNED.search(cond.text))
        return Conds(cond, self, cond, aligned)


@dataclass(frozen=True)
class Barrier:
    text: str  # how a finding names it: "`__syncthreads()`", "`load_tile()`, which reaches ..."
    warp_only: bool = False  # `__syncwarp()`: fine under a condition that splits whole warps


@dataclass
class FunctionBody:
    tokens: list[tuple[str, int]]  # (token text, start index in the spliced source)
    barriers: dict[int, Barrier]  # token index -> the barrier (or the call that reaches one)


class Walker:
    """Walk one function's statements with the chain of enclosing conditions."""

    def __init__(self, fn: FunctionBody, line_at: Callable[[int], int], code: str) -> None:
        self.fn = fn
        self.toks = [t for t, _ in fn.tokens]
        self.pairs = match_table(self.toks)
        assigns = assignments(self.toks)
        self.flow = FlowState(assigns, tainted_anywhere(assigns))
        self.depth = 0
        self.line_at = line_at
        self.code = code
        self.ends: dict[int, int] = {}
        self.findings: list[Finding] = []
        self.returns: list[tuple[int, Cond]] = []  # (token index, the tainted condition)

    def run(self) -> list[Finding]:
        i = 0
        while i < len(self.toks):
            i = self.statement(i, Conds())
        barriers = sorted(self.fn.barriers)
        for index, cond in self.returns:
            after = bisect.bisect_right(barriers, index)
            if after == len(barriers):
                continue
            barrier_line = self.line(barriers[after])
            self.findings.append(Finding(
                tool="static", kind="divergent_barrier", line=self.line(index),
                message=(
                    f"this `return` runs only for some threads (under `{cond.keyword} "
                    f"({cond.text})`, which depends on the thread index through "
                    f"{', '.join(cond.tainted_by)}), but the barrier on line {barrier_line} "
                    "comes after it: threads that returned never reach the barrier, so the "
                    "block can hang or compute wrong results (the barrier problem). Keep "
                    "every thread running to the barrier and guard only the loads and the "
                    "store."
                ),
            ))  # fmt: skip
        return sorted(self.findings, key=lambda f: f.line or 0)

    def line(self, index: int) -> int:
        return self.line_at(self.fn.tokens[index][1])

    def matching(self, i: int) -> int:
        return self.pairs.get(i, len(self.toks))

    def paren(self, i: int) -> tuple[int, int]:
        """(index after `(`, index of its `)`) for a `(` at i, tolerating its absence."""
        if i < len(self.toks) and self.toks[i] == "(":
            return i + 1, self.matching(i)
        return i, i

    def cond(self, keyword: str, start: int, end: int) -> Cond:
        work.add(max(end - start, 0) + 1)
        names: set[str] = set()
        k = start
        while k < end:  # a block-wide reduction's argument is the block's, not a thread's
            tok = self.toks[k]
            if tok in BLOCK_REDUCTIONS and k + 1 < end and self.toks[k + 1] == "(":
                k = self.matching(k + 1) + 1
                continue
            if _IDENT.fullmatch(tok):
                names.add(tok)
            k += 1
        tainted = sorted(n for n in names if self.flow.is_tainted(n))
        text = ""
        if start < end <= len(self.toks):
            first, last = self.fn.tokens[start], self.fn.tokens[end - 1]
            text = " ".join(self.code[first[1] : last[1] + len(last[0])].split())
        if len(text) > 60:
            text = text[:57] + "..."
        return Cond(keyword, text, self.line(max(start - 1, 0)), tainted)

    def consume(self, start: int, end: int, conds: Conds) -> None:
        """Plain tokens (an expression or a condition): report the barriers among them."""
        end = min(end, len(self.toks))
        work.add(max(end - start, 0) + 1)
        self.flow.apply(start, end)
        c = conds.divergent
        if c is None:
            return
        for i in range(start, end):
            barrier = self.fn.barriers.get(i)
            if barrier is None:
                continue
            if barrier.warp_only and conds.warp_aligned:
                continue  # `if (tid < 32) { ... __syncwarp(); }`: whole warps take the branch
            self.findings.append(Finding(
                tool="static", kind="divergent_barrier", line=self.line(i),
                message=(
                    f"{barrier.text} is inside `{c.keyword} ({c.text})` on line "
                    f"{c.line}, which depends on the thread index through "
                    f"{', '.join(c.tainted_by)}: threads that do not take this path never "
                    "reach the barrier, so the block can hang or read tiles other threads "
                    "have not written (the barrier problem). Move the barrier out of the "
                    "condition and put the bounds checks around the loads and the store."
                ),
            ))  # fmt: skip

    def statement(self, i: int, conds: Conds) -> int:
        """Process the statement at i; return the index after it."""
        if i >= len(self.toks):
            return i
        work.add()
        if self.depth >= MAX_DEPTH:  # nested deeper than real kernels: skip, say nothing
            end = self.end(i)
            self.flow.loose += 1  # what it assigns may taint later code
            self.flow.apply(i, end)
            self.flow.loose -= 1
            return end
        self.depth += 1
        try:
            return self._statement(i, conds)
        finally:
            self.depth -= 1

    def _statement(self, i: int, conds: Conds) -> int:
        tok = self.toks[i]
        if tok == "{":
            end = self.matching(i)
            j = i + 1
            while j < end:
                j = self.statement(j, conds)
            return end + 1
        if tok in ("if", "switch"):
            skip = 2 if self.toks[i + 1 : i + 2] == ["constexpr"] else 1
            start, close = self.paren(i + skip)
            self.consume(start, close, conds)
            cond = self.cond(tok, start, close)
            exact = self.flow.begin_branch()
            after = self.statement(close + 1, conds.push(cond))
            taken = self.flow.end_branch(exact)
            other: dict[str, bool] = {}
            if tok == "if" and after < len(self.toks) and self.toks[after] == "else":
                otherwise = Cond("else", cond.text, cond.line, cond.tainted_by)
                exact = self.flow.begin_branch()
                after = self.statement(after + 1, conds.push(otherwise))
                other = self.flow.end_branch(exact)
            self.flow.merge(taken, other)
            return after
        if tok in ("while", "for"):
            start, close = self.paren(i + 1)
            looping = self.flow.enter_loop(start, self.end(i))
            self.consume(start, close, conds)
            cstart, cclose = start, close
            if tok == "for":  # only the middle clause decides how often the body runs
                semis = [k for k in range(start, close) if self.toks[k] == ";"]
                work.add(close - start)
                if len(semis) >= 2:
                    cstart, cclose = semis[0] + 1, semis[1]
            cond = self.cond(tok, cstart, cclose)
            after = self._loop_body(close + 1, conds.push(cond))
            self.flow.leave_loop(looping)
            return after
        if tok == "do":
            # The body runs under the loop's condition, which comes after it.
            body_end = self.end(i + 1)
            if body_end < len(self.toks) and self.toks[body_end] == "while":
                start, close = self.paren(body_end + 1)
                looping = self.flow.enter_loop(i + 1, close)
                self.consume(start, close, conds)
                self._loop_body(i + 1, conds.push(self.cond("do", start, close)))
                self.flow.leave_loop(looping)
                return close + 2
            return self.statement(i + 1, conds)
        if tok in ("case", "default"):
            return self._label_end(i)
        if tok == "return" and conds.divergent is not None:
            self.returns.append((i, conds.divergent))
        end = self._expression_end(i)
        self.consume(i, end, conds)
        return max(end + 1, i + 1)

    def _loop_body(self, i: int, conds: Conds) -> int:
        """Walk a loop's body as a branch: it may run no times, so what it leaves is merged."""
        exact = self.flow.begin_branch()
        after = self.statement(i, conds)
        self.flow.merge(self.flow.end_branch(exact))
        return after

    def end(self, i: int) -> int:
        """Index after the statement at i, reporting nothing; each statement's end is found
        once (memoized), however often an enclosing `do` asks."""
        cached = self.ends.get(i)
        if cached is not None:
            return cached
        work.add()
        if i >= len(self.toks):
            result = i
        elif self.depth >= MAX_DEPTH:
            result = self.matching(i) + 1 if self.toks[i] == "{" else self._expression_end(i) + 1
        else:
            self.depth += 1
            try:
                result = self._end(i)
            finally:
                self.depth -= 1
        self.ends[i] = result
        return result

    def _end(self, i: int) -> int:
        tok = self.toks[i]
        if tok == "{":
            return self.matching(i) + 1
        if tok in ("if", "while", "switch", "for"):
            skip = 2 if self.toks[i + 1 : i + 2] == ["constexpr"] else 1
            _, close = self.paren(i + skip)
            after = self.end(close + 1)
            if tok == "if" and after < len(self.toks) and self.toks[after] == "else":
                after = self.end(after + 1)
            return after
        if tok == "do":
            body_end = self.end(i + 1)
            if body_end < len(self.toks) and self.toks[body_end] == "while":
                return self.paren(body_end + 1)[1] + 2
            return body_end
        if tok in ("case", "default"):
            return self._label_end(i)
        return max(self._expression_end(i) + 1, i + 1)

    def _label_end(self, i: int) -> int:
        j = i
        while j < len(self.toks) and self.toks[j] != ":":
            j += 1
        work.add(j - i + 1)
        return j + 1

    def _expression_end(self, i: int) -> int:
        """Index of the `;` (or closing brace) that ends a plain statement."""
        depth = 0
        j = i
        while j < len(self.toks):
            t = self.toks[j]
            if t in ("(", "[", "{"):
                depth += 1
            elif t in (")", "]", "}"):
                if depth == 0:
                    work.add(j - i + 1)
                    return j - 1 if t == "}" else j
                depth -= 1
            elif t == ";" and depth == 0:
                break
            j += 1
        work.add(j - i + 1)
        return j
