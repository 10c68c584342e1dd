"""Static warnings at compile time: the barrier problem (a barrier in thread-divergent code).

A block barrier (`__syncthreads()`, `__syncwarp()`, `cg::sync(g)`, `g.sync()`, `bar.sync` in
inline PTX) must be reached by every thread of the block. This check walks each function's
statements and reports a barrier that sits under an `if`, `else`, loop or `switch` whose
condition depends on the thread index, and an early `return` under such a condition that
comes before a barrier. "Depends on the thread index" means the condition uses `threadIdx`
(or `thread_rank()`), or a variable assigned from one, followed through simple assignments
(`int Row = blockIdx.y * blockDim.y + threadIdx.y;`). A condition on `blockIdx` or `blockDim`
alone is the same for the whole block, so it is not reported; nor is `__syncwarp()` under a
condition that splits threads at warp boundaries (`if (tid < 32)`, `lane`, `warpSize`).

It is a heuristic over tokens, not a compiler: it errs towards silence on code it cannot
follow, since the sanitizer's synccheck confirms the problem on a GPU.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from graders.compile.source_text import SourceViews
from graders.results import Finding

_TOKEN = re.compile(r'[A-Za-z_]\w*|\d[\w.\']*|"[^"\n]*"?|\'[^\'\n]*\'?|::|->|\S')
_BARRIER = re.compile(
    r"\b__syncthreads(?:_count|_and|_or)?\s*\(|\b__syncwarp\s*\(|\b__barrier_sync\s*\("
    r"|(?:::|\.|\bcg\s*::\s*)\s*sync\s*\("
)
# In inline PTX (inside an asm statement's string).
_PTX_BARRIER = re.compile(r"\bbar(?:rier)?\.(?:sync|cta\.sync)\b")
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_TAINT_SOURCES = frozenset({"threadIdx", "thread_rank", "__lane_id", "laneid"})
# The right-hand side is read up to the statement's end but at most _RHS_CHARS characters: a
# chain `a = 1, a = 1, ...` with no `;` for 256 KiB made each match read to the end (minutes of
# the worker's CPU, quadratic in the file).
_RHS_CHARS = 300
_ASSIGNMENT = re.compile(
    r"(?<![\w\].>])([A-Za-z_]\w*)\s*(?:=(?!=)|\+=|-=|\*=|/=|%=|<<=|>>=|\|=|&=|\^=)"
    rf"(?=\s*([^;{{}}]{{0,{_RHS_CHARS}}}))"
)
_IDENT = re.compile(r"[A-Za-z_]\w*")
# Statements nest deeper than this only in generated or hostile code; the walk recurses per level.
_MAX_DEPTH = 300
# Conditions that split threads only at warp boundaries (a warp barrier under them is fine).
_WARP_ALIGNED = re.compile(r"\b(?:32|31|warpSize|WARP_SIZE|warp\w*|lane\w*)\b")
_DIRECTIVE_LINE = re.compile(r"^[ \t]*(?:#|%:).*$", re.M)


@dataclass
class _Cond:
    keyword: str  # "if", "else", "for", "while", "do", "switch"
    text: str
    line: int
    tainted_by: list[str]


@dataclass
class _Function:
    tokens: list[tuple[str, int]]  # (token text, start index in the spliced source)
    tainted: set[str]
    barriers: dict[int, str] = field(default_factory=dict)  # token index -> barrier spelled


def find_barrier_problems(source: str) -> list[Finding]:
    """Findings (tool "static", kind "divergent_barrier") with the student's line numbers."""
    views = SourceViews.of(source)
    bare = _DIRECTIVE_LINE.sub(lambda m: " " * len(m.group()), views.bare)
    code = _DIRECTIVE_LINE.sub(lambda m: " " * len(m.group()), views.code)
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(bare)]
    barrier_at = {m.start(): _barrier_name(m.group()) for m in _BARRIER.finditer(bare)}
    for m in _PTX_BARRIER.finditer(code):
        statement_start = max(code.rfind(c, 0, m.start()) for c in ";{}")
        if _ASM.search(code, statement_start + 1, m.start()):
            barrier_at[m.start()] = _barrier_name(m.group())
    findings: list[Finding] = []
    for start, end in _function_bodies(tokens):
        body = tokens[start:end]
        if not body:
            continue
        text = bare[body[0][1] : body[-1][1] + len(body[-1][0])]
        fn = _Function(body, _tainted_names(text))
        _map_barriers(fn, barrier_at)
        if fn.barriers:
            findings += _Walker(fn, views, code).run()
    return findings


