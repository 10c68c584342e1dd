"""Reading declarations at their limits: the shapes a constant may and may not have, value
lengths exactly at the reader's bound, C literals, where each constant lies, near misses, and
every refusal's sentence whole.

Written against the survivors of scripts/mutation.py (graders/compile/declarations.py).
"""

from __future__ import annotations

import pytest

from graders.compile import declarations as reader
from graders.compile.declarations import (
    DeclarationError,
    defined_constants,
    find_declarations,
    near_misses,
    resolve_declarations,
    unread_notes,
)
from graders.spec import DeclareSpec

TILE = DeclareSpec("TILE", ("TILE_WIDTH", "TILE_SIZE", "BLOCK_SIZE", "T"), 32, 1, 32)
COARSE = DeclareSpec("COARSE", ("COARSE_FACTOR", "COARSE"), 1, 1, 8)
DECLARES = {"TILE": TILE, "COARSE": COARSE}


def tile(source: str) -> int:
    return resolve_declarations(source, DECLARES)["TILE"]


@pytest.mark.parametrize(
    ("literal", "value"),
    [("1", 1), ("7", 7), ("07", 7), ("010", 8), ("0x1F", 31), ("0X1f", 31), ("10", 10)],
)
def test_c_integer_literals(literal: str, value: int) -> None:
    assert tile(f"#define TILE_WIDTH {literal}\n") == value


def test_a_value_of_the_readers_length_is_read_and_a_longer_one_is_not() -> None:
    at_bound = "1+" * 99 + "10"  # 200 characters: 109
    assert len(at_bound) == reader._VALUE_CHARS
    constants = defined_constants(f"#define TILE_WIDTH {at_bound}\n")
    assert constants.value_of(constants[0]) == 109
    longer = defined_constants(f"#define TILE_WIDTH {at_bound}0\n")  # 201
    assert longer.value_of(longer[0]) is None


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("constexpr static int T = 5;\n", 5),
        ("const unsigned long long int T = 6;\n", 6),  # four type words
        ("const signed unsigned long long int T = 6;\n", 32),  # five: not a declaration
        ("const T = 5;\n", 32),  # no type
        ("int T = 5;\n", 32),  # not constant
        ("const int A = 1;\nint T = 5;\n", 32),  # another line's const does not count
        ("const int T = 5", 32),  # the file ends before the semicolon
        ("const int T = ;\n", 32),  # no value
        ("constexpr int T{5};\n", 5),
        ("constexpr int T{5}\n", 32),  # no semicolon after the braces
        ("constexpr int T{5} x;\n", 32),
        ("constexpr int T{}\n;", 32),
        ("extern const int T;\nint y = 5;\n", 32),  # declared, not defined: no value here
    ],
)
def test_the_shapes_of_a_constant(source: str, value: int) -> None:
    assert tile(source) == value


def test_a_value_may_end_exactly_at_the_readers_bound() -> None:
    # `=` at 12; the value's last token starts 200 characters later, the semicolon after it.
    source = "const int T =" + " " * 199 + "8;\n"
    assert source.index("8") - source.index("=") == reader._VALUE_CHARS
    assert tile(source) == 8
    past = "const int T =" + " " * 200 + "8;\n"
    assert tile(past) == 32


def test_a_name_may_start_with_an_underscore_but_not_with_a_digit() -> None:
    found = [c.spelling for c in defined_constants("constexpr int _T = 4;\nconst int 9T = 1;\n")]
    assert found == ["_T"]


def test_constants_are_listed_in_file_order_with_their_place_and_line() -> None:
    source = "#define A 1\nconst int B = 2;\n\n#define C 3\n"
    found = [(c.spelling, c.text, c.start, c.line) for c in defined_constants(source)]
    assert found == [("A", "1", 0, 1), ("B", "2", 22, 2), ("C", "3", 30, 4)]


def test_a_long_define_keeps_one_character_past_the_bound_and_its_note_is_shortened() -> None:
    value = "1" * 300
    (constant,) = defined_constants(f"#define TILE_WIDTH {value}\n")
    assert constant.text == "1" * (reader._VALUE_CHARS + 1)
    source = f"\n\n#define TILE_WIDTH {value}\n"
    assert tile(source) == 32  # not a value the grader reads: the lab's default
    (note,) = unread_notes(find_declarations(source, DECLARES), DECLARES)
    assert note == (
        f"Line 3: TILE_WIDTH is set to `{'1' * 57}...`, which is not a whole-number constant "
        "the grader can read before running your kernel, so it launches the kernel with this "
        "lab's default TILE = 32. That is right if your kernel takes its size from the launch "
        "(as `blockDim.x` does); if it needs another TILE, write the value as a number, e.g. "
        "`#define TILE_WIDTH 32`."
    )


