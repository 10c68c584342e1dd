"""The include policy: every spelling of "open a host file" is refused before NVRTC runs."""

from __future__ import annotations

import re

import pytest

from graders.compile.include_policy import (
    check_includes,
    refused_by_compiler,
    review,
    without_line_directives,
)
from graders.compile.preprocess import preprocess, target_from_options

KERNEL = 'extern "C" __global__ void k(float* a) { a[0] = 1.0f; }\n'

HOSTILE = [
    ('#include "/etc/passwd"', 1, "includes"),
    ('#include "../../etc/passwd"', 1, "includes"),
    ("#include </etc/passwd>", 1, "includes"),
    ('#  include "/etc/passwd"', 1, "includes"),
    ('\t #\tinclude "/etc/passwd"', 1, "includes"),
    ('#define F "/etc/passwd"\n#include F', 2, "not written out"),
    ("#define H <cuda_runtime.h>\n#include H", 2, "not written out"),
    ('%:include "/etc/passwd"', 1, "includes"),
    ('%:  include "/etc/passwd"', 1, "includes"),
    ('#\\\ninclude "/etc/passwd"', 1, "includes"),
    ('#inc\\\nlude "/etc/passwd"', 1, "includes"),
    ('#include \\\n"/etc/passwd"', 1, "includes"),
    ('/* a */ # /* b */ include "/etc/passwd"', 1, "includes"),
    ('/* multi\nline */ #include "/etc/passwd"', 2, "includes"),
    ('#include /*\n*/ "/etc/passwd"', 1, "not written out"),
    ('#include_next "passwd"', 1, "#include_next"),
    ('#import "/etc/passwd"', 1, "#import"),
    ('const char s[] = {\n#embed "/etc/passwd"\n};', 2, "#embed"),
    ("#include <cuda_fp16.h>", 1, "includes <cuda_fp16.h>"),
    ('#include "kernel_helpers.cuh"', 1, "includes"),
    ('#if __has_include("/etc/shadow")\n#error yes\n#endif', 1, "__has_include"),
    ('#define Q(x) __has_include(x)\n#if Q("/etc/shadow")\n#endif', 1, "__has_include"),
    ('#define CAT(a, b) a##b\n#if CAT(__has_, include)("/etc/shadow")\n#endif', 1, "pasting"),
    ('#define CAT(a, b) a %:%: b\n#if CAT(__has_, include)("/etc/shadow")\n#endif', 1, "`%:%:`"),
    ('#pragma GCC dependency "/etc/passwd"', 1, "#pragma GCC dependency"),
    ('_Pragma("GCC dependency \\"/etc/passwd\\"")', 1, "_Pragma"),
    ("#define P(x) _Pragma(#x)\nP(unroll)", 1, "without a plain string literal"),
    # A character literal this scanner could misread as opening a comment.
    ("char c = L'/*';\n#include \"/etc/passwd\"\n// */", 2, "includes"),
    ('const char* s = u8"/*";\n#include "/etc/passwd"\n// */', 2, "includes"),
    # NVRTC takes a lone carriage return as a space and a leading byte-order mark as nothing:
    # these are directives to it, and opened the host file.
    ('\r#include "/etc/passwd"', 1, "includes"),
    ('int a;\n \r\t#include "/etc/passwd"', 2, "includes"),
    ('#\rinclude "/etc/passwd"', 1, "includes"),
    ('\r%:include "/etc/passwd"', 1, "includes"),
    ('\ufeff#include "/etc/passwd"', 1, "includes"),
    ('\r#if __has_include("/etc/shadow")\n#endif', 1, "__has_include"),
    ('\r#pragma GCC dependency "/etc/passwd"', 1, "#pragma GCC dependency"),
    ("int a;\x00#include", 1, "NUL"),
    ("int a;\n// \ud800", 2, "UTF-8"),
]


@pytest.mark.parametrize(("prefix", "line", "fragment"), HOSTILE)
def test_hostile_spellings_are_refused_with_the_line(prefix: str, line: int, fragment: str) -> None:
    message = check_includes(prefix + "\n" + KERNEL)
    assert message is not None, "this spelling was let through"
    assert message.startswith(f"Line {line} "), message
    assert fragment in message


@pytest.mark.parametrize(
    "prefix",
    [
        "#include <cuda_runtime.h>",
        '#include "cuda_runtime.h"',
        "#include <stdio.h>\n#include <cstdint>\n#include <math.h>",
        "# include <device_launch_parameters.h>",
        '// #include "/etc/passwd" (commented out)',
        "int x; // \\\n",
        "#pragma unroll\n#pragma unroll 4\n#pragma once",
        '_Pragma("unroll")',
        "#define TILE_WIDTH 16\n#ifdef TILE_WIDTH\n#endif",
        'const char* s = "#include \\"/etc/passwd\\"";',
        "int n = 1'000'000;",
        'printf("## %d\\n", 1);',
    ],
)
def test_ordinary_sources_pass(prefix: str) -> None:
    assert check_includes(prefix + "\n" + KERNEL) is None


