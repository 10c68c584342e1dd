"""Macros and C integer constant expressions, as the preprocessor reads them in `#if`.

Used by `graders.compile.preprocess` (conditions) and `graders.compile.declarations` (a tile
width written as an expression of macros and constants). Three answers are possible: a value,
or None where the grader cannot know it (a macro it does not know, a construct it does not
evaluate, an expansion past the budget). A caller treats None as "either way".

Bounded work: every token expanded or evaluated is paid from a `Budget`, shared by the whole
file; a macro that doubles on every level (2^30 tokens) exhausts it and is then unknown, never
expanded. Recursion (macro arguments, parentheses) stops at `MAX_DEPTH`. Each regular
expression matches in one pass (see `graders.compile.work`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from graders.compile import work

MAX_DEPTH = 64
# The most one expression (an `#if`, a declaration's value) may spend of the file's budget.
EXPRESSION_STEPS = 50_000
_MASK = (1 << 64) - 1
_SIGN = 1 << 63
# A pp-token of a directive's text (comments already blanked): identifiers, pp-numbers,
# character and string literals (bodies unrolled, so each matches in one pass), punctuators.
_PP_TOKEN = re.compile(
    r"""(?P<ident>[A-Za-z_]\w*)
      | (?P<number>\.?\d(?:[eEpP][+-]|'\w|[\w.])*)
      | (?P<char>'[^'\\\n]*(?:\\.[^'\\\n]*)*'?)
      | (?P<string>"[^"\\\n]*(?:\\.[^"\\\n]*)*"?)
      | (?P<punct>%:%:|\.\.\.|<<=|>>=|->|::|<<|>>|<=|>=|==|!=|&&|\|\||\#\#|%:|\S)""",
    re.X | re.ASCII,
)
_INTEGER = re.compile(
    r"(?:0[xX](?P<hex>[0-9a-fA-F]+)|0[bB](?P<bin>[01]+)|(?P<dec>[0-9]+))"
    r"(?P<suffix>[uU](?:ll|LL|l|L|z|Z)?|(?:ll|LL|l|L|z|Z)[uU]?)?$",
    re.ASCII,
)
_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8,
            "f": 12, "v": 11, "?": 63}  # fmt: skip
UNKNOWN = "\x00unknown"  # a token whose value the grader cannot know
_BINARY_PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7, "<=": 7,
    ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}  # fmt: skip


class Budget:
    """Steps left for expanding and evaluating; each step is also counted in `work`."""

    def __init__(self, steps: int, parent: Budget | None = None) -> None:
        self.left = steps
        self.parent = parent

    def spend(self, steps: int = 1) -> bool:
        self.left -= steps
        if self.parent is not None:
            return self.parent.spend(steps) and self.left >= 0
        work.add(steps)
        return self.left >= 0

    def share(self, steps: int) -> Budget:
        """A part of this budget, for one expression: a bomb in one `#if` spends at most
        `steps`, and the rest of the file is still read."""
        return Budget(steps, self)


class GiveUp(Exception):  # noqa: N818 - control flow, not an error
    """The expression cannot be known here (budget, depth, a construct left out)."""


@dataclass(frozen=True)
class Macro:
    params: tuple[str, ...] | None  # None: object-like
    body: tuple[str, ...]
    variadic: bool = False


# What a name is in a macro table: a macro, or one of these.
UNDEFINED = "undefined"
MAYBE = "maybe"  # defined or not, or to what, the grader cannot know
MacroEntry = Macro | str


def pp_tokens(text: str) -> list[str]:
    """The pp-tokens of a directive's text (comments already blanked)."""
    work.add(len(text) + 1)
    return [m.group() for m in _PP_TOKEN.finditer(text)]


def parse_define(rest: str) -> tuple[str, Macro] | None:
    """`NAME body` or `NAME(params) body` (the text after `define`); None if malformed."""
    match = re.match(r"[ \t]*([A-Za-z_]\w*)", rest, re.ASCII)
    if match is None:
        return None
    name, after = match.group(1), rest[match.end() :]
    if not after.startswith("("):
        return name, Macro(None, tuple(pp_tokens(after)))
    close = after.find(")")
    if close < 0:
        return None
    params = [p.strip() for p in after[1:close].split(",")] if after[1:close].strip() else []
    work.add(close + 1)
    variadic = bool(params) and params[-1] == "..."
    if variadic:
        params[-1] = "__VA_ARGS__"
    if not all(re.fullmatch(r"[A-Za-z_]\w*", p, re.ASCII) for p in params):
        return None
    return name, Macro(tuple(params), tuple(pp_tokens(after[close + 1 :])), variadic)


def _is_ident(token: str) -> bool:
    return token[:1].isalpha() or token[:1] == "_"


class Expander:
    """Macro expansion with hide sets (a macro is not expanded inside its own expansion)."""

    def __init__(self, lookup: Callable[[str], MacroEntry | None], budget: Budget) -> None:
        self.lookup = lookup
        self.budget = budget

    def expand(self, tokens: Sequence[str]) -> list[str]:
        """The tokens fully expanded; raises GiveUp."""
        return [text for text, _ in self._expand([(t, frozenset()) for t in tokens], 0)]

    def _pay(self, steps: int) -> None:
        if not self.budget.spend(steps):
            raise GiveUp("the expansion budget is spent")

    def _expand(
        self, tokens: list[tuple[str, frozenset[str]]], depth: int
    ) -> list[tuple[str, frozenset[str]]]:
        if depth > MAX_DEPTH:
            raise GiveUp("macro arguments nest too deep")
        out: list[tuple[str, frozenset[str]]] = []
        queue = deque(tokens)
        while queue:
            self._pay(1)
            text, hide = queue.popleft()
            entry = self.lookup(text) if _is_ident(text) and text not in hide else None
            if entry is None or entry == UNDEFINED:
                out.append((text, hide))
                continue
            if entry == MAYBE or not isinstance(entry, Macro):
                out.append((UNKNOWN, hide))
                continue
            if entry.params is None:
                inner = hide | {text}
                self._pay(len(inner) + len(entry.body))
                queue.extendleft(reversed([(t, inner) for t in entry.body]))
                continue
            if not queue or queue[0][0] != "(":
                out.append((text, hide))  # a function-like macro's name without arguments
                continue
            args = self._arguments(queue)
            queue.extendleft(reversed(self._substitute(text, entry, args, hide, depth)))
        return out

    def _arguments(
        self, queue: deque[tuple[str, frozenset[str]]]
    ) -> list[list[tuple[str, frozenset[str]]]]:
        queue.popleft()  # "("
        args: list[list[tuple[str, frozenset[str]]]] = [[]]
        depth = 0
        while queue:
            self._pay(1)
            token = queue.popleft()
            if token[0] == "(":
                depth += 1
            elif token[0] == ")":
                if depth == 0:
                    return args
                depth -= 1
            elif token[0] == "," and depth == 0:
                args.append([])
                continue
            args[-1].append(token)
        raise GiveUp("a macro call without its closing parenthesis")

    def _substitute(
        self,
        name: str,
        macro: Macro,
        args: list[list[tuple[str, frozenset[str]]]],
        hide: frozenset[str],
        depth: int,
    ) -> list[tuple[str, frozenset[str]]]:
        params = macro.params or ()
        if macro.variadic and len(args) >= len(params):
            rest = args[len(params) - 1 :]
            joined: list[tuple[str, frozenset[str]]] = []
            for i, arg in enumerate(rest):
                joined += ([(",", frozenset())] if i else []) + arg
            args = [*args[: len(params) - 1], joined]
        if len(args) == 1 and not args[0] and not params:
            args = []
        if len(args) != len(params):
            raise GiveUp(f"{name} called with {len(args)} arguments")
        if "#" in macro.body or "##" in macro.body or "%:" in macro.body:
            raise GiveUp("stringizing and pasting are not evaluated")
        expanded = {p: self._expand(a, depth + 1) for p, a in zip(params, args, strict=True)}
        inner = hide | {name}
        self._pay(len(inner) + len(macro.body))
        out: list[tuple[str, frozenset[str]]] = []
        for token in macro.body:
            if token in expanded:
                self._pay(len(expanded[token]))
                out += expanded[token]
            else:
                out.append((token, inner))
        return out


@dataclass(frozen=True)
class _Value:
    value: int
    unsigned: bool = False


def _wrap(value: int, unsigned: bool) -> _Value:
    value &= _MASK
    if not unsigned and value & _SIGN:
        value -= 1 << 64
    return _Value(value, unsigned)


def integer_literal(token: str) -> tuple[int, bool] | None:
    """(value, unsigned) of a C integer literal (digit separators, u/l/ll suffixes)."""
    match = _INTEGER.match(token.replace("'", ""))
    if match is None:
        return None
    suffix = match.group("suffix") or ""
    if match.group("hex"):
        value = int(match.group("hex"), 16)
    elif match.group("bin"):
        value = int(match.group("bin"), 2)
    else:
        digits = match.group("dec")
        if len(digits) > 1 and digits[0] == "0":
            if any(d in "89" for d in digits):
                return None
            value = int(digits, 8)
        else:
            value = int(digits)
    if value > _MASK:
        return None
    # Too large for a signed 64-bit: unsigned (a decimal one is ill-formed; read it the same).
    return value, "u" in suffix.lower() or value >= _SIGN


def _char_literal(token: str) -> int | None:
    body = token[1:-1] if len(token) >= 3 and token.endswith("'") else None
    if body is None:
        return None
    if len(body) == 1 and body != "\\":
        return ord(body) if ord(body) < 128 else None
    if len(body) == 2 and body[0] == "\\":
        return _ESCAPES.get(body[1])
    return None


class Evaluator:
    """Evaluate a C integer constant expression over pp-tokens (macros already expanded).

    `name_value(name)` gives what a remaining identifier is worth (None: unknown). In `#if`
    that is 0 for a name the grader knows is not a macro, as the standard says; a declaration
    reader looks the name up among the file's constants instead.
    """

    def __init__(self, name_value: Callable[[str], int | None], budget: Budget) -> None:
        self.name_value = name_value
        self.budget = budget
        self.tokens: list[str] = []
        self.pos = 0
        self.depth = 0

    def evaluate(self, tokens: list[str]) -> int | None:
        self.tokens, self.pos, self.depth = tokens, 0, 0
        if not tokens or not self.budget.spend(len(tokens)):
            return None
        try:
            result = self._comma()
        except GiveUp:
            return None
        if self.pos != len(tokens) or result is None:
            return None
        return result.value

    # Each level returns None where the value is unknown, and raises GiveUp where the text
    # is not an expression at all (the compiler then reports it).

    def _peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def _take(self, expected: str) -> None:
        if self._peek() != expected:
            raise GiveUp(f"expected {expected!r}")
        self.pos += 1

    def _comma(self) -> _Value | None:
        value = self._conditional()
        while self._peek() == ",":
            self.pos += 1
            value = self._conditional()
        return value

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise GiveUp("nested too deep")

    def _conditional(self) -> _Value | None:
        cond = self._binary(1)
        if self._peek() != "?":
            return cond
        self.pos += 1
        self._enter()
        yes = self._comma()
        self._take(":")
        no = self._conditional()
        self.depth -= 1
        unsigned = bool((yes and yes.unsigned) or (no and no.unsigned))
        if cond is None:
            if yes is None or no is None or yes.value != no.value:
                return None
            return _wrap(yes.value, unsigned)
        chosen = yes if cond.value else no
        return None if chosen is None else _wrap(chosen.value, unsigned)

    def _binary(self, level: int) -> _Value | None:
        left = self._unary()
        while True:
            op = self._peek()
            precedence = _BINARY_PRECEDENCE.get(op)
            if precedence is None or precedence < level:
                return left
            self.pos += 1
            right = self._binary(precedence + 1)
            left = _apply(op, left, right)

    def _unary(self) -> _Value | None:
        op = self._peek()
        if op in ("+", "-", "~", "!"):
            self.pos += 1
            self._enter()
            operand = self._unary()
            self.depth -= 1
            if operand is None:
                return None
            if op == "!":
                return _Value(int(operand.value == 0))
            if op == "-":
                return _wrap(-operand.value, operand.unsigned)
            if op == "~":
                return _wrap(~operand.value, operand.unsigned)
            return operand
        return self._primary()

    def _primary(self) -> _Value | None:
        token = self._peek()
        self.pos += 1
        if token == "(":
            self._enter()
            value = self._comma()
            self._take(")")
            self.depth -= 1
            return value
        if token == UNKNOWN:
            self._skip_call()
            return None
        if token[:1].isdigit() or token[:1] == ".":
            literal = integer_literal(token)
            if literal is None:
                raise GiveUp(f"{token} is not an integer")
            return _wrap(*literal)
        if token.startswith("'"):
            char = _char_literal(token)
            return None if char is None else _Value(char)
        if _is_ident(token):
            if token in ("true", "false"):
                return _Value(int(token == "true"))
            if self._peek() == "(":  # `__has_builtin(x)`, a call the grader does not know
                self._skip_call()
                return None
            named = self.name_value(token)
            return None if named is None else _wrap(named, False)
        raise GiveUp(f"unexpected {token!r}")

    def _skip_call(self) -> None:
        if self._peek() != "(":
            return
        depth = 0
        while self.pos < len(self.tokens):
            token = self.tokens[self.pos]
            self.pos += 1
            if token == "(":
                depth += 1
            elif token == ")":
                depth -= 1
                if depth == 0:
                    return
        raise GiveUp("a call without its closing parenthesis")


def _apply(op: str, left: _Value | None, right: _Value | None) -> _Value | None:
    if op in ("&&", "||"):
        known = [v.value != 0 for v in (left, right) if v is not None]
        decisive = (op == "&&" and False in known) or (op == "||" and True in known)
        if decisive:
            return _Value(int(op == "||"))
        if len(known) < 2:
            return None
        return _Value(int(all(known) if op == "&&" else any(known)))
    if left is None or right is None:
        return None
    unsigned = left.unsigned or right.unsigned
    a = left.value & _MASK if unsigned else left.value
    b = right.value & _MASK if unsigned else right.value
    if op in ("==", "!=", "<", ">", "<=", ">="):
        result = {"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b,
                  ">=": a >= b}[op]  # fmt: skip
        return _Value(int(result))
    if op in ("/", "%"):
        if b == 0:
            return None  # the compiler refuses it
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return _wrap(quotient if op == "/" else a - quotient * b, unsigned)
    if op in ("<<", ">>"):
        if not 0 <= right.value < 64:
            return None
        shifted = a << right.value if op == "<<" else a >> right.value
        return _wrap(shifted, left.unsigned)
    arithmetic: dict[str, Callable[[int, int], int]] = {
        "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
        "&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y,
    }  # fmt: skip
    return _wrap(arithmetic[op](a, b), unsigned)


def evaluate_tokens(
    tokens: Sequence[str],
    *,
    macros: Callable[[str], MacroEntry | None],
    name_value: Callable[[str], int | None],
    budget: Budget,
) -> int | None:
    """Expand `tokens` with `macros`, then evaluate them; None when unknown or malformed."""
    budget = budget.share(EXPRESSION_STEPS)
    try:
        expanded = Expander(macros, budget).expand(tokens)
    except GiveUp:
        return None
    return Evaluator(name_value, budget).evaluate(expanded)


def lookup_in(table: Mapping[str, MacroEntry]) -> Callable[[str], MacroEntry | None]:
    return table.get
