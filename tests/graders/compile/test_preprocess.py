"""The preprocessor's view: which lines NVRTC compiles, and C integer expressions as `#if` reads
them. Every state here was checked against NVRTC 13.5 (`#error` in the branch it must skip)."""

from __future__ import annotations

import pytest

from graders.compile import work
from graders.compile.cexpr import Budget, evaluate_tokens, integer_literal, pp_tokens
from graders.compile.preprocess import Live, preprocess, target_from_options

L, U, D = Live.LIVE, Live.UNKNOWN, Live.DEAD


def states(source: str, options: list[str] | None = None) -> list[Live]:
    target = target_from_options(options) if options is not None else None
    program = preprocess(source, target)
    return [program.states[i] for i, line in enumerate(source.split("\n")) if line == "x"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("#if 0\nx\n#else\nx\n#endif", [D, L]),
        ("#if 1\nx\n#elif 1\nx\n#else\nx\n#endif", [L, D, D]),
        ("#if 0\nx\n#elif 2 > 1\nx\n#else\nx\n#endif", [D, L, D]),
        ("#ifdef __CUDACC__\nx\n#endif\n#ifdef __CUDACC_RTC__\nx\n#endif", [L, L]),
        ("#ifndef __CUDACC__\nx\n#else\nx\n#endif", [D, L]),
        ("#if defined(__NVCC__) || defined(_MSC_VER) || defined __GNUC__\nx\n#endif", [D]),
        ("#if __CUDA_ARCH__ >= 900\nx\n#endif\n#if __CUDA_ARCH__ >= 1000\nx\n#endif", [L, D]),
        ("#if __cplusplus >= 201703L\nx\n#endif\n#if __cplusplus > 201703L\nx\n#endif", [L, D]),
        # A name that is no macro is 0; a reserved one NVRTC may define is unknown.
        ("#if FOO\nx\n#endif\n#ifdef FOO\nx\n#endif", [D, D]),
        ("#if __FOO__\nx\n#else\nx\n#endif", [U, U]),
        ("#ifdef __FOO__\nx\n#elif 1\nx\n#else\nx\n#endif", [U, U, D]),
        ("#if __has_builtin(__builtin_expect)\nx\n#endif", [U]),
        # C arithmetic: unsigned comparisons, truncating division, shifts, ?:, true.
        ("#if -1 < 0u\nx\n#endif\n#if -7 / 2 == -3 && -7 % 2 == -1\nx\n#endif", [D, L]),
        ("#if (1 << 62) * 4 == 0 && ~0u == 0xffffffffffffffff\nx\n#endif", [L]),
        ("#if (0 ? 1 : 2) == 2 && true && !false && 'a' == 97 && 1'000 == 1000\nx\n#endif", [L]),
        ("#if 0 && __FOO__\nx\n#endif\n#if 1 || __FOO__\nx\n#endif", [D, L]),
        ("#if 1 / 0\nx\n#endif", [U]),  # the compiler refuses it; the grader cannot say
        # The file's macros, object-like and function-like, as they stand at each line.
        ("#define A 2\n#define TWICE(v) ((v) * 2)\n#if TWICE(A) == 4\nx\n#endif", [L]),
        ("#define A 2\n#undef A\n#ifdef A\nx\n#endif", [D]),
        ("#if A\nx\n#endif\n#define A 1\n#if A\nx\n#endif", [D, L]),
        ("#define SUM(...) (0 + __VA_ARGS__)\n#if SUM(1, 2) == 2\nx\n#endif", [L]),
        ("#define ID(v) v\n#if ID(ID(ID(3))) == 3\nx\n#endif", [L]),
        # A macro defined where the grader cannot tell is unknown from then on.
        ("#ifdef __FOO__\n#define A 1\n#endif\n#if A\nx\n#endif", [U]),
        # The served headers' macros exist after the include.
        ("#ifdef M_PI\nx\n#endif\n#include <math.h>\n#ifdef M_PI\nx\n#endif", [D, L]),
        ("#include <climits>\n#if INT_MAX == 2147483647\nx\n#endif", [L]),
        # Nesting: a dead parent kills every branch, whatever its condition.
        ("#if 0\n#if 1\nx\n#else\nx\n#endif\nx\n#endif\nx", [D, D, D, L]),
        ("#ifdef __FOO__\n#if 1\nx\n#endif\n#else\n#if 0\nx\n#endif\n#endif", [U, D]),
        # C++23's #elifdef is not a directive in C++17 mode: what follows is unknown.
        ("#if 0\nx\n#elifdef __CUDACC__\nx\n#endif", [D, U]),
    ],
)  # fmt: skip
def test_states(source: str, expected: list[Live]) -> None:
    assert states(source) == expected