@pytest.mark.parametrize(
    "prefix",
    [
        "#include <math.h> // for INFINITY",
        "#include <cstdio> /* printf */",
        '#include "float.h"   // FLT_MAX',
        '#pragma message("compiling the tiled kernel")',
        "#pragma unroll(4)",
    ],
)
def test_comments_after_an_allowed_include_and_pragma_names_pass(prefix: str) -> None:
    assert check_includes(prefix + "\n" + KERNEL) is None


def test_a_character_literal_after_a_name_hides_no_directive() -> None:
    source = "#define X\nint c = X'/*';\n#include \"/etc/passwd\"\n// */\n" + KERNEL
    message = check_includes(source)
    assert message is not None and message.startswith("Line 3 includes")


@pytest.mark.parametrize(
    "hiding",
    [
        "int c = X'/*';\n{line}\n// */",  # a literal the views once read as a comment
        'const char* s = R"(\n{line}\n)";',  # a raw string: text to the scanner, not a line
        "/*\n{line}\n*/",  # inside a comment: blanked all the same, harmlessly
    ],
)
def test_line_directives_are_blanked_in_every_view(hiding: str) -> None:
    source = "#define X\n" + hiding.format(line='#line 1 "/etc/passwd"') + "\n" + KERNEL
    blanked = without_line_directives(source)
    assert "#line" not in blanked and "/etc/passwd" not in blanked
    assert blanked.count("\n") == source.count("\n")


CXX14 = target_from_options(["--gpu-architecture=sm_90", "-std=c++14"])


@pytest.mark.parametrize(
    "prefix", ['??=include "/etc/passwd"', '#include ??/\n"/etc/passwd"', "// what??)"]
)
def test_trigraphs_are_refused_where_the_standard_has_them(prefix: str) -> None:
    # NVRTC reads trigraphs under -std=c++11 and c++14: `??/` splices lines there.
    message = check_includes(preprocess(prefix + "\n" + KERNEL, CXX14))
    assert message is not None and message.startswith("Line 1 ") and "trigraph" in message


@pytest.mark.parametrize("prefix", ["// what??)", "/* ??= ??( ??/ ??' */", 'char s[] = "??!";'])
def test_cxx17_has_no_trigraphs(prefix: str) -> None:
    # `??)` in a comment was refused as a trigraph; C++17 (the default) has none.
    assert check_includes(prefix + "\n" + KERNEL) is None


@pytest.mark.parametrize(
    ("prefix", "line"),
    [
        ("/* an old host harness\nint main() {\n#include <cstdlib>\n}\n*/", 3),
        ("#if 0\n#include <cstdlib>\n#endif", 2),
        ('#ifndef __CUDACC__\n#include <cstdlib>\n#include "helpers.h"\n#endif', 2),
        ('#if defined(_MSC_VER)\n#pragma include_alias("a.h", "/etc/passwd")\n#endif', 2),
        ("#if 0\n#import <x>\n#endif", 2),
        ('#if 0\n#inc\\\nlude "/etc/passwd"\n#endif', 2),
        # A comment to this scanner; to a C++11 compiler `1'0` is no number (see the
        # compile-stage test: NVRTC reaches the marker there, and the file is refused).
        ("int n = 1'0; /* '\n#include \"/etc/passwd\"\n*/", 2),
    ],
)
def test_lines_the_compiler_skips_are_accepted_and_neutralised(prefix: str, line: int) -> None:
    source = prefix + "\n" + KERNEL
    assert check_includes(source) is None
    result = review(source)
    assert result.problem is None and line in result.rewritten
    assert result.rewritten[line].startswith(f"Line {line} ")
    compiled = result.compile_source
    assert re.match(r"\s*(#|%:)\s*error\b", compiled.split("\n")[line - 1])
    assert len(compiled) <= len(source) and compiled.count("\n") == source.count("\n")
    for text in compiled.split("\n"):
        assert not re.match(r"\s*(#|%:)\s*(include|import|pragma\s+include_alias)", text), text
    assert compiled.endswith(KERNEL)
    # Had the compiler read the line, it would have stopped there: the line is refused.
    log = f"submission.cu({line}): catastrophic error: #error directive: <cstdlib>\n"
    assert refused_by_compiler(log, "submission.cu", result.rewritten) == result.rewritten[line]
    assert refused_by_compiler(log, "other.cu", result.rewritten) is None


