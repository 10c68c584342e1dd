"""Reading NVRTC's log: every shape of error it writes is counted and named; ptxas -v is read."""

from __future__ import annotations

import pytest

from graders.compile.log import (
    MAX_ENTRY_CHARS,
    clean_log,
    count_errors,
    first_error,
    prioritized,
    static_shared_bytes,
    without_ptxas_info,
)
from graders.compile.pipeline import error_sentence

NAME = "submission.cu"


@pytest.mark.parametrize(
    ("log", "where", "text"),
    [
        # NVVM writes "Error:" with a capital; it counted as 0 errors.
        ("submission.cu(2): Error: Formal parameter space overflowed (40008 bytes required, max "
         "32764 bytes allowed) in function k\n", "on line 2",
         "Formal parameter space overflowed (40008 bytes required, max 32764 bytes allowed) in "
         "function k."),
        ("ptxas application ptx input, line 23; error   : Unknown modifier '.bar'\n"
         "ptxas fatal   : Ptx assembly aborted due to errors\n", "in the inline assembly (PTX)",
         "Unknown modifier '.bar'."),
        ("ptxas error   : Entry function 'k' uses too much shared data (0x10000 bytes)\n",
         "when the kernel was assembled", "Entry function 'k' uses too much shared data "
         "(65536 bytes)."),
        ("At end of source: error: expected a \"}\"\n", "at the end of the file",
         'expected a "}".'),
        ("nvrtc: error: failed to generate code\n", "without a line of your file",
         "failed to generate code."),
    ],
)  # fmt: skip
def test_every_shape_of_error_is_counted_and_named(log: str, where: str, text: str) -> None:
    cleaned = clean_log(log, NAME, "int a;\n")
    assert count_errors(cleaned, NAME) >= 1
    assert first_error(cleaned, NAME) == (where, text)


def test_an_error_with_no_line_gets_a_sentence_on_what_to_try() -> None:
    for log in ("nvrtc: error: failed to generate code\n", ""):
        sentence = error_sentence(log, NAME, "int a;\n")
        assert sentence.startswith("The compiler stopped with an error that names no line")
        assert "0 errors" not in sentence and "undo your most recent change" in sentence
    assert "(failed to generate code.)" in error_sentence(
        "nvrtc: error: failed to generate code\n", NAME, ""
    )


def test_an_internal_compiler_error_says_to_write_the_part_another_way() -> None:
    log = (
        'submission.cu(4): error: Internal Compiler Error (codegen): "asm operand index '
        'requested is larger than the number of asm operands provided!"\n'
    )
    sentence = error_sentence(log, NAME, "a\nb\nc\nd\n")
    assert sentence.startswith("The compiler reported 1 error; it is on line 4: Internal")
    assert "write that part another way" in sentence


@pytest.mark.parametrize(
    ("source", "line", "hint"),
    [
        ("int a = 1\n\n// x\nint b = 2;\n", 4, "check the end of line 1."),
        ("int a = f(1,\n  2)\nint b = 2;\n", 3, "check the end of line 2."),
        ("int a = 1;\nint b c;\nint d;\n", 2, None),  # the line before ends its statement
    ],
)
def test_a_missing_semicolon_points_at_the_line_before(
    source: str, line: int, hint: str | None
) -> None:
    sentence = error_sentence(f'submission.cu({line}): error: expected a ";"\n', NAME, source)
    if hint is None:
        assert "missing `;`" not in sentence
    else:
        assert sentence.endswith(f"where the next statement starts: {hint}")


def test_ptxas_verbose_lines_give_each_kernels_shared_memory_and_then_go() -> None:
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'matmul' for 'sm_90'\n"
        "ptxas info    : Function properties for matmul\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem\n"
        "ptxas info    : Compiling entry function 'other' for 'sm_90'\n"
        "ptxas info    : Used 8 registers, used 0 barriers\n"
        'submission.cu(3): warning #177-D: variable "x" was declared but never referenced\n'
    )
    assert static_shared_bytes(log) == {"matmul": 2048, "other": 0}
    assert without_ptxas_info(log) == (
        'submission.cu(3): warning #177-D: variable "x" was declared but never referenced\n'
    )