def _barrier_name(spelled: str) -> str:
    compact = re.sub(r"\s+", "", spelled).rstrip("(")
    if compact.startswith(("bar.", "barrier.")):
        return f"`{compact}` (inline PTX)"
    return f"`{compact.lstrip(':.')}()`"


def _map_barriers(fn: _Function, barrier_at: dict[int, str]) -> None:
    """Tie each barrier to the token it starts in (a call's name, or an asm string)."""
    starts = [pos for _, pos in fn.tokens]
    for pos, name in barrier_at.items():
        i = bisect.bisect_right(starts, pos) - 1
        if i < 0:
            continue
        tok, start = fn.tokens[i]
        if start <= pos < start + len(tok):
            fn.barriers[i] = name
        elif tok in ("::", ".") and i + 1 < len(fn.tokens):
            fn.barriers[i + 1] = name  # `cg::sync(`, `g.sync(`: the match starts at `::`/`.`


def _function_bodies(tokens: list[tuple[str, int]]) -> list[tuple[int, int]]:
    """Token ranges of function bodies: a top-level `{` right after `)` (or a qualifier);
    other top-level braces (namespace, extern "C", struct) are looked into."""
    bodies: list[tuple[int, int]] = []
    table = _match_table(tokens)
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "{":
            i += 1
            continue
        end = _matching(table, i, len(tokens))
        prev = tokens[i - 1][0] if i > 0 else ""
        if prev in (")", "const", "noexcept", "override", "final"):
            bodies.append((i + 1, end))
            i = end + 1
        elif prev == "=":
            i = end + 1  # an initializer list
        else:
            i += 1  # namespace / extern "C" / struct: its functions are found inside
    return bodies


_PAIRS = {"{": "}", "(": ")", "[": "]"}


def _match_table(tokens: list[tuple[str, int]]) -> dict[int, int]:
    """Index of each opening bracket -> index of its closing one, in one pass (a hostile file
    nests thousands deep; searching for each pair again would be quadratic)."""
    table: dict[int, int] = {}
    stacks: dict[str, list[int]] = {"{": [], "(": [], "[": []}
    closers = {v: k for k, v in _PAIRS.items()}
    for j, (tok, _) in enumerate(tokens):
        if tok in _PAIRS:
            stacks[tok].append(j)
        elif tok in closers and stacks[closers[tok]]:
            table[stacks[closers[tok]].pop()] = j
    return table


def _matching(table: dict[int, int], i: int, length: int) -> int:
    return table.get(i, length)


def _tainted_names(text: str) -> set[str]:
    """Variables assigned (directly or through others) from the thread index; a fixpoint."""
    # name -> the names assigned from it; tainting spreads along these edges. (Sweeping all
    # assignments until nothing changed took a sweep per link of a chain written backwards:
    # quadratic, seconds of the worker's CPU on one file.)
    assigned_from: dict[str, set[str]] = {}
    for m in _ASSIGNMENT.finditer(text):
        for used in _IDENT.findall(m.group(2)):
            assigned_from.setdefault(used, set()).add(m.group(1))
    tainted = set(_TAINT_SOURCES)
    todo = list(tainted)
    while todo:
        for name in assigned_from.get(todo.pop(), ()):
            if name not in tainted:
                tainted.add(name)
                todo.append(name)
    return tainted


