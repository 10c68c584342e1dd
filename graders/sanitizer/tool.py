"""compute-sanitizer's reports, parsed into findings a student can read, and where the tool is.

The tools run in graders.sanitizer.child; what their findings do to the grade is in
graders.sanitizer.verdicts.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from graders.results import Finding

TOOLS = ("memcheck", "racecheck", "synccheck")

_LOCATION = re.compile(r"\bin\s+(?P<file>[^\s:]+\.(?:cu|cuh|h)):(?P<line>\d+)")
_THREAD = re.compile(r"by thread \((?P<t>[\d,\s]+)\) in block \((?P<b>[\d,\s]+)\)")


# The CUDA toolkit's usual home: a worker's PATH (or the sandbox's scrubbed one) may lack it.
_KNOWN_DIRS = ("/usr/local/cuda/bin", "/opt/cuda/bin", "/usr/local/cuda/compute-sanitizer")


def executable() -> str | None:
    """The compute-sanitizer program: KERNELGRADER_COMPUTE_SANITIZER, PATH, or the toolkit."""
    configured = os.environ.get("KERNELGRADER_COMPUTE_SANITIZER")
    if configured and os.access(configured, os.X_OK):
        return configured
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for folder in _KNOWN_DIRS:
        candidate = os.path.join(folder, "compute-sanitizer")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def unavailable_reason() -> str | None:
    if executable() is None:
        return (
            "compute-sanitizer is not installed on this worker (it comes with the CUDA "
            "toolkit), so the memory, race and barrier checks were skipped."
        )
    return None


def _line_in(text: str, filename: str) -> int | None:
    """The first line in the student's file that `text` names (else another file's line)."""
    fallback = None
    for m in _LOCATION.finditer(text):
        if Path(m.group("file")).name == filename:
            return int(m.group("line"))
        fallback = fallback or int(m.group("line"))
    return fallback


def _blocks(output: str) -> list[str]:
    """One block per error: an unindented `=========` line starts a block."""
    blocks: list[str] = []
    for raw in output.splitlines():
        if not raw.startswith("========="):
            continue
        body = raw[len("=========") :]
        if body.strip() == "":
            continue
        if not body.startswith("    ") and not body.startswith("\t"):
            blocks.append(body.strip())
        elif blocks:
            blocks[-1] += "\n" + body.strip()
    return blocks


def _where(line: int | None) -> str:
    return f" at line {line}" if line else ""


def _memcheck(block: str, filename: str) -> Finding | None:
    head = block.splitlines()[0]
    m = re.match(r"Invalid (__global__|__shared__|__local__|)\s*(read|write|atomic)", head)
    line = _line_in(block, filename)
    thread = _THREAD.search(block)
    who = f" (thread ({thread.group('t')}) of block ({thread.group('b')}))" if thread else ""
    if m:
        space = {"__global__": "global", "__shared__": "shared", "__local__": "local"}.get(
            m.group(1), "device"
        )
        access = m.group(2)
        return Finding(
            tool="memcheck",
            kind="out_of_bounds",
            line=line,
            message=(
                f"Out-of-bounds {access} of {space} memory{_where(line)}{who}: the address is "
                "outside every array the kernel was given. Check the index against the "
                "array's size before the access."
            ),
        )
    if head.startswith("Misaligned"):
        return Finding(
            "memcheck", "misaligned_address", f"Misaligned memory access{_where(line)}{who}.", line
        )
    return None


def _racecheck(block: str, filename: str) -> Finding | None:
    head = block.splitlines()[0]
    if "Race reported" not in head and not re.search(r"(RAW|WAR|WAW) hazard", head):
        return None
    lines = [
        int(m.group("line"))
        for m in _LOCATION.finditer(block)
        if Path(m.group("file")).name == filename
    ]
    lines = lines or [int(m.group("line")) for m in _LOCATION.finditer(block)]
    kinds = re.findall(r"(Write|Read) (?:access|Thread)", block)
    at = " and ".join(f"line {n} ({k.lower()})" for n, k in zip(lines, kinds, strict=False))
    return Finding(
        tool="racecheck",
        kind="shared_memory_race",
        line=lines[0] if lines else None,
        message=(
            f"Shared-memory race{' between ' + at if at else ''}: threads of a block read and "
            "write the same shared-memory element with no __syncthreads() between them. A tile "
            "loop needs a barrier after loading the tile and another before overwriting it."
        ),
    )


def _synccheck(block: str, filename: str) -> Finding | None:
    low = block.lower()
    if "barrier" not in low and "divergent" not in low:
        return None
    line = _line_in(block, filename)
    return Finding(
        tool="synccheck",
        kind="divergent_barrier",
        line=line,
        message=(
            f"Barrier in divergent code{_where(line)}: __syncthreads() is reached by only some "
            "threads of a block (the barrier problem). Every thread of a block must reach the "
            "same __syncthreads(); move it out of the `if`, and guard only the loads and stores."
        ),
    )


_PARSERS = {"memcheck": _memcheck, "racecheck": _racecheck, "synccheck": _synccheck}


def parse_output(output: str, *, tool: str, filename: str = "submission.cu") -> list[Finding]:
    """Findings from one compute-sanitizer report, one per kind and line, with counts."""
    found: dict[tuple[str, int | None], Finding] = {}
    for block in _blocks(output):
        finding = _PARSERS[tool](block, filename)
        if finding is None:
            continue
        key = (finding.kind, finding.line)
        if key in found:
            found[key].count += 1
        else:
            found[key] = finding
    return list(found.values())
