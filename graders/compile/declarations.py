"""Read what a submission declares (tile width, coarsening factor) so the grader can launch it.

A lab's `[declare.TILE]` lists accepted spellings (`TILE_WIDTH`, `TILE_SIZE`, ..., `T`). The
preprocessed program is read (`graders.compile.preprocess`: comments and dead branches gone, so
`#if 0 / #define TILE_WIDTH 32 / #else / #define TILE_WIDTH 16 / #endif` is 16), for
`#define NAME value`, `constexpr int NAME = value;` and `const int NAME = value;` (also
`static`, `unsigned`, `size_t`, brace initialisers). Spellings are tried in the lab's order and
the first spelling found wins; within one spelling, the first definition the compiler surely
reads, else the first that it may read (under a condition the grader cannot evaluate).

A value is a C integer constant expression, read as the preprocessor would: other macros are
expanded (`#define TILE_WIDTH (2 * BLOCK)`), and names left are the file's other constants
(`constexpr int TILE = BLOCK;`). A value that is no such constant (`const int TILE =
blockDim.x;`) is not refused: the lab's default is used, with a note that says so.

The reader walks the tokens once; each candidate looks at most a few tokens back and
`_VALUE_CHARS` characters ahead, so the work is linear in the file (a regular expression read
`#define TILE 1` and a long run of blanks in quadratic time). A constant spelled like one of the
lab's names but not exactly (`Tile_Width`, `tileWidth`, `BLOCK_WIDTH`) is not read: it gets a
warning that names the spelling the lab reads, since a silent default would launch a 16-wide
kernel with 32-wide blocks.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from graders.compile import work
from graders.compile.cexpr import evaluate_tokens, pp_tokens
from graders.compile.preprocess import Live, Program, program_of
from graders.compile.source_text import SourceViews
from graders.spec import DeclareSpec

_VALUE_CHARS = 200
# How many constants one value may go through (`TILE = A`, `A = B`, ...).
_MAX_CHAIN = 8
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d\w*|\S", re.ASCII)
_DEFINE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*define[ \t]+([A-Za-z_]\w*)(\(?)(.*)$", re.ASCII)
_DIRECTIVE_LINE = re.compile(r"^[ \t]*(?:#|%:)[^\n]*", re.M)
_TYPE_WORDS = frozenset(
    {"unsigned", "signed", "int", "long", "short", "size_t", "uint32_t", "int32_t", "int64_t",
     "uint64_t", "auto"}
)  # fmt: skip
_QUALIFIERS = frozenset({"static", "const", "constexpr"})
# Names students give a tile width; any of them near a lab's own spelling of one is a near miss.
_TILE_FAMILY = re.compile(r"^(?:tile|block)(?:width|size|dim)s?$")


@dataclass(frozen=True)
class Declaration:
    name: str  # the lab's name, e.g. TILE
    spelling: str  # as written, e.g. TILE_WIDTH
    value: int | None  # None when the value is not a whole-number constant
    text: str  # the value as written
    line: int


@dataclass(frozen=True)
class Constant:
    """A `#define NAME value` or a `const`/`constexpr` integer the file defines."""

    spelling: str
    text: str
    start: int  # index in the spliced source
    line: int
    certain: bool = True  # False where the grader cannot tell whether the compiler reads it
    is_macro: bool = False


class DeclarationError(ValueError):
    """A declaration the grader cannot use; the message is a sentence for the student."""


class Constants(list[Constant]):
    """The file's constants in file order, and what their values are."""

    def __init__(self, items: list[Constant], program: Program) -> None:
        super().__init__(items)
        self.program = program
        self.first: dict[str, Constant] = {}
        for constant in items:  # the first the compiler surely reads, else the first at all
            held = self.first.get(constant.spelling)
            if held is None or (constant.certain and not held.certain):
                self.first[constant.spelling] = constant
        self._values: dict[str, int | None] = {}
        self._open: set[str] = set()

    def value_of(self, constant: Constant) -> int | None:
        """The constant's whole-number value; None when it is not one the grader can read."""
        if len(constant.text) > _VALUE_CHARS:
            return None
        return evaluate_tokens(
            pp_tokens(constant.text),
            macros=self.program.macro,
            name_value=self._named,
            budget=self.program.budget,
        )

    def _named(self, name: str) -> int | None:
        """A name left after expansion: another constant of the file, read once."""
        if name in self._values:
            return self._values[name]
        constant = self.first.get(name)
        if constant is None or name in self._open or len(self._open) >= _MAX_CHAIN:
            return None
        self._open.add(name)
        try:
            value = self.value_of(constant)
        finally:
            self._open.discard(name)
        self._values[name] = value
        return value