def test_a_macro_is_not_expanded_inside_itself() -> None:
    # `SELF` expands to `SELF + 1`, whose SELF stays a name (0 in #if): 0 + 1 is true.
    assert states("#define SELF SELF + 1\n#if SELF == 1\nx\n#endif") == [L]


def test_the_target_comes_from_the_options() -> None:
    source = (
        "#if __CUDA_ARCH__ == 800\nx\n#endif\n#if __cplusplus == 201402L\nx\n#endif\n"
        "#ifdef LAB_FLAG\nx\n#endif\n#ifdef KERNELGRADER\nx\n#endif"
    )
    assert states(source, ["--gpu-architecture=sm_80", "-std=c++14", "-DLAB_FLAG"]) == [L, L, L, D]
    assert states(source, ["-arch", "sm_90", "-DKERNELGRADER=1", "-UKERNELGRADER"]) == [D, D, D, D]
    assert target_from_options(["-std=c++14"]).trigraphs
    assert not target_from_options(["-std=c++17"]).trigraphs
    assert target_from_options(["-std=c++2b"]).trigraphs  # unknown: assume the worst
    version = target_from_options([], (13, 5)).macros["__CUDACC_VER_MAJOR__"]
    assert getattr(version, "body", None) == ("13",)


def test_dead_lines_are_blanked_in_every_view_and_lines_are_kept() -> None:
    source = "#if 0\n#define TILE_WIDTH 32 // dead\n#endif\nint live;\n"
    program = preprocess(source)
    for view in (program.views.code, program.views.bare, program.views.spliced):
        assert "TILE_WIDTH" not in view and "int live;" in view
        assert len(view) == len(program.full.spliced) and view.count("\n") == 4
    assert "TILE_WIDTH" in program.full.code


def test_directives_inside_comments_are_not_read() -> None:
    assert states("/*\n#if 0\n*/\nx\n/*\n#endif */") == [L]
    assert states("/* a\n*/ #if 0\nx\n#endif") == [D]  # a directive after a comment's end


@pytest.mark.parametrize(
    ("token", "value"),
    [("0", (0, False)), ("010", (8, False)), ("0x10u", (16, True)), ("0b101", (5, False)),
     ("1'000'000ULL", (1_000_000, True)), ("18446744073709551615", ((1 << 64) - 1, True)),
     ("08", None), ("1.5", None), ("18446744073709551616", None)],
)  # fmt: skip
def test_integer_literals(token: str, value: tuple[int, bool] | None) -> None:
    assert integer_literal(token) == value


def test_an_expansion_past_the_budget_is_unknown_and_costs_only_the_budget() -> None:
    doubling = "".join(f"#define B{i} B{i - 1} B{i - 1}\n" for i in range(1, 40))
    defines = "#define B0 1 +\n" + doubling
    source = defines + "#if B39 1\nx\n#endif\n#if 1\nx\n#endif\n" + "#if B39 1\n#endif\n" * 1000
    with work.measured() as taken:
        assert states(source) == [U, L]
    # Each bomb spends its expression's share until the file's budget is gone.
    assert taken.steps < 64 * len(source) + 100_000


def test_deep_nesting_is_unknown_not_a_crash() -> None:
    deep = "(" * 10_000 + "1" + ")" * 10_000
    assert states(f"#if {deep}\nx\n#endif") == [U]
    calls = "#define F(v) v\n#if " + "F(" * 5_000 + "1" + ")" * 5_000 + "\nx\n#endif"
    assert states(calls) == [U]
    chain = "#if " + "1 ? " * 5_000 + "1" + " : 0" * 5_000 + "\nx\n#endif"
    assert states(chain) == [U]


def test_evaluate_tokens_reads_names_through_the_caller() -> None:
    names = {"BASE": 4}
    value = evaluate_tokens(
        pp_tokens("BASE * BASE + (BASE << 1)"),
        macros=lambda name: None,
        name_value=names.get,
        budget=Budget(1000),
    )
    assert value == 24
