"""Declarations a submission makes (TILE, COARSE): spellings, forms, comments and bounds."""

from __future__ import annotations

import pytest

from graders.compile.declarations import (
    DeclarationError,
    find_declarations,
    near_misses,
    resolve_declarations,
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


def test_values_that_are_not_numbers_are_refused() -> None:
    with pytest.raises(DeclarationError, match="cannot read as a whole number"):
        resolve_declarations("#define TILE_WIDTH blockDim.x\n", DECLARES)
    # Not a C literal at all (8 is no octal digit): a sentence, not a grader failure.
    with pytest.raises(DeclarationError, match="cannot read as a whole number"):
        resolve_declarations("#define TILE_WIDTH 08\n", DECLARES)


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
