"""A tiny, safe evaluator for the size expressions in lab specs (no `eval`).

Lab specs are data an instructor writes, so expressions such as `"ceil(K / TILE)"` are parsed
with `ast` and only a handful of node types are accepted: numbers, names, `+ - * / // % **`,
unary signs, parentheses and the calls `ceil floor min max sqrt log2`.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

Number = int | float

# Long expressions are a spec mistake, and a length cap also bounds how big an integer
# product can grow; `**` is bounded on its own (MAX_POWER_BITS).
MAX_EXPRESSION_LENGTH = 400
# A power whose integer result would need more bits than this is refused before it is
# computed: `2 ** 64` is fine, `10 ** 10 ** 10` would take the evaluator's memory and time.
MAX_POWER_BITS = 4096


def _power(base: Number, exponent: Number) -> Number:
    whole = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if whole and max(abs(int(base)).bit_length(), 1) * int(exponent) > MAX_POWER_BITS:
        raise ExprError(f"{base} ** {exponent} is too large")
    if base < 0 and not float(exponent).is_integer():
        raise ExprError(f"a negative number to a fractional power ({base} ** {exponent})")
    if base == 0 and exponent < 0:
        raise ExprError("division by zero (0 to a negative power)")
    result: Number = base**exponent
    return result


_BINARY: dict[type[ast.operator], tuple[str, Callable[[Number, Number], Number]]] = {
    ast.Add: ("+", lambda a, b: a + b),
    ast.Sub: ("-", lambda a, b: a - b),
    ast.Mult: ("*", lambda a, b: a * b),
    ast.Div: ("/", lambda a, b: a / b),
    ast.FloorDiv: ("//", lambda a, b: a // b),
    ast.Mod: ("%", lambda a, b: a % b),
    ast.Pow: ("**", _power),
}


def _ceil(x: Number) -> int:
    return math.ceil(x)


def _floor(x: Number) -> int:
    return math.floor(x)


def _sqrt(x: Number) -> float:
    if x < 0:
        raise ExprError(f"sqrt of a negative number ({x})")
    return math.sqrt(x)


def _log2(x: Number) -> float:
    if x <= 0:
        raise ExprError(f"log2 of a number that is not positive ({x})")
    return math.log2(x)


# name -> (number of arguments, function)
_FUNCTIONS: dict[str, tuple[int, Callable[..., Number]]] = {
    "ceil": (1, _ceil),
    "floor": (1, _floor),
    "min": (2, min),
    "max": (2, max),
    "sqrt": (1, _sqrt),
    "log2": (1, _log2),
}

FUNCTION_NAMES = frozenset(_FUNCTIONS)


class ExprError(ValueError):
    """An expression that cannot be parsed or evaluated; the message says why."""


@dataclass(frozen=True)
class Expression:
    """A parsed expression: its text, the names it uses, and its checked syntax tree."""

    text: str
    names: frozenset[str]
    tree: ast.expr

    def evaluate(self, names: Mapping[str, Number]) -> Number:
        return _eval(self.tree, names, self.text)


def _describe(node: ast.AST) -> str:
    """Name a construct the evaluator does not accept, in words an instructor knows."""
    if isinstance(node, ast.BinOp):
        op = type(node.op).__name__
        symbols = {
            "Pow": "**",
            "BitAnd": "&",
            "BitOr": "|",
            "BitXor": "^",
            "LShift": "<<",
            "RShift": ">>",
            "MatMult": "@",
        }
        return f"the operator `{symbols.get(op, op)}`"
    if isinstance(node, ast.Constant):
        return f"the constant {node.value!r}"
    if isinstance(node, ast.Attribute):
        return f"the attribute access `.{node.attr}`"
    if isinstance(node, ast.Compare):
        return "a comparison"
    if isinstance(node, ast.BoolOp):
        return "`and`/`or`"
    if isinstance(node, ast.IfExp):
        return "a conditional expression"
    if isinstance(node, ast.Subscript):
        return "indexing with [ ]"
    if isinstance(node, ast.Lambda):
        return "a lambda"
    return f"a {type(node).__name__} expression"


def _check(node: ast.AST, text: str, used: set[str]) -> None:
    """Refuse every node type outside the short list the spec format allows."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ExprError(f"{text!r}: {_describe(node)} is not allowed; use numbers only")
        return
    if isinstance(node, ast.Name):
        if node.id in _FUNCTIONS:
            raise ExprError(f"{text!r}: `{node.id}` is a function; call it as {node.id}(...)")
        used.add(node.id)
        return
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise ExprError(
                f"{text!r}: {_describe(node)} is not allowed; use + - * / // % ** and parentheses"
            )
        _check(node.left, text, used)
        _check(node.right, text, used)
        return
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.UAdd | ast.USub):
            raise ExprError(f"{text!r}: the unary operator {type(node.op).__name__} is not allowed")
        _check(node.operand, text, used)
        return
    if isinstance(node, ast.Call):
        allowed = ", ".join(sorted(_FUNCTIONS))
        if not isinstance(node.func, ast.Name):
            raise ExprError(
                f"{text!r}: calling {_describe(node.func)} is not allowed; "
                f"the functions are {allowed}"
            )
        if node.func.id not in _FUNCTIONS:
            raise ExprError(
                f"{text!r}: unknown function `{node.func.id}`; the functions are {allowed}"
            )
        if node.keywords:
            raise ExprError(f"{text!r}: {node.func.id}() takes no keyword arguments")
        arity = _FUNCTIONS[node.func.id][0]
        if len(node.args) != arity:
            raise ExprError(
                f"{text!r}: {node.func.id}() takes {arity} argument{'s' if arity > 1 else ''}, "
                f"not {len(node.args)}"
            )
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise ExprError(f"{text!r}: *arguments are not allowed")
            _check(arg, text, used)
        return
    raise ExprError(f"{text!r}: {_describe(node)} is not allowed in a size expression")


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Expression:
    """Parse and check an expression once; raise ExprError naming what is wrong."""
    if not isinstance(text, str):
        raise ExprError(f"an expression must be text or a number, not {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ExprError("an expression is empty")
    if len(stripped) > MAX_EXPRESSION_LENGTH:
        raise ExprError(
            f"an expression is {len(stripped)} characters long; at most "
            f"{MAX_EXPRESSION_LENGTH} are allowed"
        )
    try:
        module = ast.parse(stripped, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"{text!r} is not a valid expression ({exc.msg})") from None
    used: set[str] = set()
    _check(module.body, text, used)
    return Expression(text=stripped, names=frozenset(used), tree=module.body)


def names_in(expr: str | Number) -> frozenset[str]:
    """The names an expression (or a plain number) depends on."""
    if isinstance(expr, bool):
        raise ExprError("true/false is not a number")
    if isinstance(expr, int | float):
        return frozenset()
    return parse(expr).names


def _eval(node: ast.expr, names: Mapping[str, Number], text: str) -> Number:
    if isinstance(node, ast.Constant):
        return cast(Number, node.value)  # _check allowed only int and float constants
    if isinstance(node, ast.Name):
        try:
            value = names[node.id]
        except KeyError:
            known = ", ".join(sorted(names)) or "none"
            raise ExprError(f"{text!r}: unknown name `{node.id}` (known names: {known})") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ExprError(f"{text!r}: `{node.id}` is not a number")
        return value
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, names, text)
        right = _eval(node.right, names, text)
        symbol, op = _BINARY[type(node.op)]
        if symbol in ("/", "//", "%") and right == 0:
            raise ExprError(f"{text!r}: division by zero")
        try:
            result = op(left, right)
        except OverflowError:
            raise ExprError(f"{text!r}: the result is too large") from None
        except ExprError as exc:
            raise ExprError(f"{text!r}: {exc}") from None
        if isinstance(result, float) and not math.isfinite(result):
            raise ExprError(f"{text!r}: the result is not a finite number")
        return result
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, names, text)
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        fn = _FUNCTIONS[node.func.id][1]
        args = [_eval(a, names, text) for a in node.args]
        try:
            return fn(*args)
        except ExprError as exc:
            raise ExprError(f"{text!r}: {exc}") from None
        except (OverflowError, ValueError):
            raise ExprError(f"{text!r}: {node.func.id}() cannot take {args}") from None
    raise ExprError(f"{text!r}: cannot evaluate {_describe(node)}")  # unreachable after _check


def evaluate(expr: str | Number, names: Mapping[str, Number]) -> Number:
    """Evaluate a spec expression (or pass a number through) with the given names bound."""
    if isinstance(expr, bool):
        raise ExprError("true/false is not a number")
    if isinstance(expr, int | float):
        return expr
    return parse(expr).evaluate(names)


def evaluate_int(expr: str | Number, names: Mapping[str, Number], *, what: str = "value") -> int:
    """Evaluate an expression that must be a whole number (a size, a grid dimension)."""
    value = evaluate(expr, names)
    if isinstance(value, float):
        if not value.is_integer():
            raise ExprError(
                f"{what} {expr!r} is {value}, not a whole number; use ceil() or floor()"
            )
        return int(value)
    return value
