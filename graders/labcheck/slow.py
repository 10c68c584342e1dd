"""Correct-but-slow kernels: the profiler finding each teaches, from its header, and whether
the profile shows it on its line.

A lab's `slow/` folder holds kernels that pass every case but are slow for one reason the
lab teaches (an uncoalesced transpose, an unpadded tile). Each starts with `// key: value`
lines, like a faulty kernel's:

    // expect-profile: uncoalesced_global   a finding (graders.profile.findings)
    // expect-line: 12                      the line of this file the finding must name
    // why: Each warp writes a column ...   required: the lesson, in a sentence

`lab check` compiles them without a GPU; on a GPU host it runs every case (each must pass)
and profiles the lab's profiled case with Nsight Compute: the finding must be there, on that
line. The lab's references are profiled too, and each may show only the access-pattern
findings its `[profile.expect]` entry lists (none where it has no entry), and must show them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from graders.spec.model import PROFILE_FINDINGS

HEADER_LINE = re.compile(r"^//\s*(?P<key>[a-z-]+):\s*(?P<value>.+?)\s*$")
HEADER_KEYS = ("expect-profile", "expect-line", "why")


class SlowHeaderError(ValueError):
    """A slow kernel's header that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class SlowExpectation:
    path: Path
    finding: str
    line: int
    why: str

    @property
    def label(self) -> str:
        return f"slow/{self.path.name}"

    def describe(self) -> str:
        return f"{self.finding} at line {self.line}"


def slow_files(folder: Path) -> list[Path]:
    slow = folder / "slow"
    return sorted(slow.glob("*.cu")) if slow.is_dir() else []


def read_slow_header(path: Path) -> SlowExpectation:
    """The header of a slow kernel; SlowHeaderError if it is off."""
    label = f"slow/{path.name}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SlowHeaderError(f"{label}: cannot be read as UTF-8 text ({exc}).") from exc
    lines = text.split("\n")
    fields: dict[str, str] = {}
    for number, text_line in enumerate(lines, start=1):
        match = HEADER_LINE.match(text_line)
        if not match:
            break
        key = match["key"]
        if key not in HEADER_KEYS:
            raise SlowHeaderError(
                f"{label} line {number}: unknown header key {key!r} (the keys are "
                f"{', '.join(HEADER_KEYS)})."
            )
        if key in fields:
            raise SlowHeaderError(f"{label} line {number}: {key!r} appears twice.")
        fields[key] = match["value"]
    for key in HEADER_KEYS:
        if key not in fields:
            raise SlowHeaderError(
                f"{label}: the header (the `// key: value` lines at the top) has no {key} line; "
                "every slow kernel says which profiler finding it expects, on which line, "
                "and why."
            )
    finding = fields["expect-profile"]
    if finding not in PROFILE_FINDINGS:
        raise SlowHeaderError(
            f"{label}: expect-profile {finding!r} is not a finding; use one of "
            f"{', '.join(PROFILE_FINDINGS)}."
        )
    if not fields["expect-line"].isdigit():
        raise SlowHeaderError(f"{label}: expect-line must be a line number of the file.")
    line = int(fields["expect-line"])
    if not 1 <= line <= len(lines) or not lines[line - 1].strip():
        raise SlowHeaderError(
            f"{label}: expect-line {line} is not a line with code in the file ({len(lines)} lines)."
        )
    return SlowExpectation(path=path, finding=finding, line=line, why=fields["why"])


def profile_problem(exp: SlowExpectation, found: list[tuple[str, int | None]]) -> str | None:
    """Why the profile does not show what the header expects, or None when it does."""
    if (exp.finding, exp.line) in found:
        return None
    same_kind = sorted({line for kind, line in found if kind == exp.finding and line})
    if same_kind:
        where = ", ".join(str(n) for n in same_kind)
        return f"the profile finds {exp.finding} at line {where}, not at line {exp.line}"
    if any(kind == exp.finding for kind, _ in found):
        return f"the profile finds {exp.finding}, but names no line for it"
    kinds = ", ".join(sorted({kind for kind, _ in found})) or "nothing"
    return f"the profile does not find {exp.finding} (it finds {kinds})"


def ladder_problem(expected: tuple[str, ...], found: list[str]) -> str | None:
    """Why a reference's pattern findings differ from what the lab's ladder expects."""
    unexpected = sorted(set(found) - set(expected))
    missing = sorted(set(expected) - set(found))
    parts = []
    if unexpected:
        parts.append(f"shows {', '.join(unexpected)}, which [profile.expect] does not list")
    if missing:
        parts.append(f"does not show {', '.join(missing)}, which [profile.expect] lists")
    return "; ".join(parts) or None
