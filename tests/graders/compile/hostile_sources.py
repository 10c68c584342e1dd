"""Adversarial sources of about 256 KiB (the upload limit) for the parsers' bounded-work test and
bench/parser_work.py: each repeats a shape that once made a parser superlinear, or might."""

from __future__ import annotations

from collections.abc import Callable

SIZE = 256 * 1024
KERNEL = 'extern "C" __global__ void k(float* a, int n) {\n'


def _fill(head: str, unit: str, tail: str = "", size: int = SIZE) -> str:
    count = max(1, (size - len(head) - len(tail)) // len(unit))
    return head + unit * count + tail


def nested_do_while(size: int = SIZE) -> str:
    depth = (size - 200) // 40
    return (
        KERNEL + "int i = threadIdx.x;\n" + "do {\n" * depth + "__syncthreads();\n"
        + "} while (i < n);\n" * depth + "}\n"
    )  # fmt: skip


def define_then_blanks(size: int = SIZE) -> str:
    return _fill("#define TILE_WIDTH 1", " ", "x\n", size)


def comma_chain(size: int = SIZE) -> str:
    return _fill(
        KERNEL + "int a = 0;\na = threadIdx.x", ", a = a", ";\nif (a) __syncthreads();\n}\n", size
    )


def backwards_chain(size: int = SIZE) -> str:
    count = size // 24
    lines = "".join(f"b{i + 1} = b{i};\n" for i in range(count, 0, -1))
    return KERNEL + "while (n) {\n" + lines + "b1 = threadIdx.x;\n}\nif (b9) __syncthreads();\n}\n"


def nested_ifs(size: int = SIZE) -> str:
    depth = (size - 100) // 22
    return KERNEL + "if (threadIdx.x) {" * depth + "__syncthreads();" + "}" * depth + "}\n"


def nested_parens(size: int = SIZE) -> str:
    depth = (size - 100) // 2
    return KERNEL + "int a = " + "(" * depth + "threadIdx.x" + ")" * depth + ";\n}\n"


def nested_assignments(size: int = SIZE) -> str:
    depth = (size - 100) // 8
    return KERNEL + "int a;\na = " + "(a = " * depth + "1" + ")" * depth + ";\n}\n"


def const_runs(size: int = SIZE) -> str:
    return _fill("", "const int TILE_WIDTH = ", "}\n", size)


def many_defines(size: int = SIZE) -> str:
    return _fill("", "#define SYNC __syncthreads()\n#define Tile_Width 16\n", "", size)


def macro_chain(size: int = SIZE) -> str:
    count = size // 24
    lines = "".join(f"#define M{i + 1} M{i}\n" for i in range(count))
    return "#define M0 __syncthreads()\n" + lines + KERNEL + f"if (threadIdx.x) M{count};\n}}\n"


def call_chain(size: int = SIZE) -> str:
    count = size // 48
    fns = "".join(f"__device__ void f{i + 1}() {{ f{i}(); }}\n" for i in range(count))
    return (
        "__device__ void f0() { __syncthreads(); }\n"
        + fns
        + KERNEL
        + f"if (threadIdx.x) f{count}();\n}}\n"
    )


def many_barriers(size: int = SIZE) -> str:
    return _fill(KERNEL + "if (threadIdx.x) {\n", "__syncthreads(); return;\n", "}}\n", size)


def quotes_after_names(size: int = SIZE) -> str:
    return _fill("", "X'/*'; ", "\n", size)


def raw_string_openings(size: int = SIZE) -> str:
    return _fill("", 'R"(', "\n", size)


def unterminated_literals(size: int = SIZE) -> str:
    return _fill("", "'\"\\", "\n", size)


def comment_openings(size: int = SIZE) -> str:
    return _fill("", "/* // ", "\n", size)


def pragma_operators(size: int = SIZE) -> str:
    return _fill("", '_Pragma("unroll") ', "\n", size)


def long_pragma_line(size: int = SIZE) -> str:
    return _fill('_Pragma("unroll ', "_Pragma(", "\n", size)


def line_splices(size: int = SIZE) -> str:
    return _fill("#define A ", "x \\   \n", "\n", size)


def asm_barriers(size: int = SIZE) -> str:
    return _fill(KERNEL + 'if (threadIdx.x) asm volatile("', "bar.sync 0; ", '");\n}\n', size)


def one_long_line(size: int = SIZE) -> str:
    return _fill("int a = ", "a+", "0;", size)


def digit_separators(size: int = SIZE) -> str:
    return _fill("int a = 1", "'0", ";\n", size)


def conditional_bombs(size: int = SIZE) -> str:
    """Macros that double on every level, evaluated in `#if` and as a declaration's value."""
    head = "#define B0 1 +\n" + "".join(f"#define B{i} B{i - 1} B{i - 1}\n" for i in range(1, 40))
    return _fill(head + "#define TILE_WIDTH B39 1\n", "#if B39 1\nx\n#endif\n", "", size)


def nested_conditionals(size: int = SIZE) -> str:
    depth = (size - 10) // 16
    return "#if 1\n" * depth + "#ifdef __X__\n" + "#endif\n" * (depth + 1)


def elif_chain(size: int = SIZE) -> str:
    return _fill("#if 0\n", "#elif 0 || 0\nx\n", "#endif\n", size)


def served_includes(size: int = SIZE) -> str:
    return _fill("", "#include <math.h>\n#include <climits>\n", "", size)


def macro_arguments(size: int = SIZE) -> str:
    depth = (size - 100) // 4
    return "#define F(a) a\n#if " + "F(" * depth + "1" + ")" * depth + "\nx\n#endif\n"


def long_condition(size: int = SIZE) -> str:
    return _fill("#if 1", " && defined(A) && (1 ? 2 : 3)", "\nx\n#endif\n", size)


def hidden_includes(size: int = SIZE) -> str:
    return _fill("#if 0\n", "#include <cstdlib>\n#pragma warning(x)\n", "#endif\n", size)


# Comments in six languages, multi-byte UTF-8 among them, as a careful student documents a
# kernel (issue 34, case 6: a 239 KB file of this shape was still not graded after 110 s).
_COMMENTS = (
    "// English: each block loads one tile of A and one of B into shared memory, then waits.",
    "// Deutsch: Jeder Block lädt eine Kachel von A und eine von B; größere Kacheln, "
    "weniger Überläufe.",
    "/* Français : chaque bloc charge une tuile de A et une de B — « mémoire partagée », "
    "c'est l'idée. */",
    "// Русский: каждый блок загружает плитку матрицы A и плитку B в разделяемую память.",
    "// 中文：每个线程块把 A 的一个分块和 B 的一个分块载入共享内存，然后同步。",
    "/* 日本語：各スレッドブロックは A と B のタイルを共有メモリに読み込み、\n   "
    "同期してから積和を計算する。 */",
)
MULTILINGUAL_KERNEL = """\
#define TILE_WIDTH 32
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    float sum = 0.0f;
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        // {comment}
        const int a = p * TILE_WIDTH + tx, b = p * TILE_WIDTH + ty;
        tileA[ty][tx] = (row < M && a < N) ? A[row * N + a] : 0;
        tileB[ty][tx] = (b < N && col < K) ? B[b * K + col] : 0;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) sum += tileA[ty][k] * tileB[k][tx];
        __syncthreads();
    }
    if (row < M && col < K) C[row * K + col] = sum;
}
"""


def multilingual_comments(size: int = SIZE) -> str:
    """A valid tiled matmul (TILE_WIDTH 32) in a file of `size` UTF-8 bytes at most, the rest
    comments in six languages before, inside and after the kernel."""
    kernel = MULTILINGUAL_KERNEL.replace("{comment}", _COMMENTS[4][3:])
    room = size - len(kernel.encode()) - 1
    lines: list[str] = []
    used = 0
    i = 0
    while True:
        comment = _COMMENTS[i % len(_COMMENTS)]
        line = comment[:-3] + f" ({i}) */\n" if comment.endswith("*/") else f"{comment} ({i})\n"
        if used + len(line.encode()) > room:
            break
        lines.append(line)
        used += len(line.encode())
        i += 1
    half = len(lines) * 3 // 4
    return "".join(lines[:half]) + kernel + "".join(lines[half:])


SOURCES: dict[str, Callable[[int], str]] = {
    f.__name__: f
    for f in (
        nested_do_while, define_then_blanks, comma_chain, backwards_chain, nested_ifs,
        nested_parens, nested_assignments, const_runs, many_defines, macro_chain, call_chain,
        many_barriers, quotes_after_names, raw_string_openings, unterminated_literals,
        comment_openings, pragma_operators, long_pragma_line, line_splices, asm_barriers,
        one_long_line, digit_separators, conditional_bombs, nested_conditionals, elif_chain,
        served_includes, macro_arguments, long_condition, hidden_includes,
        multilingual_comments,
    )
}  # fmt: skip


def hostile_log(size: int = SIZE) -> str:
    """A compile log shaped to slow a log reader: long lines of headers and parentheses."""
    header = "submission.cu(1): error: " + "(1" * (size // 8) + "\n"
    other = "/etc/x(" + "9" * (size // 8) + "): warning: x\n"
    return header + other + "  echoed\n" * (size // 32) + "ptxas info    : Used 1 registers\n"