def _pragma_message(line: int, size: int) -> str:
    return (
        f'{NAME}({line}): remark #20200-D: #pragma message: "{"x" * size}"\n'
        f"  #pragma message(S20)\n  ^\n\n"
    )


def test_errors_come_first_and_pragma_messages_last_before_the_log_is_capped() -> None:
    # A 1 MiB `#pragma message` pushed the error past the cap: "an error that names no line".
    log = (
        _pragma_message(3, 1 << 20)
        + f'{NAME}(9): warning #177-D: variable "unused" was declared but never referenced\n'
        + "  int unused;\n      ^\n\n"
        + f'{NAME}(12): error: identifier "totl" is undefined\n  C[0] = totl;\n         ^\n\n'
        + f'{NAME}(13): error: expected a ";"\n\n'
        + f'1 error detected in the compilation of "{NAME}".\n'
    )
    ordered = prioritized(log, 1_000_000)
    assert len(ordered) < 30_000
    assert ordered.index("(12): error") < ordered.index("(13): error")
    assert ordered.index("(13): error") < ordered.index("(9): warning")
    assert ordered.index("(9): warning") < ordered.index("detected in the compilation")
    assert ordered.index("detected in the compilation") < ordered.index("(3): remark")
    assert f"(this message was cut; {len(_pragma_message(3, 1 << 20)) - 1} characters)" in ordered
    cleaned = clean_log(ordered, NAME, "  C[0] = totl;\n")
    assert first_error(cleaned, NAME) == ("on line 12", 'identifier "totl" is undefined.')
    assert error_sentence(cleaned, NAME, "int a;\n").startswith(
        "The compiler reported 2 errors; the first is on line 12: identifier"
    )
    # Unordered, the same cap loses the error.
    assert first_error(clean_log(log[:1_000_000], NAME, ""), NAME) is None


def test_a_capped_log_keeps_the_ptxas_lines_that_give_shared_memory() -> None:
    log = (
        "".join(_pragma_message(i, 100_000) for i in range(1, 30))
        + "ptxas info    : Compiling entry function 'matmul' for 'sm_90'\n"
        + "ptxas info    : Used 32 registers, 2048 bytes smem, 400 bytes cmem[0]\n"
    )
    assert static_shared_bytes(log[:1_000_000]) == {}
    assert static_shared_bytes(prioritized(log, 1_000_000)) == {"matmul": 2048}


def test_the_total_is_capped_with_a_note() -> None:
    log = "".join(f"{NAME}({i}): error: {'e' * 1000}\n\n" for i in range(1, 200))
    ordered = prioritized(log, 50_000)
    assert len(ordered) < 50_000 + 200
    assert ordered.endswith(f"(the log was cut here; it had {len(log)} characters)")
    assert all(len(entry) <= MAX_ENTRY_CHARS + 100 for entry in ordered.split("\n\n"))


def test_the_graders_own_file_is_left_out_of_the_log_without_a_note() -> None:
    log = (
        "_kernelgrader_declared.cu(7): error: expression must have a constant value\n"
        '  extern "C" __attribute__((device)) const long long kg_v0 = (TILE);\n'
        "  ^\n\n"
        'submission.cu(2): error: identifier "x" is undefined\n  int y = x;\n\n'
        "other.h(1): warning: something\n\n"
        '2 errors detected in the compilation of "_kernelgrader_declared.cu".\n'
    )
    cleaned = clean_log(
        log, "submission.cu", "int a;\nint y = x;\n", hidden=("_kernelgrader_declared.cu",)
    )
    assert "kernelgrader" not in cleaned and "kg_v0" not in cleaned
    assert 'submission.cu(2): error: identifier "x" is undefined' in cleaned
    assert "(a message about a file other than yours was left out)" in cleaned  # other.h
    assert cleaned.endswith('1 error detected in the compilation of "submission.cu".\n')
