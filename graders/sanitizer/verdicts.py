"""What the sanitizer's findings do to the grade: a verdict on its case, or points off.

- A hang or a crash under the sanitizer is a verdict on the sanitizer's case; so is printing
  more than the tools read (graders.sanitizer.child.PRINT_KILL_BYTES), which stops them.
- A memcheck error (an access outside every array, a misaligned access) fails that case.
- A racecheck or synccheck hazard fails that case too, unless the lab sets
  `sanitizer_hazard_points`: then the hazards cost that many points instead (once).

Pure Python: tested without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graders.results import CaseResult, Finding

MEMORY_KINDS = ("out_of_bounds", "misaligned_address")
HAZARD_VERDICTS = {"shared_memory_race": "data_race", "divergent_barrier": "divergent_barrier"}


def verdict_of_finding(kind: str) -> str | None:
    """The verdict the sanitizer's case gets for a finding of this kind (before lab pricing)."""
    return "memory_error" if kind in MEMORY_KINDS else HAZARD_VERDICTS.get(kind)


@dataclass
class Ruling:
    """How the sanitizer's run changes its case and the score."""

    verdict: str = ""  # "" when the case keeps its own verdict
    message: str = ""
    penalty: float = 0.0


def policy_sentence(case: str, hazard_points: float | None) -> str:
    """The rule as the lab page states it."""
    hazards = (
        "a race or barrier error fails that case too"
        if hazard_points is None
        else f"a race or barrier error costs {hazard_points:g} points"
    )
    return (
        f"compute-sanitizer runs on case {case}: a hang, a crash or a memory error there fails "
        f"that case; {hazards}."
    )


def rule(
    findings: list[Finding],
    tools: dict[str, Any],
    *,
    hazard_points: float | None,
    timeout_s: float,
) -> Ruling:
    """The ruling for one sanitizer run from its findings and how each tool ended."""
    # The tool ran out of time, or the target's own wait for the launch gave up first.
    hung = [t.get("target", {}).get("verdict") == "timeout" for t in tools.values()]
    if any(t.get("status") == "timeout" for t in tools.values()) or any(hung):
        return Ruling(
            "timeout",
            f"Under compute-sanitizer the kernel did not finish within {timeout_s:g} s: it hung "
            "there (a __syncthreads() that some threads never reach, or a loop that waits for "
            "other blocks or for a time, can cause this). A kernel must finish however it is run.",
        )
    if any(t.get("status") == "printing" for t in tools.values()):
        printed = max(int(t.get("output_bytes") or 0) for t in tools.values())
        return Ruling(
            "output_limit",
            f"Under compute-sanitizer the kernel printed more than {printed >> 20} MiB and was "
            "stopped: printing is slow under the tools, and a grading may print only a few "
            "MiB. Print from a few threads only, or not at all.",
        )
    memory = [f for f in findings if f.tool == "memcheck" and f.kind in MEMORY_KINDS]
    if memory:
        first = memory[0]
        more = len(memory) - 1
        extra = f" ({more} more like it)" if more > 0 else ""
        return Ruling("memory_error", f"compute-sanitizer's memcheck: {first.message}{extra}")
    crashed = [
        t["target"]
        for t in tools.values()
        if t.get("target", {}).get("verdict") not in (None, "ok")
    ]
    crashed += [{} for t in tools.values() if t.get("status") == "crashed"]
    if crashed:
        detail = next((c.get("message") for c in crashed if c.get("message")), "")
        return Ruling(
            "kernel_error",
            "Under compute-sanitizer the kernel crashed"
            + (f": {detail}" if detail else " the program that ran it.")
            + ("" if detail.endswith(".") or not detail else "."),
        )
    hazards = [f for f in findings if f.kind in HAZARD_VERDICTS]
    if not hazards:
        return Ruling()
    first = hazards[0]
    if hazard_points is None:
        said = f"compute-sanitizer's {first.tool}: {first.message}"
        return Ruling(HAZARD_VERDICTS[first.kind], said)
    return Ruling(penalty=float(hazard_points))


def apply(case: CaseResult, ruling: Ruling) -> None:
    """Fail the case with the ruling's verdict (its own evidence stays for the student)."""
    if not ruling.verdict:
        return
    case.passed = False
    case.points = 0.0
    case.verdict = ruling.verdict
    case.message = ruling.message