def defined_constants(source: str | Program) -> Constants:
    """Every `#define NAME value` (not function-like) and `const`/`constexpr` integer the
    compiler may read, in file order."""
    program = program_of(source)
    views = program.views
    found: list[Constant] = []
    start = 0
    line_starts: list[int] = []
    for index, line in enumerate(views.lines(views.code)):
        line_starts.append(start)
        match = _DEFINE.match(line.text)
        work.add(1 + (match.end() if match else 0))
        if match and not match.group(2):  # `#define T(x) x` is a macro, not a constant
            text = " ".join(match.group(3).split())[: _VALUE_CHARS + 1]
            certain = program.states[index] == Live.LIVE
            found.append(Constant(match.group(1), text, start, line.number, certain, True))
        start += len(line.text) + 1
    bare = _DIRECTIVE_LINE.sub(lambda m: " " * len(m.group()), views.bare)
    work.add(len(bare))
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(bare)]
    work.add(len(tokens))
    for i, (tok, _) in enumerate(tokens):
        if tok not in ("=", "{") or i < 2:
            continue
        constant = _const_declaration(tokens, i, views)
        if constant is not None:
            index = bisect.bisect_right(line_starts, constant.start) - 1
            if program.states[index] != Live.LIVE:
                constant = dataclasses.replace(constant, certain=False)
            found.append(constant)
    return Constants(sorted(found, key=lambda c: c.start), program)


def _const_declaration(
    tokens: list[tuple[str, int]], i: int, views: SourceViews
) -> Constant | None:
    """The constant declared by `qualifiers type NAME = value;` or `... NAME{value};` whose `=`
    or `{` is token i; None when the tokens before or after do not have that shape."""
    name, name_start = tokens[i - 1]
    if not (name[0].isalpha() or name[0] == "_"):
        return None
    j = i - 2
    types = 0
    while j >= 0 and types < 4 and tokens[j][0] in _TYPE_WORDS:
        types += 1
        j -= 1
    qualifiers: set[str] = set()
    while j >= 0 and len(qualifiers) < 3 and tokens[j][0] in _QUALIFIERS:
        qualifiers.add(tokens[j][0])
        j -= 1
    work.add(i - j)
    if not types or not qualifiers & {"const", "constexpr"}:
        return None
    closer = "}" if tokens[i][0] == "{" else ";"
    k = i + 1
    limit = tokens[i][1] + _VALUE_CHARS
    while k < len(tokens) and tokens[k][1] <= limit and tokens[k][0] not in (";", "{", "}"):
        k += 1
    work.add(k - i)
    if k >= len(tokens) or tokens[k][0] != closer or k == i + 1:
        return None
    if closer == "}" and (k + 1 >= len(tokens) or tokens[k + 1][0] != ";"):
        return None
    text = views.code[tokens[i][1] + 1 : tokens[k][1]].strip()
    return Constant(name, text, name_start, views.line_at(name_start))


def _normalized(name: str) -> str:
    return name.replace("_", "").lower()


def find_declarations(
    source: str | Program, declares: Mapping[str, DeclareSpec]
) -> list[Declaration]:
    """The declarations the source makes for the lab's names (absent names are left out)."""
    return declarations_in(defined_constants(source), declares)


