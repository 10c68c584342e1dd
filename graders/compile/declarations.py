"""Where a submission declares what the grader launches with (tile width, coarsening factor),
and what the declared value is.

A lab's `[declare.TILE]` lists accepted spellings (`TILE_WIDTH`, `TILE_SIZE`, ..., `T`),
tried in the lab's order; the first spelling the file declares wins. The value comes from the
program NVRTC built (`graders.compile.declared_values`: a generated device constant per name,
read from the cubin), as it stands at the end of the file: the branch the compiler took, the
macros and constants it expanded, `constexpr` functions and `sizeof` included. A value that is
no whole-number constant (`#define TILE blockDim.x`) is not refused: the lab's default is
used, with a note that says so (`unread_notes`).

This module reads the text only to point at it: where each constant is defined (the line a
sentence names, and the value as written, for a note), which `#undef`s undo one, and which
constants are near misses of the lab's spellings (`Tile_Width`, `tileWidth`, `BLOCK_WIDTH`: a
warning names the spelling the lab reads, since a silent default would launch a 16-wide
kernel with 32-wide blocks). One exception: a constant declared inside braces (`const int
TILE = 16;` in the kernel's body, in a namespace, a class's `static constexpr` member) is out
of a file-scope probe's sight, so where the compiled program has no value for the name its
value is read from the text (`Constants.value_of`: a C integer constant expression, other
macros expanded, the file's other constants looked up), as the grader did for every constant
before.

The reader walks the tokens of `graders.compile.source_text` once; each candidate looks at most
a few tokens back and `_VALUE_CHARS` characters ahead, so the work is linear in the file.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from graders.compile import work
from graders.compile.cexpr import evaluate_tokens, integer_literal, pp_tokens
from graders.compile.declared_values import (
    ABSENT,
    BLOCKED,
    NOT_WHOLE,
    TOO_LARGE,
    UNREADABLE,
    Reading,
)
from graders.compile.preprocess import Live, Program, program_of
from graders.compile.source_text import SourceViews, code_tokens
from graders.spec import DeclareSpec

_VALUE_CHARS = 200
# How many constants one value may go through (`TILE = A`, `A = B`, ...).
_MAX_CHAIN = 8
_DEFINE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*define[ \t]+([A-Za-z_]\w*)(\(?)(.*)$", re.ASCII)
_UNDEF = re.compile(r"^[ \t]*(?:#|%:)[ \t]*undef[ \t]+([A-Za-z_]\w*)", re.ASCII)
# How many names one compile probes (the lab's spellings and the near misses): a bound on the
# wrapper's size whatever the file defines.
MAX_PROBES = 48
_TYPE_WORDS = frozenset(
    {"unsigned", "signed", "int", "long", "short", "size_t", "uint32_t", "int32_t", "int64_t",
     "uint64_t", "auto", "float", "double"}
)  # fmt: skip
_QUALIFIERS = frozenset({"static", "const", "constexpr"})
# Names students give a tile width; any of them near a lab's own spelling of one is a near miss.
_TILE_FAMILY = re.compile(r"^(?:tile|block)(?:width|size|dim)s?$")


@dataclass(frozen=True)
class Declaration:
    name: str  # the lab's name, e.g. TILE
    spelling: str  # as written, e.g. TILE_WIDTH
    value: int | None  # None when the value is not a whole-number constant
    text: str  # the value as written ("" where the reader found no definition to point at)
    line: int | None  # None where the reader found none (a constant a macro declares)
    # Why there is no value: "" (there is one), UNREADABLE (no whole-number constant),
    # "undefined" (`#undef`-ed before the end of the file), BLOCKED, TOO_LARGE.
    reason: str = ""
    undone_at: int | None = None  # the line of the `#undef`, for "undefined"


@dataclass(frozen=True)
class Constant:
    """A `#define NAME value` or a `const`/`constexpr` integer the file defines."""

    spelling: str
    text: str
    start: int  # index in the spliced source
    line: int
    certain: bool = True  # False where the grader cannot tell whether the compiler reads it
    is_macro: bool = False
    # Declared inside braces other than `extern "C" { }` (a function's body, a namespace, a
    # class): out of sight of a probe at file scope. A macro never is.
    nested: bool = False


class DeclarationError(ValueError):
    """A declaration the grader cannot use; the message is a sentence for the student."""


class Constants(list[Constant]):
    """The file's constants in file order, and what their values are."""

    def __init__(
        self,
        items: list[Constant],
        program: Program,
        undefined: dict[str, int] | None = None,
        types: set[str] | None = None,
    ) -> None:
        super().__init__(items)
        self.program = program
        self.undefined = undefined or {}  # spelling -> the line of its last live `#undef`
        # Names the file declares as types at file scope (`using T = float;`, `struct T`):
        # no constant, and a probe of one would only fail and cost NVRTC a second compile.
        self.types = types or set()
        self.first: dict[str, Constant] = {}
        self.sites: dict[str, list[Constant]] = {}
        for constant in items:  # the first the compiler surely reads, else the first at all
            self.sites.setdefault(constant.spelling, []).append(constant)
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
    compiler may read, in file order, and the live `#undef`s."""
    program = program_of(source)
    views = program.views
    found: list[Constant] = []
    undefined: dict[str, int] = {}
    start = 0
    line_starts: list[int] = []
    for index, line in enumerate(views.lines(views.directives)):
        line_starts.append(start)
        match = _DEFINE.match(line.text)
        work.add(1 + (match.end() if match else 0))
        if match and not match.group(2):  # `#define T(x) x` is a macro, not a constant
            text = " ".join(match.group(3).split())[: _VALUE_CHARS + 1]
            certain = program.states[index] == Live.LIVE
            found.append(Constant(match.group(1), text, start, line.number, certain, True))
        elif match is None and program.states[index] == Live.LIVE:
            undef = _UNDEF.match(line.text)
            if undef:
                undefined[undef.group(1)] = line.number
        start += len(line.text) + 1
    tokens = code_tokens(views)
    nested_at = _nesting(tokens)
    types = _file_scope_types(tokens, nested_at)
    i = 2
    while i < len(tokens):
        if tokens[i][0] not in ("=", "{"):
            i += 1
            continue
        declared, i = _const_declarations(tokens, i, views)
        for constant, name_index in declared:
            index = bisect.bisect_right(line_starts, constant.start) - 1
            certain = program.states[index] == Live.LIVE
            nested = nested_at[name_index]
            found.append(dataclasses.replace(constant, certain=certain, nested=nested))
    return Constants(sorted(found, key=lambda c: c.start), program, undefined, types)


_TYPE_KEYWORDS = frozenset({"struct", "class", "union", "enum"})


def _file_scope_types(tokens: list[tuple[str, int]], nested_at: list[bool]) -> set[str]:
    """Names declared as types at file scope: `using NAME =`, `struct|class|union|enum NAME`
    followed by `{`, `;` or `:`, and the name before the `;` of a `typedef` (looked for at most
    `_VALUE_CHARS` characters on)."""
    names: set[str] = set()
    toks = [t for t, _ in tokens]
    for i, tok in enumerate(toks):
        if nested_at[i] or i + 2 >= len(toks):
            continue
        if (
            tok == "using"
            and toks[i + 2] == "="
            or tok in _TYPE_KEYWORDS
            and toks[i + 2] in ("{", ";", ":")
        ):
            names.add(toks[i + 1])
        elif tok == "typedef":
            k = i + 1
            while k < len(toks) and toks[k] != ";" and tokens[k][1] - tokens[i][1] < _VALUE_CHARS:
                k += 1
            if k < len(toks) and toks[k] == ";":
                names.add(toks[k - 1])
    work.add(len(toks))
    return names


def _nesting(tokens: list[tuple[str, int]]) -> list[bool]:
    """Per token, whether it lies inside braces other than an `extern "C" { }` block."""
    out: list[bool] = []
    stack: list[bool] = []  # per open brace: whether it is a linkage block
    depth = 0  # open braces that are not linkage blocks
    for i, (tok, _) in enumerate(tokens):
        if tok == "{":
            linkage = i >= 2 and tokens[i - 2][0] == "extern" and tokens[i - 1][0].startswith('"')
            stack.append(linkage)
            depth += not linkage
        elif tok == "}" and stack:
            depth -= not stack.pop()
        out.append(depth > 0)
    work.add(len(tokens))
    return out


def _const_declarations(
    tokens: list[tuple[str, int]], i: int, views: SourceViews
) -> tuple[list[tuple[Constant, int]], int]:
    """The constants (and their names' token indices) declared by `qualifiers type NAME =
    value, NAME2 = value2;` (or `NAME{value}`) whose first `=` or `{` is token i, and the
    index to read on from; nothing when the tokens before or after do not have that shape."""
    name = tokens[i - 1][0]
    if not (name[0].isalpha() or name[0] == "_"):
        return [], i + 1
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
        return [], i + 1
    found: list[tuple[Constant, int]] = []
    while True:  # one declarator after another: `TILE_DIM = 32, BLOCK_ROWS = 16;`
        name, name_start = tokens[i - 1]
        if not (name[0].isalpha() or name[0] == "_"):
            return found, i + 1
        end = _value_end(tokens, i)
        if end is None:
            return found, i + 1
        text = views.code[tokens[i][1] + 1 : tokens[end][1]].strip()
        found.append((Constant(name, text, name_start, views.line_at(name_start)), i - 1))
        after = end + 1 if tokens[i][0] == "{" else end
        if after >= len(tokens) or tokens[after][0] != ",":
            ends = after < len(tokens) and tokens[after][0] == ";"
            return (found if ends else []), after + 1
        if after + 2 >= len(tokens) or tokens[after + 2][0] not in ("=", "{"):
            return [], after + 1
        i = after + 2


def _value_end(tokens: list[tuple[str, int]], i: int) -> int | None:
    """The index of what ends the value whose `=` or `{` is token i: the `;` or `,` after an
    `=` (outside parentheses and brackets), the `}` of braces; None when the value is empty,
    longer than `_VALUE_CHARS`, or not closed so."""
    closer = "}" if tokens[i][0] == "{" else ";"
    k = i + 1
    depth = 0
    limit = tokens[i][1] + _VALUE_CHARS
    while k < len(tokens) and tokens[k][1] <= limit:
        tok = tokens[k][0]
        if tok in ("{", "}", ";") or (tok == "," and depth == 0 and closer == ";"):
            break
        if tok in ("(", "["):
            depth += 1
        elif tok in (")", "]"):
            depth -= 1
        k += 1
    work.add(k - i)
    if k >= len(tokens) or k == i + 1:
        return None
    tok = tokens[k][0]
    if closer == "}":
        return k if tok == "}" and k + 1 < len(tokens) else None
    return k if tok in (";", ",") else None


def _normalized(name: str) -> str:
    return name.replace("_", "").lower()


def find_declarations(
    source: str | Program, declares: Mapping[str, DeclareSpec]
) -> list[Declaration]:
    """The declarations the source makes for the lab's names (absent names are left out),
    every value read from the text: the reader a constant inside a function gets."""
    return declarations_in(defined_constants(source), declares)


def declarations_in(
    constants: Constants,
    declares: Mapping[str, DeclareSpec],
    readings: Mapping[str, Reading] | None = None,
) -> list[Declaration]:
    """The lab's names the file declares, each by the first of its spellings it declares.
    With `readings` (the compiled program's, `graders.compile.declared_values`) a value comes
    from the compiler, the text pointing at its line; without, from the text."""
    found: list[Declaration] = []
    for name, spec in declares.items():
        for spelling in spec.names:
            if readings is None:
                hit = constants.first.get(spelling)
                declared = hit and Declaration(
                    name, spelling, constants.value_of(hit), hit.text, hit.line
                )
            else:
                declared = _declared(name, spelling, readings.get(spelling), constants)
            if declared:
                found.append(declared)
                break
    return found


def _declared(
    name: str, spelling: str, reading: Reading | None, constants: Constants
) -> Declaration | None:
    sites = constants.sites.get(spelling, [])
    if reading is not None and reading.known:
        site = _site_of([c for c in sites if not c.nested], reading)
        text, line = (site.text, site.line) if site else ("", None)
        return Declaration(name, spelling, reading.value, text, line)
    state = reading.state if reading is not None else UNREADABLE
    if state == NOT_WHOLE:  # the compiler read it: a float, say
        site = sites[-1] if sites else None
        text, line = (site.text, site.line) if site else ("", None)
        return Declaration(name, spelling, None, text, line, UNREADABLE)
    nested = [c for c in sites if c.nested]
    if nested:  # in a function, a namespace, a class: out of the probes' sight; the text's value
        first = next((c for c in nested if c.certain), nested[0])
        value = constants.value_of(first)
        reason = "" if value is not None else UNREADABLE
        return Declaration(name, spelling, value, first.text, first.line, reason)
    if not sites:
        return None  # a name the file does not declare (a type, a template's parameter)
    site = sites[-1]
    if state == ABSENT:
        undone = constants.undefined.get(spelling)
        if undone is None:
            return None  # defined only where the compiler did not read it
        return Declaration(name, spelling, None, site.text, site.line, "undefined", undone)
    return Declaration(name, spelling, None, site.text, site.line, state)


def _site_of(sites: list[Constant], reading: Reading) -> Constant | None:
    """The definition a compiled value most likely came from, for the sentence's line: of the
    kind the compiler read (a macro or a constant), the last one the compiler surely reads,
    else one written as that very number, else the last."""
    kind = [c for c in sites if c.is_macro == (reading.state == "macro")] or sites
    if not kind:
        return None
    certain = [c for c in kind if c.certain]
    if certain:
        return certain[-1]
    for constant in kind:
        literal = integer_literal(constant.text.strip("() "))
        if literal is not None and literal[0] == reading.value:
            return constant
    return kind[-1]


def probe_names(constants: Constants, declares: Mapping[str, DeclareSpec]) -> list[str]:
    """The names whose values the compiled program is asked for: every spelling of the lab's,
    then the file's near misses of them (at most MAX_PROBES in all)."""
    names = [s for spec in declares.values() for s in spec.names]
    for spec in declares.values():
        names += [c.spelling for c in constants if _is_near(c.spelling, spec) and not c.nested]
    return [n for n in dict.fromkeys(names) if n not in constants.types][:MAX_PROBES]


def _is_near(spelling: str, spec: DeclareSpec) -> bool:
    close = {_normalized(s) for s in spec.names if len(s) >= 4}
    family = any(_TILE_FAMILY.match(n) for n in close)
    key = _normalized(spelling)
    return key in close or bool(family and _TILE_FAMILY.match(key))


def near_misses(source: str | Program, declares: Mapping[str, DeclareSpec]) -> list[str]:
    """Warnings (`Line N: ...`) for constants spelled like a declared name but not exactly,
    where the lab found none of its spellings and the value differs from what it will use."""
    return near_misses_in(defined_constants(source), declares)


def near_misses_in(
    constants: Constants,
    declares: Mapping[str, DeclareSpec],
    readings: Mapping[str, Reading] | None = None,
) -> list[str]:
    declared = {d.name for d in declarations_in(constants, declares, readings)}
    warnings: list[str] = []
    for name, spec in declares.items():
        if name in declared:
            continue
        for constant in constants:
            if not _is_near(constant.spelling, spec):
                continue
            value = _value(constant, constants, readings)
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


def _value(
    constant: Constant, constants: Constants, readings: Mapping[str, Reading] | None
) -> int | None:
    if readings is None or constant.nested:
        return constants.value_of(constant)
    reading = readings.get(constant.spelling)
    return reading.value if reading is not None and reading.known else None


def resolve_declarations(
    source: str | Program, declares: Mapping[str, DeclareSpec]
) -> dict[str, int]:
    """The value of every declared name (the lab's default where absent, or where the value
    is not a whole-number constant: see `unread_notes`); raise DeclarationError with a sentence
    when a value is out of bounds, or breaks the lab's `multiple_of` or `power_of_two`
    (DeclareSpec.problem)."""
    return resolve(find_declarations(source, declares), declares)


def unread_notes(declarations: list[Declaration], declares: Mapping[str, DeclareSpec]) -> list[str]:
    """A note (`Line N: ...`) per declaration whose value the grader cannot use: the lab's
    default launch is used instead, which is right for a kernel that takes its tile width from
    the launch (`const int TILE = blockDim.x;`)."""
    notes = []
    for decl in declarations:
        if decl.value is not None:
            continue
        spec = declares[decl.name]
        where = f"Line {decl.line}: " if decl.line is not None else ""
        default = f"so it launches the kernel with this lab's default {decl.name} = {spec.default}."
        if decl.reason == "undefined":
            notes.append(
                f"{where}{decl.spelling} is `#undef`-ed on line {decl.undone_at}, and the "
                f"grader reads declared values as they stand at the end of your file, {default} "
                f"If your kernel is written for another {decl.name}, remove the `#undef`."
            )
            continue
        if decl.reason == BLOCKED:
            notes.append(
                f"{where}the grader could not read {decl.spelling} from the compiled program, "
                "because your file defines a C++ keyword (such as `const` or `long`) as a "
                f"macro, {default} Remove that macro if your kernel needs another {decl.name}."
            )
            continue
        shown = decl.text if len(decl.text) <= 60 else decl.text[:57] + "..."
        said = f"is set to `{shown}`, which is" if shown else "is"
        large = ""
        if decl.reason == TOO_LARGE:
            large = " (it expands to more text than the grader reads)"
        notes.append(
            f"{where}{decl.spelling} {said} not a whole-number constant the grader can read "
            f"before running your kernel{large}, {default} That "
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
            where = f"Line {decl.line} sets" if decl.line is not None else "Your file sets"
            raise DeclarationError(
                f"{where} {decl.spelling} to {decl.value}, but {problem}; change it and resubmit."
            )
        values[decl.name] = decl.value
    return values
