"""Tile forms: a lab's declared values written as careful students write them must be read as
the compiler reads them.

For a lab with `[declare.*]` names, `lab check` rewrites the reference that declares them
(the lab's scoring target first) in unusual but valid forms, compiles each as a submission, and
checks that the grader reads the values the reference itself gets; on a GPU each form must pass
every case, as the reference does. The forms (issue 34's cases 1 and 2):

- `platform-macro`: each `#define NAME value` becomes `#if defined(__HIP_PLATFORM_AMD__)`,
  `#define NAME <another value>`, `#else`, the original line, `#endif` (NVRTC defines no such
  macro, so it compiles the original);
- `two-constants`: the `#define`s become one `constexpr int A = a, B = b;` declaration (a
  second constant is added where the lab declares one name), in the first one's place.

The reference is the lab's own, trusted text: it is read here, outside the sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graders.compile.declarations import defined_constants
from graders.spec import LabSpec, ReferenceSpec

PLATFORM_MACRO = "platform-macro"
TWO_CONSTANTS = "two-constants"
TILE_FORMS = (PLATFORM_MACRO, TWO_CONSTANTS)
_DIRECTIVE = re.compile(r"^\s*#")


@dataclass(frozen=True)
class TileForm:
    kind: str  # one of TILE_FORMS
    origin: str  # the reference's file
    source: str

    @property
    def label(self) -> str:
        return f"tile form {self.kind}"

    @property
    def filename(self) -> str:
        return f"tile-{self.kind}.cu"


def declaring_reference(lab: LabSpec) -> tuple[ReferenceSpec, dict[int, tuple[str, str]]] | None:
    """The reference that `#define`s some of the lab's declared names on lines of their own
    (the scoring target first), with {line: (name, value as written)}; None where none does."""
    spellings = {s for spec in lab.declares.values() for s in spec.names}
    ordered = sorted(lab.references, key=lambda r: r.name != lab.scoring.target)
    for ref in ordered:
        if ref.file is None:
            continue
        physical = ref.source.split("\n")
        found: dict[int, tuple[str, str]] = {}
        for constant in defined_constants(ref.source):
            if not (constant.is_macro and constant.certain and constant.spelling in spellings):
                continue
            line = physical[constant.line - 1] if constant.line <= len(physical) else ""
            if re.match(rf"\s*#\s*define\s+{constant.spelling}\s[^\\]*$", line):
                found[constant.line] = (constant.spelling, constant.text)
        if found:
            return ref, found
    return None


def tile_forms(lab: LabSpec) -> tuple[list[TileForm], list[str]]:
    """The forms made from the lab's declaring reference, and why any could not be made."""
    chosen = declaring_reference(lab)
    if chosen is None:
        return [], ["no reference `#define`s one of the lab's declared names"]
    ref, defines = chosen
    physical = ref.source.split("\n")
    notes: list[str] = []
    forms = [TileForm(PLATFORM_MACRO, str(ref.file), _platform_macro(physical, defines))]
    names = {name for name, _ in defines.values()}
    in_directives = [
        name
        for i, line in enumerate(physical, 1)
        if i not in defines and _DIRECTIVE.match(line)
        for name in names
        if re.search(rf"\b{re.escape(name)}\b", line)
    ]
    if in_directives:  # `#if TILE > 16` needs a macro: a constexpr would not do
        notes.append(f"{TWO_CONSTANTS}: {in_directives[0]} is used in a directive of {ref.file}")
    else:
        forms.append(TileForm(TWO_CONSTANTS, str(ref.file), _two_constants(physical, defines)))
    return forms, notes


def _platform_macro(physical: list[str], defines: dict[int, tuple[str, str]]) -> str:
    out: list[str] = []
    for i, line in enumerate(physical, 1):
        if i not in defines:
            out.append(line)
            continue
        name, value = defines[i]
        out += [
            "#if defined(__HIP_PLATFORM_AMD__)",
            f"#define {name} (({value}) + 1)",
            "#else",
            line,
            "#endif",
        ]
    return "\n".join(out)


def _two_constants(physical: list[str], defines: dict[int, tuple[str, str]]) -> str:
    declarators = [f"{name} = ({value})" for name, value in defines.values()]
    if len(declarators) == 1:
        name = next(iter(defines.values()))[0]
        declarators.append(f"kg_{name.lower()}_half = {name} / 2")
    first = min(defines)
    out: list[str] = []
    for i, line in enumerate(physical, 1):
        if i == first:
            out.append(f"constexpr int {', '.join(declarators)};")
        elif i not in defines:
            out.append(line)
    return "\n".join(out)