@pytest.mark.parametrize(
    "prefix",
    [
        "#ifdef __SOME_FLAG__\n#include <cstdlib>\n#endif",  # a macro NVRTC may define
        "#if UNKNOWN_CALL(1)\n#include <cstdlib>\n#endif",
        "#if 0\n#elif __CUDACC_VER_BUILD__ > 1\n#include <cstdlib>\n#endif",
    ],
)
def test_an_include_the_grader_cannot_decide_is_refused(prefix: str) -> None:
    message = check_includes(prefix + "\n" + KERNEL)
    assert message is not None and "includes <cstdlib>" in message
    assert message.endswith(
        "resubmit. The line sits under a condition on a macro the grader cannot evaluate, so "
        "it counts as compiled; to keep host code in the file, guard it with "
        "`#ifndef __CUDACC_RTC__`."
    )


def test_an_allowed_include_is_compiled_as_written() -> None:
    source = "#include <math.h>\n#if 0\n#include <math.h>\n#endif\n" + KERNEL
    result = review(source)
    assert result.problem is None and result.rewritten == {}
    assert result.compile_source == source


# --- pragmas: refused only where they can reach outside the file (issue 34, case 3) --------


@pytest.mark.parametrize(
    "pragma",
    [
        "#pragma nv_diagnostic push\n#pragma nv_diag_suppress 177\n#pragma nv_diagnostic pop",
        "#pragma warning(disable: 4996)",
        '#pragma GCC diagnostic ignored "-Wunused-variable"',
        '#pragma clang diagnostic push\n#pragma message("tile " "32")',
        '#pragma GCC warning "slow path"\n#pragma push_macro("TILE")\n#pragma pop_macro("TILE")',
        "#pragma pack(push, 4)\n#pragma pack(pop)\n#pragma STDC FP_CONTRACT ON",
        "#pragma nv_exec_check_disable\n#pragma unroll (TILE < 8 ? 2 : 1)",
        '_Pragma("nv_diagnostic push") _Pragma("nv_diagnostic pop")',
        'const char* s = "_Pragma(\\"x\\")";',  # text in a string, no operator
    ],
)
def test_pragmas_that_reach_nothing_outside_the_file_pass(pragma: str) -> None:
    assert check_includes(pragma + "\n" + KERNEL) is None


@pytest.mark.parametrize(
    ("pragma", "said"),
    [
        ('#pragma include_alias("cuda_runtime.h", "/etc/passwd")', "`include_alias` is a pragma"),
        ("#pragma include_alias(<math.h>, </etc/passwd>)", "`include_alias` is a pragma"),
        ('#pragma GCC dependency "/etc/passwd"', "`dependency` is a pragma"),
        ("#pragma GCC system_header", "`system_header` is a pragma"),
        ('#pragma hdrstop("/tmp/x.pch")', "`hdrstop` is a pragma"),
        ('#pragma comment(lib, "/etc/passwd")', "`comment` is a pragma"),
        ('#pragma some_vendor_thing("/etc/passwd")', "may name a file"),
        ("#pragma some_vendor_thing(<passwd>)", "may name a file"),
        ('_Pragma("include_alias(\\"a.h\\", \\"/etc/passwd\\")")', "`include_alias` is a pragma"),
    ],
)
def test_pragmas_that_name_files_are_refused(pragma: str, said: str) -> None:
    message = check_includes(pragma + "\n" + KERNEL)
    assert message is not None and message.startswith("Line 1 has "), message
    assert said in message


# --- raw strings are text (issue 34, case 4) ----------------------------------------------


def test_an_include_inside_a_raw_string_is_text_and_neutralised() -> None:
    source = (
        '__device__ const char harness[] = R"x(\n#include <vector>\n#if 0\n)x";\n'
        "#if 0\n#endif\n" + KERNEL
    )
    assert check_includes(source) is None
    result = review(source)
    # Had the compiler read line 2 as a directive, it would stop there (the defence in depth
    # of the three views); being text, it changes nothing but the string's own word.
    assert result.problem is None and 2 in result.rewritten
    assert result.compile_source.split("\n")[1] == "#error <vector>"
    # `#if 0` inside the string opens no group: the kernel after it is read as live code.
    program = preprocess(source)
    assert "extern" in program.views.code


def test_under_cxx03_there_are_no_raw_strings() -> None:
    # NVRTC reads `R"(` as a name and a string under -std=c++03: the include is a directive.
    cxx03 = target_from_options(["--gpu-architecture=sm_90", "-std=c++03"])
    source = 'const char* s = R"(\n#include <vector>\n)";\n' + KERNEL
    message = check_includes(preprocess(source, cxx03))
    assert message is not None and message.startswith("Line 2 includes <vector>")
