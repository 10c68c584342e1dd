"""Read what a submission declares (tile width, coarsening factor) so the grader can launch it.

A lab's `[declare.TILE]` lists accepted spellings (`TILE_WIDTH`, `TILE_SIZE`, ..., `T`). The
source is searched, with comments blanked so commented-out code does not count, for
`#define NAME value`, `constexpr int NAME = value;` and `const int NAME = value;` (also
`static`, `unsigned`, `size_t`, brace initialisers). Spellings are tried in the lab's order and
the first spelling found wins; within one spelling, the first definition in the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from graders.compile.source_text import SourceViews
from graders.spec import DeclareSpec
from graders.spec.expr import ExprError, evaluate

_INT_LITERAL = re.compile(r"(0[xX][0-9a-fA-F]+|\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?")
_VALUE_CHARS = 200
_ARITHMETIC = re.compile(r"^[\d\s()+\-*/%]+$")
_TYPES = (
    r"(?:unsigned\s+int|unsigned\s+long\s+long|unsigned\s+long|unsigned|long\s+long|long|"
    r"int|size_t|short|unsigned\s+short|uint32_t|int32_t|int64_t|uint64_t|auto)"
)


@dataclass(frozen=True)
class Declaration:
    name: str  # the lab's name, e.g. TILE
    spelling: str  # as written, e.g. TILE_WIDTH
    value: int | None  # None when the value is not a whole-number constant
    text: str  # the value as written
    line: int


class DeclarationError(ValueError):
    """A declaration the grader cannot use; the message is a sentence for the student."""


def _patterns(spelling: str) -> list[re.Pattern[str]]:
    name = re.escape(spelling)
    return [
        re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{name}[ \t]+([^\n]+?)[ \t]*$", re.M),
        # The value is at most _VALUE_CHARS long: unbounded, every `const int T =` of a long run
        # without `;` read to the run's end (quadratic; minutes on a 256 KiB file).
        re.compile(
            rf"\b(?:static\s+)?(?:constexpr|const)\s+(?:static\s+)?(?:const\s+)?{_TYPES}\s+"
            rf"{name}\s*(?:=\s*([^;{{}}]{{1,{_VALUE_CHARS}}}?)|\{{\s*([^;{{}}]{{1,{_VALUE_CHARS}}}?)\s*\}})"
            r"\s*;"
        ),
    ]


def _c_integer(literal: str) -> int:
    """A C integer literal's value: a leading 0 means octal in C (`010` is 8), which Python's
    int(x, 0) refuses outright."""
    if len(literal) > 1 and literal[0] == "0" and literal[1] not in "xX":
        return int(literal, 8)
    return int(literal, 0)


def _integer_value(text: str) -> int | None:
    """A whole-number constant: a literal (with C suffixes), or literals with + - * / % ()."""
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


def find_declarations(source: str, declares: Mapping[str, DeclareSpec]) -> list[Declaration]:
    """The declarations the source makes for the lab's names (absent names are left out)."""
    views = SourceViews.of(source)
    found: list[Declaration] = []
    for name, spec in declares.items():
        for spelling in spec.names:
            hits = []
            for pattern in _patterns(spelling):
                for match in pattern.finditer(views.code):
                    text = next(g for g in match.groups() if g is not None)
                    hits.append((match.start(), text))
            if hits:
                start, text = min(hits)
                line = views.line_at(start)
                found.append(Declaration(name, spelling, _integer_value(text), text.strip(), line))
                break
    return found


def resolve_declarations(source: str, declares: Mapping[str, DeclareSpec]) -> dict[str, int]:
    """The value of every declared name (the lab's default where absent); raise
    DeclarationError with a sentence when a value is not a whole number or out of bounds."""
    values = {name: spec.default for name, spec in declares.items()}
    for decl in find_declarations(source, declares):
        spec = declares[decl.name]
        if decl.value is None:
            raise DeclarationError(
                f"Line {decl.line} sets {decl.spelling} to `{decl.text}`, which the grader cannot "
                f"read as a whole number; write it as a plain number, e.g. "
                f"`#define {decl.spelling} {spec.default}`."
            )
        if not spec.min <= decl.value <= spec.max:
            raise DeclarationError(
                f"Line {decl.line} sets {decl.spelling} to {decl.value}, but this lab accepts "
                f"{decl.name} from {spec.min} to {spec.max}; change it and resubmit."
            )
        values[decl.name] = decl.value
    return values
