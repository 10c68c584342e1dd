"""The spec expression evaluator: what it computes, and what it refuses by name."""

from __future__ import annotations

import pytest

from graders.spec.expr import ExprError, evaluate, evaluate_int, names_in, parse


@pytest.mark.parametrize(
    ("text", "names", "expected"),
    [
        ("ceil(K / TILE)", {"K": 1023, "TILE": 32}, 32),
        ("ceil(K / TILE)", {"K": 1024, "TILE": 32}, 32),
        ("ceil(K / TILE)", {"K": 1025, "TILE": 32}, 33),
        ("floor(n / 3)", {"n": 10}, 3),
        ("n // 3", {"n": 10}, 3),
        ("n % 3", {"n": 10}, 1),
        ("min(1024, ceil(n / 1024))", {"n": 64 * 2**20}, 1024),
        ("max(1, n - 5)", {"n": 2}, 1),
        ("-n + 2 * (n + 1)", {"n": 5}, 7),
        ("1e-5 * sqrt(N)", {"N": 100}, pytest.approx(1e-4)),
        ("log2(n)", {"n": 1024}, 10.0),
        ("4 * 1024", {}, 4096),
        ("2*R + 1", {"R": 3}, 7),
        ("2 ** 20 + 3", {}, 1048579),
        ("2 ** k", {"k": 10}, 1024),
        ("n ** 0.5", {"n": 16}, 4.0),
        ("2 ** -1", {}, 0.5),
        ("-2 ** 2", {}, -4),  # as in Python: the power binds tighter than the sign
    ],
)
def test_evaluates(text: str, names: dict[str, int], expected: float) -> None:
    assert evaluate(text, names) == expected


def test_numbers_pass_through() -> None:
    assert evaluate(32, {}) == 32
    assert evaluate(0.5, {}) == 0.5


def test_true_division_and_integer_results() -> None:
    assert evaluate("7 / 2", {}) == 3.5
    assert isinstance(evaluate("ceil(7 / 2)", {}), int)
    assert evaluate_int("n / 2", {"n": 8}) == 4
    with pytest.raises(ExprError, match="not a whole number"):
        evaluate_int("n / 2", {"n": 7}, what="grid[0]")


def test_names_in() -> None:
    assert names_in("ceil(K / TILE) + min(M, N)") == {"K", "TILE", "M", "N"}
    assert names_in(5) == frozenset()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("__import__('os')", "unknown function `__import__`"),
        ("__import__('os').system('true')", "calling the attribute access `.system`"),
        ("n.real", "attribute access `.real`"),
        ("n << 2", "`<<`"),
        ("n if n else 1", "conditional"),
        ("n < 3", "comparison"),
        ("[1, 2]", "List"),
        ("'abc'", "constant 'abc'"),
        ("True", "constant True"),
        ("lambda: 1", "lambda"),
        ("ceil(1, 2)", "takes 1 argument, not 2"),
        ("min(1)", "takes 2 arguments, not 1"),
        ("ceil", "is a function"),
        ("ceil(x=1)", "keyword"),
        ("n +", "not a valid expression"),
        ("", "empty"),
        ("a[0]", "indexing"),
        ("~n", "unary operator"),
        ("1" + "+1" * 300, "characters long"),
    ],
)
def test_refuses_constructs_by_name(text: str, fragment: str) -> None:
    with pytest.raises(ExprError) as info:
        evaluate(text, {"n": 1})
    assert fragment in str(info.value)


def test_unknown_name_is_named_with_the_known_ones() -> None:
    with pytest.raises(ExprError, match=r"unknown name `TILE` \(known names: K, M\)"):
        evaluate("ceil(K / TILE)", {"K": 1, "M": 2})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("n / 0", "division by zero"),
        ("n // (n - n)", "division by zero"),
        ("sqrt(0 - n)", "negative"),
        ("log2(0)", "not positive"),
        ("1e308 * 1e308", "not a finite number"),
        ("10 ** 10 ** 10", "too large"),
        ("2.0 ** 100000", "too large"),
        ("(0 - n) ** 0.5", "negative number to a fractional power"),
        ("(n - n) ** -1", "division by zero"),
    ],
)
def test_arithmetic_errors_are_expr_errors(text: str, fragment: str) -> None:
    with pytest.raises(ExprError, match=fragment):
        evaluate(text, {"n": 4})


def test_parse_is_cached_and_reports_text() -> None:
    assert parse("ceil(n / 2)") is parse("ceil(n / 2)")
    assert parse(" n ").text == "n"