def declarations_in(constants: Constants, declares: Mapping[str, DeclareSpec]) -> list[Declaration]:
    found: list[Declaration] = []
    for name, spec in declares.items():
        for spelling in spec.names:
            hit = constants.first.get(spelling)
            if hit is not None:
                value = constants.value_of(hit)
                found.append(Declaration(name, spelling, value, hit.text, hit.line))
                break
    return found


def near_misses(source: str | Program, declares: Mapping[str, DeclareSpec]) -> list[str]:
    """Warnings (`Line N: ...`) for constants spelled like a declared name but not exactly,
    where the lab found none of its spellings and the value differs from what it will use."""
    return near_misses_in(defined_constants(source), declares)


def near_misses_in(constants: Constants, declares: Mapping[str, DeclareSpec]) -> list[str]:
    declared = {d.name for d in declarations_in(constants, declares)}
    warnings: list[str] = []
    for name, spec in declares.items():
        if name in declared:
            continue
        close = {_normalized(s) for s in spec.names if len(s) >= 4}
        family = any(_TILE_FAMILY.match(n) for n in close)
        for constant in constants:
            key = _normalized(constant.spelling)
            if key not in close and not (family and _TILE_FAMILY.match(key)):
                continue
            value = constants.value_of(constant)
            if value is None or value == spec.default:
                continue
            readable = ", ".join(spec.names)
            warnings.append(
                f"Line {constant.line}: `{constant.spelling}` = {value} is not read by the "
                f"grader: this lab reads {name} only as {readable} (spelled exactly so), so "
                f"it launches your kernel with {name} = {spec.default}. Rename "
                f"`{constant.spelling}` to `{spec.names[0]}` if your kernel is written for "
                f"{value}."
            )
            break
    return warnings


def resolve_declarations(
    source: str | Program, declares: Mapping[str, DeclareSpec]
) -> dict[str, int]:
    """The value of every declared name (the lab's default where absent, or where the value
    is not a whole-number constant: see `unread_notes`); raise DeclarationError with a sentence
    when a value is out of bounds, or breaks the lab's `multiple_of` or `power_of_two`
    (DeclareSpec.problem)."""
    return resolve(find_declarations(source, declares), declares)


def unread_notes(declarations: list[Declaration], declares: Mapping[str, DeclareSpec]) -> list[str]:
    """A note (`Line N: ...`) per declaration whose value is no constant the grader can read:
    the lab's default launch is used instead, which is right for a kernel that takes its tile
    width from the launch (`const int TILE = blockDim.x;`)."""
    notes = []
    for decl in declarations:
        if decl.value is not None:
            continue
        spec = declares[decl.name]
        shown = decl.text if len(decl.text) <= 60 else decl.text[:57] + "..."
        notes.append(
            f"Line {decl.line}: {decl.spelling} is set to `{shown}`, which is not a "
            f"whole-number constant the grader can read before running your kernel, so it "
            f"launches the kernel with this lab's default {decl.name} = {spec.default}. That "
            f"is right if your kernel takes its size from the launch (as `blockDim.x` does); "
            f"if it needs another {decl.name}, write the value as a number, e.g. "
            f"`#define {decl.spelling} {spec.default}`."
        )
    return notes


def resolve(declarations: list[Declaration], declares: Mapping[str, DeclareSpec]) -> dict[str, int]:
    """As `resolve_declarations`, from declarations already found."""
    values = {name: spec.default for name, spec in declares.items()}
    for decl in declarations:
        spec = declares[decl.name]
        if decl.value is None:
            continue  # the lab's default, with a note (unread_notes)
        problem = spec.problem(decl.value)
        if problem:
            raise DeclarationError(
                f"Line {decl.line} sets {decl.spelling} to {decl.value}, but {problem}; change "
                "it and resubmit."
            )
        values[decl.name] = decl.value
    return values
