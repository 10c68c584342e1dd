"""Declarations a submission makes (TILE, COARSE): spellings, forms, comments and bounds."""

from __future__ import annotations

import re

import pytest

from graders.compile.declarations import (
    DeclarationError,
    find_declarations,
    near_misses,
    resolve_declarations,
    unread_notes,
)
from graders.spec import DeclareSpec

TILE = DeclareSpec("TILE", ("TILE_WIDTH", "TILE_SIZE", "BLOCK_SIZE", "T"), 32, 1, 32)
COARSE = DeclareSpec("COARSE", ("COARSE_FACTOR", "COARSE"), 1, 1, 8)
DECLARES = {"TILE": TILE, "COARSE": COARSE}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("#define TILE_WIDTH 16\n", {"TILE": 16, "COARSE": 1}),
        ("#  define TILE_SIZE (8)\n#define COARSE_FACTOR 4u\n", {"TILE": 8, "COARSE": 4}),
        ("constexpr int TILE_WIDTH = 16;\n", {"TILE": 16, "COARSE": 1}),
        ("static constexpr unsigned int BLOCK_SIZE = 0x10;\n", {"TILE": 16, "COARSE": 1}),
        ("const int T = 7;\n", {"TILE": 7, "COARSE": 1}),
        ("constexpr int TILE_WIDTH{12};\n", {"TILE": 12, "COARSE": 1}),
        ("#define TILE_WIDTH (4 * 4)\n", {"TILE": 16, "COARSE": 1}),
        ("#define TILE_WIDTH 32 / 2\n", {"TILE": 16, "COARSE": 1}),
        # A leading 0 is octal in C (Python's int(x, 0) refuses it).
        ("#define TILE_WIDTH 010\nconstexpr int COARSE = 0004u;\n", {"TILE": 8, "COARSE": 4}),
        # Seed 004 defines T inside the kernel body.
        ("__global__ void k() {\n#define T 7\n}\n", {"TILE": 7, "COARSE": 1}),
        ("", {"TILE": 32, "COARSE": 1}),
        # Commented-out code does not count.
        ("// #define TILE_WIDTH 64\n/* #define TILE_WIDTH 2 */\n#define TILE_WIDTH 8\n",
         {"TILE": 8, "COARSE": 1}),
        # The lab's order of spellings decides: TILE_WIDTH before T.
        ("#define T 4\n#define TILE_WIDTH 8\n", {"TILE": 8, "COARSE": 1}),
        # Names that merely contain a spelling, and template parameters, are not declarations.
        ("#define MY_TILE_WIDTH 64\ntemplate <int T> __device__ int f() { return T; }\n",
         {"TILE": 32, "COARSE": 1}),
        ("int TILE_WIDTH_HALF = 4;\n#define T(x) x\n", {"TILE": 32, "COARSE": 1}),
    ],
)  # fmt: skip
def test_values(source: str, expected: dict[str, int]) -> None:
    assert resolve_declarations(source, DECLARES) == expected


def test_line_numbers_and_spelling() -> None:
    (decl,) = find_declarations("\n\n#define TILE_SIZE 16 // the tile\n", {"TILE": TILE})
    assert (decl.spelling, decl.value, decl.line, decl.text) == ("TILE_SIZE", 16, 3, "16")


def test_out_of_bounds_names_the_bounds() -> None:
    with pytest.raises(DeclarationError) as info:
        resolve_declarations("#define TILE_WIDTH 64\n", DECLARES)
    assert str(info.value) == (
        "Line 1 sets TILE_WIDTH to 64, but this lab accepts TILE from 1 to 32; change it and "
        "resubmit."
    )
    with pytest.raises(DeclarationError, match="COARSE from 1 to 8"):
        resolve_declarations("constexpr int COARSE = 0;\n", DECLARES)


@pytest.mark.parametrize(
    "source",
    [
        "#define TILE_WIDTH blockDim.x\n",
        "__global__ void k() {\n    const int TILE = 1;\n}\nconst int TILE_SIZE = blockDim.x;\n",
        "constexpr unsigned TILE_WIDTH{sizeof(float) * 4};\n",
        "#define TILE_WIDTH 16.0f\n",
        "#define TILE_WIDTH 08\n",  # not a C literal at all (8 is no octal digit)
        "#define TILE_WIDTH (1 / 0)\n",
        "#define TILE_WIDTH UNKNOWN_MACRO\n",
    ],
)
def test_a_value_that_is_no_constant_falls_back_to_the_default_with_a_note(source: str) -> None:
    # A kernel that takes its tile width from the launch was refused as unreadable.
    assert resolve_declarations(source, DECLARES) == {"TILE": 32, "COARSE": 1}
    found = find_declarations(source, DECLARES)
    (note,) = unread_notes(found, DECLARES)
    assert re.match(r"Line \d+: (TILE_WIDTH|TILE_SIZE) is set to `", note), note
    assert "launches the kernel with this lab's default TILE = 32" in note
    assert note.endswith("32`."), note


def _either(condition: str, yes: int, no: int, form: str = "#define TILE_WIDTH {}") -> str:
    return f"{condition}\n{form.format(yes)}\n#else\n{form.format(no)}\n#endif\n"


CONST = "const int TILE_WIDTH = {};"


