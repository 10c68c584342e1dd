"""Declared values come from the program NVRTC built (issue 34), read from the cubin with no GPU.

Each test runs the compile child's own code (`compile_in_child`) in this process, NVRTC
included, with a lab of its own making (two declared names, no kernel the lab requires).
"""

from __future__ import annotations

from typing import Any

import pytest

from graders.compile import pipeline
from graders.compile.declared_values import (
    WRAPPER_NAME,
    make_wrapper,
    nonce_for,
    too_large_to_expand,
)
from graders.compile.headers import BUILTIN_HEADERS
from graders.compile.pipeline import compile_in_child
from graders.compile.preprocess import preprocess

OPTIONS = ["--gpu-architecture=sm_90", "-std=c++17", "-DKERNELGRADER=1"]
DECLARES = {
    "TILE": {"names": ["TILE_WIDTH", "TILE_SIZE", "BLOCK_SIZE", "T"], "default": 32, "min": 1,
             "max": 32},
    "COARSE": {"names": ["COARSE_FACTOR", "COARSE"], "default": 1, "min": 1, "max": 8},
}  # fmt: skip
KERNEL = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }\n'


def child(source: str, **payload: Any) -> dict[str, Any]:
    answer = compile_in_child(
        {
            "source": source,
            "filename": "submission.cu",
            "options": OPTIONS,
            "headers": BUILTIN_HEADERS,
            "kernels": [],
            "declares": DECLARES,
            **payload,
        }
    )
    answer.pop("cubin", None)
    return answer


def values(source: str) -> dict[str, int]:
    answer = child(source)
    assert answer["ok"], (answer["message"], answer["log"])
    return dict(answer["declarations"])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # Case 1 of the issue: NVRTC defines no __HIP_PLATFORM_AMD__ (the text reader read 16).
        ("#if defined(__HIP_PLATFORM_AMD__)\n#define TILE_WIDTH 16\n#else\n"
         "#define TILE_WIDTH 32\n#endif\n", {"TILE": 32, "COARSE": 1}),
        # Case 2: two constants in one declaration (the reader read `16, COARSE_FACTOR = 4`).
        ("constexpr int TILE_SIZE = 16, COARSE_FACTOR = 4;\n", {"TILE": 16, "COARSE": 4}),
        ("const unsigned TILE_SIZE{8}, COARSE{2};\n", {"TILE": 8, "COARSE": 2}),
        # What the text reader could not evaluate, or guessed.
        ("#ifdef __SOME_FLAG__\n#define TILE_WIDTH 32\n#endif\n#ifndef TILE_WIDTH\n"
         "#define TILE_WIDTH 16\n#endif\n", {"TILE": 16, "COARSE": 1}),
        ("#define TILE_WIDTH (sizeof(int) > 2 ? 8 : 4)\n", {"TILE": 8, "COARSE": 1}),
        ("__host__ __device__ constexpr int twice(int x) { return 2 * x; }\n"
         "constexpr int TILE_WIDTH = twice(sizeof(float));\n", {"TILE": 8, "COARSE": 1}),
        ("enum { TILE_WIDTH = 8, COARSE = 2 };\n", {"TILE": 8, "COARSE": 2}),
        ("static const unsigned long long BLOCK_SIZE = 0x10ull;\n", {"TILE": 16, "COARSE": 1}),
        ("namespace cfg { constexpr int tile = 4; }\nconstexpr int T = cfg::tile * 2;\n",
         {"TILE": 8, "COARSE": 1}),
        # Values as they stand at the end of the file.
        ("#define TILE_WIDTH 16\n#undef TILE_WIDTH\n#define TILE_WIDTH 8\n",
         {"TILE": 8, "COARSE": 1}),
        # Seed 004 defines T inside the kernel's body: a macro is the file's all the same.
        ('extern "C" __global__ void s(float* a) {\n#define T 7\n    a[0] = T;\n}\n',
         {"TILE": 7, "COARSE": 1}),
        # A template's parameter and a type named like a spelling are no declarations.
        ("template <int T> __device__ int f() { return T; }\ntypedef float TILE_SIZE;\n"
         "#define COARSE 2\n", {"TILE": 32, "COARSE": 2}),
        # Constants inside braces (a function, a namespace, a class): no probe at file scope
        # sees them, so their values are read from the text.
        ('extern "C" __global__ void s(float* a) {\n    const int TILE_WIDTH = 8;\n'
         "    a[threadIdx.x] = TILE_WIDTH;\n}\n", {"TILE": 8, "COARSE": 1}),
        ("namespace cfg { constexpr int TILE_WIDTH = 16; }\n", {"TILE": 16, "COARSE": 1}),
        ("namespace cfg { constexpr int TILE_WIDTH = 8; }\nusing namespace cfg;\n",
         {"TILE": 8, "COARSE": 1}),
        ("struct Cfg { static constexpr int COARSE = 4; };\n", {"TILE": 32, "COARSE": 4}),
        # At file scope, where the compiler skipped it: not declared (the reader read 8).
        ('extern "C" {\n#ifdef __SOME_FLAG__\nconstexpr int TILE_WIDTH = 8;\n#endif\n}\n',
         {"TILE": 32, "COARSE": 1}),
        ("", {"TILE": 32, "COARSE": 1}),
    ],
)  # fmt: skip
def test_values_are_what_the_compiler_compiled(source: str, expected: dict[str, int]) -> None:
    assert values(source + KERNEL) == expected