def _balanced_prefix(text: str) -> str:
    """The right-hand side up to a `)` it did not open (the end of a `for (...)` header)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                return text[:i]
        elif ch == "," and depth == 0:
            return text[:i]  # `int a = x, b = y;`: the next declarator is its own assignment
    return text


class _Walker:
    """Walk one function's statements with the stack of enclosing conditions."""

    def __init__(self, fn: _Function, views: SourceViews, code: str) -> None:
        self.fn = fn
        self.toks = [t for t, _ in fn.tokens]
        self.pairs = _match_table(fn.tokens)
        self.depth = 0
        self.views = views
        self.code = code
        self.findings: list[Finding] = []
        self.returns: list[tuple[int, _Cond]] = []  # (token index, the tainted condition)

    def run(self) -> list[Finding]:
        i = 0
        while i < len(self.toks):
            i = self.statement(i, [])
        last_barrier = max(self.fn.barriers)
        for index, cond in self.returns:
            if index < last_barrier:
                line = self.line(index)
                barrier_line = self.line(min(b for b in self.fn.barriers if b > index))
                self.findings.append(Finding(
                    tool="static", kind="divergent_barrier", line=line,
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
        return self.views.line_at(self.fn.tokens[index][1])

    def paren(self, i: int) -> tuple[int, int]:
        """(index after `(`, index of its `)`) for a `(` at i, tolerating its absence."""
        if i < len(self.toks) and self.toks[i] == "(":
            return i + 1, _matching(self.pairs, i, len(self.toks))
        return i, i

    def cond(self, keyword: str, start: int, end: int) -> _Cond:
        names = {t for t in self.toks[start:end] if _IDENT.fullmatch(t)}
        tainted = sorted(names & self.fn.tainted)
        first, last = self.fn.tokens[start:end][:1], self.fn.tokens[start:end][-1:]
        text = ""
        if first and last:
            text = " ".join(self.code[first[0][1] : last[0][1] + len(last[0][0])].split())
        if len(text) > 60:
            text = text[:57] + "..."
        return _Cond(keyword, text, self.line(max(start - 1, 0)), tainted)

    def consume(self, start: int, end: int, conds: list[_Cond]) -> None:
        """Plain tokens (an expression or a condition): report the barriers among them."""
        divergent = [c for c in conds if c.tainted_by]
        for i in range(start, min(end, len(self.toks))):
            if i not in self.fn.barriers or not divergent:
                continue
            if "syncwarp" in self.fn.barriers[i] and all(
                _WARP_ALIGNED.search(c.text) for c in divergent
            ):
                continue  # `if (tid < 32) { ... __syncwarp(); }`: whole warps take the branch
            c = divergent[-1]
            self.findings.append(Finding(
                tool="static", kind="divergent_barrier", line=self.line(i),
                message=(
                    f"{self.fn.barriers[i]} is inside `{c.keyword} ({c.text})` on line "
                    f"{c.line}, which depends on the thread index through "
                    f"{', '.join(c.tainted_by)}: threads that do not take this path never "
                    "reach the barrier, so the block can hang or read tiles other threads "
                    "have not written (the barrier problem). Move the barrier out of the "
                    "condition and put the bounds checks around the loads and the store."
                ),
            ))  # fmt: skip

    def statement(self, i: int, conds: list[_Cond]) -> int:
        """Process the statement at i; return the index after it."""
        if i >= len(self.toks):
            return i
        if self.depth >= _MAX_DEPTH:  # nested deeper than real kernels: skip, say nothing
            if self.toks[i] == "{":
                return _matching(self.pairs, i, len(self.toks)) + 1
            return max(self._expression_end(i) + 1, i + 1)
        self.depth += 1
        try:
            return self._statement(i, conds)
        finally:
            self.depth -= 1

    def _statement(self, i: int, conds: list[_Cond]) -> int:
        tok = self.toks[i]
        if tok == "{":
            end = _matching(self.pairs, i, len(self.toks))
            j = i + 1
            while j < end:
                j = self.statement(j, conds)
            return end + 1
        if tok in ("if", "while", "switch", "for"):
            skip = 2 if self.toks[i + 1 : i + 2] == ["constexpr"] else 1
            start, close = self.paren(i + skip)
            self.consume(start, close, conds)
            cstart = start
            if tok == "for":  # only the middle clause decides how often the body runs
                semis = [k for k in range(start, close) if self.toks[k] == ";"]
                if len(semis) >= 2:
                    cstart, close_c = semis[0] + 1, semis[1]
                else:
                    close_c = close
            else:
                close_c = close
            cond = self.cond(tok, cstart, close_c)
            after = self.statement(close + 1, [*conds, cond])
            if tok == "if" and after < len(self.toks) and self.toks[after] == "else":
                other = _Cond("else", cond.text, cond.line, cond.tainted_by)
                after = self.statement(after + 1, [*conds, other])
            return after
        if tok == "do":
            # The body runs under the loop's condition, which comes after it.
            body_end = self._skip_statement(i + 1)
            if body_end < len(self.toks) and self.toks[body_end] == "while":
                start, close = self.paren(body_end + 1)
                cond = self.cond("do", start, close)
                self.statement(i + 1, [*conds, cond])
                return close + 2
            return self.statement(i + 1, conds)
        if tok in ("case", "default"):
            j = i
            while j < len(self.toks) and self.toks[j] != ":":
                j += 1
            return j + 1
        if tok == "return":
            tainted = [c for c in conds if c.tainted_by]
            if tainted:
                self.returns.append((i, tainted[-1]))
        end = self._expression_end(i)
        self.consume(i, end, conds)
        return max(end + 1, i + 1)

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
                    return j - 1 if t == "}" else j
                depth -= 1
            elif t == ";" and depth == 0:
                return j
            j += 1
        return j

    def _skip_statement(self, i: int) -> int:
        """Index after the statement at i, without reporting anything."""
        saved = (self.findings, self.returns)
        self.findings, self.returns = [], []
        try:
            return self.statement(i, [])
        finally:
            self.findings, self.returns = saved