@pytest.mark.parametrize(
    ("source", "tile"),
    [
        (_either("#if 0", 32, 16), 16),
        (_either("#ifdef __CUDACC__", 8, 16), 8),
        (_either("#ifndef __CUDACC_RTC__", 4, 8, CONST), 8),
        (_either("#if __CUDA_ARCH__ >= 800", 16, 4), 16),
        (_either("#if defined(_MSC_VER) || defined(__GNUC__)", 4, 8), 8),
        (_either("#if __cplusplus < 201703L", 4, 2), 2),
        ("#if __cplusplus < 201703L\n#define TILE_WIDTH 4\n#elif 1\n"
         "#define TILE_WIDTH 2\n#endif", 2),
        ("#define BIG 1\n" + _either("#if BIG", 16, 8), 16),
        ("#define BIG 0\n" + _either("#if BIG", 16, 8), 8),
        ("#define BIG 0\n#undef BIG\n" + _either("#ifdef BIG", 16, 8), 8),
        ("#include <math.h>\n" + _either("#ifdef M_PI", 16, 8), 16),
        # Where the grader cannot tell, the definition the compiler surely reads wins.
        ("#ifdef __SOME_FLAG__\n#define TILE_WIDTH 32\n#endif\n#ifndef TILE_WIDTH\n"
         "#define TILE_WIDTH 16\n#endif\n", 32),
        ("#ifdef __SOME_FLAG__\nconst int TILE_WIDTH = 32;\n#endif\n"
         "const int TILE_WIDTH = 16;", 16),
        # Values are expressions of other macros and constants.
        ("#define BLOCK 8\n#define TILE_WIDTH (2 * BLOCK)\n", 16),
        ("#define TWICE(x) ((x) << 1)\n#define TILE_WIDTH TWICE(4)\n", 8),
        ("constexpr int BASE = 4;\nconstexpr int TILE_WIDTH = BASE * BASE;\n", 16),
        ("#define TILE_WIDTH (sizeof(int) > 2 ? 8 : 4)\n", 32),  # sizeof: not read
        ("#define TILE_WIDTH (1 ? 8 : 4)\n", 8),
    ],
)  # fmt: skip
def test_the_live_branch_decides(source: str, tile: int) -> None:
    assert resolve_declarations(source, DECLARES)["TILE"] == tile


def test_a_define_in_a_branch_the_grader_cannot_decide_is_still_read() -> None:
    (decl,) = find_declarations(
        "#ifdef __SOME_FLAG__\n#define TILE_WIDTH 16\n#endif\n", {"TILE": TILE}
    )
    assert decl.value == 16 and decl.line == 2


def test_a_value_is_read_only_so_far() -> None:
    # Unbounded, every `const int T =` of a 256 KiB run without `;` read to the run's end:
    # quadratic, about two minutes of the worker's CPU for one upload.
    assert find_declarations("const int T = " + "1 + " * 30 + "1;", {"TILE": TILE})[0].value == 31
    assert find_declarations("const int T = " + "1 + " * 100 + "1;", {"TILE": TILE}) == []
    run = "const int T = " * 200 + "}"
    assert find_declarations(run + "\nconst int T = 8;\n", {"TILE": TILE})[0].value == 8


def test_blanks_in_a_define_are_read_once() -> None:
    # `#define TILE 1` and a long run of blanks took a regular expression quadratic time.
    source = "#define TILE_WIDTH 16" + " " * 100_000 + "+ 0\n"
    assert resolve_declarations(source, DECLARES) == {"TILE": 16, "COARSE": 1}


@pytest.mark.parametrize("spelling", ["Tile_Width", "tileWidth", "block_width", "BLOCK_WIDTH",
                                      "TILESIZE", "tile_dim"])  # fmt: skip
def test_a_near_miss_spelling_is_named_but_not_read(spelling: str) -> None:
    source = f"#define {spelling} 16\n__global__ void k() {{}}\n"
    assert resolve_declarations(source, DECLARES) == {"TILE": 32, "COARSE": 1}
    (warning,) = near_misses(source, DECLARES)
    assert warning.startswith(f"Line 1: `{spelling}` = 16 is not read by the grader")
    assert "TILE only as TILE_WIDTH, TILE_SIZE, BLOCK_SIZE, T" in warning
    assert "launches your kernel with TILE = 32" in warning
    assert f"Rename `{spelling}` to `TILE_WIDTH`" in warning


@pytest.mark.parametrize(
    "source",
    [
        "#define TILE_WIDTH 16\n#define tileWidth 16\n",  # the lab's own spelling is there
        "#define Tile_Width 32\n",  # the value the lab uses anyway
        "const int t = 16;\n",  # one letter is no spelling to be near
        "#define BLOCK_ROWS 16\n#define TILE_COUNT 4\n",  # other names
    ],
)
def test_no_near_miss_warning(source: str) -> None:
    assert near_misses(source, DECLARES) == []


def test_a_value_that_breaks_the_labs_constraints_is_refused() -> None:
    block = DeclareSpec("BLOCK", ("BLOCK_SIZE",), 256, 32, 1024, multiple_of=32, power_of_two=True)
    assert resolve_declarations("#define BLOCK_SIZE 512\n", {"BLOCK": block}) == {"BLOCK": 512}
    with pytest.raises(DeclarationError) as info:
        resolve_declarations("#define BLOCK_SIZE 96\n", {"BLOCK": block})
    assert str(info.value) == (
        "Line 1 sets BLOCK_SIZE to 96, but BLOCK must be a power of two (1, 2, 4, 8, ...); "
        "change it and resubmit."
    )
    with pytest.raises(DeclarationError, match="must be a multiple of 32"):
        resolve_declarations("constexpr int BLOCK_SIZE = 40;\n", {"BLOCK": block})