def test_a_value_of_sixty_characters_is_shown_whole() -> None:
    sixty = "x" * 60
    (note,) = unread_notes(find_declarations(f"#define TILE_WIDTH {sixty}\n", DECLARES), DECLARES)
    assert f"is set to `{sixty}`, which" in note
    longer = f"#define TILE_WIDTH {sixty}y\n"
    (note,) = unread_notes(find_declarations(longer, DECLARES), DECLARES)
    assert f"is set to `{'x' * 57}...`, which" in note
    assert unread_notes(find_declarations("#define TILE_WIDTH 8\n", DECLARES), DECLARES) == []


def test_a_value_out_of_bounds_names_the_line_and_the_bounds() -> None:
    with pytest.raises(DeclarationError) as refused:
        tile("\nconstexpr int TILE_WIDTH = 64;\n")
    assert str(refused.value) == (
        "Line 2 sets TILE_WIDTH to 64, but this lab accepts TILE from 1 to 32; change it and "
        "resubmit."
    )


def test_near_misses_of_a_four_letter_spelling_and_of_every_declared_name() -> None:
    four = {"W": DeclareSpec("W", ("TILE",), 32, 1, 64)}
    (warning,) = near_misses("#define Tile 16\n", four)
    assert warning.startswith("Line 1: `Tile` = 16 is not read by the grader")
    # TILE is declared exactly; COARSE is missed: the second name is still looked at.
    both = "#define TILE_WIDTH 16\n#define coarse_factor 4\n"
    (missed,) = near_misses(both, DECLARES)
    assert missed == (
        "Line 2: `coarse_factor` = 4 is not read by the grader: this lab reads COARSE only as "
        "COARSE_FACTOR, COARSE (spelled exactly so), so it launches your kernel with COARSE = 1. "
        "Rename `coarse_factor` to `COARSE_FACTOR` if your kernel is written for 4."
    )


def test_near_misses_look_past_unrelated_constants_and_the_default_value() -> None:
    source = "#define N 1024\n#define Tile_Width 32\n#define tileWidth 16\n"
    (warning,) = near_misses(source, {"TILE": TILE})
    assert warning.startswith("Line 3: `tileWidth` = 16")


def test_a_constant_the_compiler_surely_reads_wins_over_one_it_may_read() -> None:
    maybe_first = "#ifdef __FOO\n#define TILE_WIDTH 8\n#endif\n#define TILE_WIDTH 16\n"
    assert [(c.text, c.certain) for c in defined_constants(maybe_first)] == [
        ("8", False),
        ("16", True),
    ]
    assert tile(maybe_first) == 16
    consts = "#ifdef __FOO\nconstexpr int TILE_WIDTH = 8;\n#endif\nconstexpr int TILE_WIDTH = 4;\n"
    assert [c.certain for c in defined_constants(consts)] == [False, True]
    assert tile(consts) == 4
    only_maybe = "#ifdef __FOO\n#define TILE_WIDTH 8\n#endif\n"
    assert tile(only_maybe) == 8  # the only one there is


def test_names_in_a_value_are_the_files_other_constants_up_to_a_chain_of_eight() -> None:
    assert tile("#define BLOCK 4\nconstexpr int TILE_WIDTH = BLOCK * 2;\n") == 8
    cycle = "constexpr int TILE_WIDTH = B;\nconstexpr int B = TILE_WIDTH;\n"
    assert tile(cycle) == 32  # no value: the lab's default
    names = [f"C{i}" for i in range(10)]

    def chain(length: int) -> str:
        lines = [f"constexpr int {names[i]} = {names[i + 1]};" for i in range(length - 1)]
        return "\n".join([*lines, f"constexpr int {names[length - 1]} = 5;", ""])

    for length, value in ((7, 5), (8, 5), (9, None)):
        source = chain(length) + f"constexpr int TILE_WIDTH = {names[0]};\n"
        constants = defined_constants(source)
        (declared,) = find_declarations(source, DECLARES)
        assert declared.value == value, (length, constants)


def test_not_a_definition_is_no_declaration() -> None:
    for source in ("extern const int T;\nint y = 5;\n", "const int T = ;\n"):
        assert find_declarations(source, DECLARES) == []


def test_every_unreadable_declaration_gets_a_note_and_every_readable_one_its_value() -> None:
    source = "#define TILE_WIDTH blockDim.x\n#define COARSE_FACTOR 4\n"
    assert resolve_declarations(source, DECLARES) == {"TILE": 32, "COARSE": 4}
    (note,) = unread_notes(find_declarations(source, DECLARES), DECLARES)
    assert note.startswith("Line 1: TILE_WIDTH is set to `blockDim.x`")
    both = "#define TILE_WIDTH 8\n#define COARSE_FACTOR gridDim.x\n"
    (note,) = unread_notes(find_declarations(both, DECLARES), DECLARES)
    assert note.startswith("Line 2: COARSE_FACTOR is set to `gridDim.x`")


def test_nine_names_side_by_side_are_not_a_chain() -> None:
    names = "ABCDEFGHI"
    source = "".join(f"constexpr int {n} = 1;\n" for n in names)
    source += f"constexpr int TILE_WIDTH = {' + '.join(names)};\n"
    assert tile(source) == 9