def test_the_line_a_sentence_names_is_the_definition_the_compiler_read() -> None:
    source = (
        "#if defined(__HIP_PLATFORM_AMD__)\n#define TILE_WIDTH 64\n#else\n"
        "#define TILE_WIDTH 48\n#endif\n" + KERNEL
    )
    answer = child(source)
    assert answer["reason"] == "bad_declaration"
    assert answer["message"] == (
        "Line 4 sets TILE_WIDTH to 48, but this lab accepts TILE from 1 to 32; change it and "
        "resubmit."
    )


@pytest.mark.parametrize(
    ("source", "line", "shown"),
    [
        ("#define TILE_WIDTH blockDim.x\n", 1, "blockDim.x"),
        ("#define TILE_WIDTH 16.0f\n", 1, "16.0f"),
        ("\nconstexpr float TILE_WIDTH = 16.0f;\n", 2, "16.0f"),
        ("#define TILE_WIDTH (1 / 0)\n", 1, "(1 / 0)"),
        ("#define TILE_WIDTH UNKNOWN_NAME\n", 1, "UNKNOWN_NAME"),
        ('extern "C" __global__ void s(float* a) {\n    const int TILE_WIDTH = blockDim.x;\n'
         "    a[threadIdx.x] = TILE_WIDTH;\n}\n", 2, "blockDim.x"),
    ],
)  # fmt: skip
def test_a_name_that_is_no_whole_number_gets_the_default_and_a_note(
    source: str, line: int, shown: str
) -> None:
    answer = child(source + KERNEL)
    assert answer["ok"] and answer["declarations"] == {"TILE": 32, "COARSE": 1}, answer
    (note,) = answer["warnings"]
    assert note.startswith(f"Line {line}: TILE_WIDTH is set to `{shown}`, which is not a whole")
    assert "launches the kernel with this lab's default TILE = 32" in note


def test_an_undefined_name_says_where_it_was_undefined() -> None:
    source = "#define TILE_WIDTH 16\n" + KERNEL + "#undef TILE_WIDTH\n"
    answer = child(source)
    assert answer["declarations"] == {"TILE": 32, "COARSE": 1}
    (note,) = answer["warnings"]
    assert note.startswith("Line 1: TILE_WIDTH is `#undef`-ed on line 3, and the grader reads")


def test_a_keyword_defined_as_a_macro_blocks_the_probes_with_a_note() -> None:
    # The wrapper's own words must mean what they say; where one is a macro, nothing is read.
    source = "#define long long\n#define TILE_WIDTH 16\n" + KERNEL
    answer = child(source)
    assert answer["ok"] and answer["declarations"] == {"TILE": 32, "COARSE": 1}
    (note,) = answer["warnings"]
    assert note.startswith("Line 2: the grader could not read TILE_WIDTH from the compiled")


@pytest.mark.parametrize(
    ("ending", "said"),
    [
        ("/* a comment left open", "comment unclosed at end of file"),
        ('__device__ const char s[] = R"(a raw string left open', "raw string not found"),
        ("#if 1\n", "the #endif for this directive is missing"),
    ],
)
def test_nothing_at_the_end_of_the_file_reaches_the_wrapper(ending: str, said: str) -> None:
    # Each is the student's own error, on the student's line, as when the file is alone.
    answer = child("#define TILE_WIDTH 16\n" + KERNEL + ending)
    assert answer["reason"] == "compile_error", answer
    assert said in answer["log"] and "submission.cu(3)" in answer["log"]
    assert WRAPPER_NAME not in answer["log"] and "kernelgrader" not in answer["log"]


