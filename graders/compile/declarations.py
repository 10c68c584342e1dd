"""Read what a submission declares (tile width, coarsening factor) so the grader can launch it.

A lab's `[declare.TILE]` lists accepted spellings (`TILE_WIDTH`, `TILE_SIZE`, ..., `T`). The
source is read, with comments blanked so commented-out code does not count, for
`#define NAME value`, `constexpr int NAME = value;` and `const int NAME = value;` (also
`static`, `unsigned`, `size_t`, brace initialisers). Spellings are tried in the lab's order and
the first spelling found wins; within one spelling, the first definition in the file.

The reader walks the tokens once; each candidate looks at most a few tokens back and
`_VALUE_CHARS` characters ahead, so the work is linear in the file (a regular expression read
`#define TILE 1` and a long run of blanks in quadratic time). A constant spelled like one of the
lab's names but not exactly (`Tile_Width`, `tileWidth`, `BLOCK_WIDTH`) is not read: it gets a
warning that names the spelling the lab reads, since a silent default would launch a 16-wide
kernel with 32-wide blocks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from graders.compile import work
from graders.compile.source_text import SourceViews
from graders.spec import DeclareSpec
from graders.spec.expr import ExprError, evaluate

_INT_LITERAL = re.compile(r"(0[xX][0-9a-fA-F]+|\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?")
_VALUE_CHARS = 200
_ARITHMETIC = re.compile(r"^[\d\s()+\-*/%]+$")
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


class DeclarationError(ValueError):
    """A declaration the grader cannot use; the message is a sentence for the student."""


def _c_integer(literal: str) -> int:
    """A C integer literal's value: a leading 0 means octal in C (`010` is 8), which Python's
    int(x, 0) refuses outright."""
    if len(literal) > 1 and literal[0] == "0" and literal[1] not in "xX":
        return int(literal, 8)
    return int(literal, 0)


def _integer_value(text: str) -> int | None:
    """A whole-number constant: a literal (with C suffixes), or literals with + - * / % ()."""
    if len(text) > _VALUE_CHARS:
        return None
    try:
        plain = _INT_LITERAL.sub(lambda m: str(_c_integer(m.group(1))), text.strip())
    except ValueError:  # not a C literal either (`08`): the compiler has refused it already
        return None
    if not _ARITHMETIC.match(plain):
        return None
    # C integer division truncates; the evaluator's // floors, the same for non-negative values.
    python = re.sub(r"(?<![/])/(?![/])", "//", plain)
    try:
        value = evaluate(python, {})
    except ExprError:
        return None
    return value if isinstance(value, int) else None


def defined_constants(source: str) -> list[Constant]:
    """Every `#define NAME value` (not function-like) and `const`/`constexpr` integer, in file
    order."""
    views = SourceViews.of(source)
    found: list[Constant] = []
    start = 0
    for line in views.lines(views.code):
        match = _DEFINE.match(line.text)
        work.add(1 + (match.end() if match else 0))
        if match and not match.group(2):  # `#define T(x) x` is a macro, not a constant
            text = " ".join(match.group(3).split())[: _VALUE_CHARS + 1]
            found.append(Constant(match.group(1), text, start, line.number))
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
            found.append(constant)
    return sorted(found, key=lambda c: c.start)


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


def find_declarations(source: str, declares: Mapping[str, DeclareSpec]) -> list[Declaration]:
    """The declarations the source makes for the lab's names (absent names are left out)."""
    return declarations_in(defined_constants(source), declares)


def declarations_in(
    constants: list[Constant], declares: Mapping[str, DeclareSpec]
) -> list[Declaration]:
    first: dict[str, Constant] = {}
    for constant in constants:  # in file order: the first definition of a spelling wins
        first.setdefault(constant.spelling, constant)
    found: list[Declaration] = []
    for name, spec in declares.items():
        for spelling in spec.names:
            hit = first.get(spelling)
            if hit is not None:
                value = _integer_value(hit.text)
                found.append(Declaration(name, spelling, value, hit.text, hit.line))
                break
    return found


def near_misses(source: str, declares: Mapping[str, DeclareSpec]) -> list[str]:
    """Warnings (`Line N: ...`) for constants spelled like a declared name but not exactly,
    where the lab found none of its spellings and the value differs from what it will use."""
    return near_misses_in(defined_constants(source), declares)


def near_misses_in(constants: list[Constant], declares: Mapping[str, DeclareSpec]) -> list[str]:
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
            value = _integer_value(constant.text)
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


def resolve_declarations(source: str, declares: Mapping[str, DeclareSpec]) -> dict[str, int]:
    """The value of every declared name (the lab's default where absent); raise
    DeclarationError with a sentence when a value is not a whole number, out of bounds, or
    breaks the lab's `multiple_of` or `power_of_two` (DeclareSpec.problem)."""
    return resolve(find_declarations(source, declares), declares)


def resolve(declarations: list[Declaration], declares: Mapping[str, DeclareSpec]) -> dict[str, int]:
    """As `resolve_declarations`, from declarations already found."""
    values = {name: spec.default for name, spec in declares.items()}
    for decl in declarations:
        spec = declares[decl.name]
        if decl.value is None:
            shown = decl.text if len(decl.text) <= 60 else decl.text[:57] + "..."
            raise DeclarationError(
                f"Line {decl.line} sets {decl.spelling} to `{shown}`, which the grader cannot "
                f"read as a whole number; write it as a plain number, e.g. "
                f"`#define {decl.spelling} {spec.default}`."
            )
        problem = spec.problem(decl.value)
        if problem:
            raise DeclarationError(
                f"Line {decl.line} sets {decl.spelling} to {decl.value}, but {problem}; change "
                "it and resubmit."
            )
        values[decl.name] = decl.value
    return values