def test_a_line_splice_at_the_end_of_the_file_joins_nothing_of_the_wrapper() -> None:
    assert values("#define TILE_WIDTH 16\n" + KERNEL + "// the end \\") == {"TILE": 16, "COARSE": 1}


def test_the_wrappers_names_are_out_of_the_files_reach() -> None:
    source = "#define TILE_WIDTH 16\n" + KERNEL
    nonce = nonce_for(source)
    # A file that names the probes of its own text is another text, with another nonce.
    hostile = f"#define {nonce}_v0 99\n#define {nonce}_ok 0\n" + source
    assert nonce_for(hostile) != nonce
    assert values(hostile) == {"TILE": 16, "COARSE": 1}
    wrapper = make_wrapper("submission.cu", ["TILE_WIDTH"], nonce)
    assert wrapper.text.startswith('#include "submission.cu"\n')
    assert set(wrapper.lines.values()) == {"TILE_WIDTH"} and len(wrapper.lines) == 2


def test_a_probe_the_compiler_refuses_is_dropped_and_the_rest_still_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A function named like a spelling: `(::TILE_WIDTH)` fails, the file compiles without it.
    calls = []
    compile_once = pipeline.nvrtc_compile

    def counted(*args: Any) -> Any:
        calls.append(args[1])
        return compile_once(*args)

    monkeypatch.setattr(pipeline, "nvrtc_compile", counted)
    source = "__device__ int TILE_WIDTH(int x) { return x; }\n#define TILE_SIZE 8\n" + KERNEL
    answer = child(source + "#define COARSE 4\n")
    assert answer["ok"] and answer["declarations"] == {"TILE": 8, "COARSE": 4}, answer
    assert answer["warnings"] == [] and answer["log"] == ""
    assert calls == [WRAPPER_NAME, WRAPPER_NAME]
    # A type at file scope is no constant: it is not probed, and NVRTC runs once.
    calls.clear()
    typed = "struct TILE_WIDTH { int x; };\nusing T = float;\ntypedef int BLOCK_SIZE;\n"
    answer = child(typed + "#define TILE_SIZE 8\n" + KERNEL)
    assert answer["ok"] and answer["declarations"] == {"TILE": 8, "COARSE": 1}, answer
    assert calls == [WRAPPER_NAME]


def test_a_compile_error_shows_only_the_students_file() -> None:
    # TILE_WIDTH's own definition is wrong: its probe fails too, and is not in the log.
    source = "#define TILE_WIDTH undefined_name\n" + KERNEL.replace("1.0f", "TILE_WIDTH")
    answer = child(source)
    assert answer["reason"] == "compile_error"
    assert answer["message"].startswith("The compiler reported 1 error; it is on line 2:")
    assert WRAPPER_NAME not in answer["log"]
    assert '1 error detected in the compilation of "submission.cu".' in answer["log"]


def test_the_probes_are_no_global_variables_of_the_students() -> None:
    source = "#define TILE_WIDTH 16\n__device__ float hoard[1 << 20];\n" + KERNEL.replace(
        "1.0f", "hoard[threadIdx.x]"
    )
    answer = child(source, max_global_bytes=1 << 20)
    assert answer["reason"] == "resource_limit"
    assert (
        "need 4 MiB of GPU memory; this lab allows 1 MiB (the largest: `hoard` (4 MiB))."
        in (answer["message"])
    )


def test_a_macro_too_large_to_expand_is_not_asked_of_the_compiler() -> None:
    chain = "".join(f"#define B{i} B{i - 1} B{i - 1}\n" for i in range(1, 41))
    program = preprocess("#define B0 1 +\n" + chain + "#define TILE_WIDTH B40 0\n#define T B2\n")
    assert not too_large_to_expand(program, "T")
    assert too_large_to_expand(program, "TILE_WIDTH")
    # The file's budget is one: a bomb leaves none for what comes after (linear work).
    assert too_large_to_expand(program, "T")
    answer = child(program.source + KERNEL)
    assert answer["ok"] and answer["declarations"] == {"TILE": 32, "COARSE": 1}
    assert "(it expands to more text than the grader reads)" in answer["warnings"][0]
