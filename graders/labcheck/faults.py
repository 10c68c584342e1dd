"""Known-faulty kernels: the verdict each expects, from its header, and whether it got it.

A lab's `faulty/` folder holds kernels with a known mistake. Each starts with `// key: value`
lines (the format the repository's own faulty kernels use):

    // expect-verdict: wrong_answer          a case verdict (also the sanitizer's: data_race,
                                             memory_error, divergent_barrier), or the compile
                                             stage's reason
    // expect-fail-case: n-1048579           optional: the case that must fail that way
    // expect-pass-case: n-1000              optional: a case that must still pass
    // expect-finding: shared_memory_race    optional: a sanitizer or static finding
    // expect-message: never written         optional: text the verdict's message contains
    // why: Each thread adds only ...        required: the mistake, in a sentence
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from graders.sanitizer.verdicts import verdict_of_finding

HEADER_LINE = re.compile(r"^//\s*(?P<key>[a-z-]+):\s*(?P<value>.+?)\s*$")
HEADER_KEYS = (
    "expect-verdict", "expect-fail-case", "expect-pass-case", "expect-finding", "expect-message",
    "why",
)  # fmt: skip
# The verdicts compute-sanitizer gives the lab's sanitizer case (graders.sanitizer.verdicts).
SANITIZER_VERDICTS = ("data_race", "memory_error", "divergent_barrier")
CASE_VERDICTS = (
    "wrong_answer", "no_output", "out_of_bounds_write", "input_modified", "timeout",
    "output_limit", "kernel_error", "launch_error", *SANITIZER_VERDICTS,
)  # fmt: skip
# CompileResult.reason values a faulty kernel may expect (it then runs no case).
COMPILE_VERDICTS = (
    "compile_error", "missing_kernel", "wrong_signature", "bad_declaration",
    "missing_requirement", "forbidden_include",
)  # fmt: skip
SANITIZER_FINDINGS = ("out_of_bounds", "shared_memory_race", "divergent_barrier")


class FaultHeaderError(ValueError):
    """A faulty kernel's header that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class FaultExpectation:
    path: Path
    verdict: str
    fail_case: str | None = None
    pass_case: str | None = None
    finding: str | None = None
    message: str | None = None
    why: str = ""

    @property
    def label(self) -> str:
        return f"faulty/{self.path.name}"

    @property
    def compile_stage(self) -> bool:
        return self.verdict in COMPILE_VERDICTS

    @property
    def needs_sanitizer(self) -> bool:
        return self.finding is not None or self.verdict in SANITIZER_VERDICTS

    def describe(self) -> str:
        where = f" on case {self.fail_case}" if self.fail_case else ""
        found = f", with the finding {self.finding}" if self.finding else ""
        return f"{self.verdict}{where}{found}"


def read_fault_header(path: Path, case_names: set[str], *, sanitizer: bool) -> FaultExpectation:
    """The header of a faulty kernel, checked against the lab's cases; FaultHeaderError if off."""
    label = f"faulty/{path.name}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FaultHeaderError(f"{label}: cannot be read as UTF-8 text ({exc}).") from exc
    fields: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = HEADER_LINE.match(line)
        if not match:
            break
        key = match["key"]
        if key not in HEADER_KEYS:
            raise FaultHeaderError(
                f"{label} line {number}: unknown header key {key!r} (the keys are "
                f"{', '.join(HEADER_KEYS)})."
            )
        if key in fields:
            raise FaultHeaderError(f"{label} line {number}: {key!r} appears twice.")
        fields[key] = match["value"]
    for key in ("expect-verdict", "why"):
        if key not in fields:
            raise FaultHeaderError(
                f"{label}: the header (the `// key: value` lines at the top) has no {key} line; "
                "every faulty kernel says what verdict it expects and why."
            )
    verdict = fields["expect-verdict"]
    if verdict not in CASE_VERDICTS + COMPILE_VERDICTS:
        hint = " (a faulty kernel must fail somewhere)" if verdict == "pass" else ""
        raise FaultHeaderError(
            f"{label}: expect-verdict {verdict!r} is not a verdict{hint}; use one of "
            f"{', '.join(CASE_VERDICTS + COMPILE_VERDICTS)}."
        )
    for key in ("expect-fail-case", "expect-pass-case"):
        if key in fields and fields[key] not in case_names:
            raise FaultHeaderError(f"{label}: {key} {fields[key]!r} is not a case of the lab.")
    if verdict in COMPILE_VERDICTS and "expect-fail-case" in fields:
        raise FaultHeaderError(
            f"{label}: {verdict} stops at the compile stage, so no case runs; drop "
            "expect-fail-case."
        )
    if verdict in SANITIZER_VERDICTS and not sanitizer:
        raise FaultHeaderError(
            f"{label}: {verdict} is compute-sanitizer's verdict, which this lab does not run "
            "(set lab.sanitizer = true)."
        )
    finding = fields.get("expect-finding")
    if finding is not None:
        if finding not in SANITIZER_FINDINGS:
            kinds = ", ".join(SANITIZER_FINDINGS)
            raise FaultHeaderError(f"{label}: expect-finding {finding!r} is not one of {kinds}.")
        if finding != "divergent_barrier" and not sanitizer:
            raise FaultHeaderError(
                f"{label}: expect-finding {finding} needs compute-sanitizer, which this lab does "
                "not run (set lab.sanitizer = true)."
            )
    return FaultExpectation(
        path=path,
        verdict=verdict,
        fail_case=fields.get("expect-fail-case"),
        pass_case=fields.get("expect-pass-case"),
        finding=finding,
        message=fields.get("expect-message"),
        why=fields["why"],
    )


def faulty_files(folder: Path) -> list[Path]:
    faulty = folder / "faulty"
    return sorted(faulty.glob("*.cu")) if faulty.is_dir() else []


@dataclass(frozen=True)
class Outcome:
    """What a faulty kernel got, in the terms its header speaks (graders.results, flattened)."""

    compile_reason: str  # "" when it compiled
    compile_text: str  # the compile stage's message and log
    warnings: tuple[str, ...] = ()
    cases: tuple[tuple[str, bool, str, str], ...] = ()  # (name, passed, verdict, message)
    findings: tuple[str, ...] = ()  # kinds
    summary: str = ""


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "(no message)"


def compile_problem(exp: FaultExpectation, outcome: Outcome) -> str | None:
    """Why the compile stage did not do what the header expects, or None when it did."""
    if exp.compile_stage:
        if not outcome.compile_reason:
            return (
                f"it compiled, but its header expects the compile stage to stop with {exp.verdict}"
            )
        if outcome.compile_reason != exp.verdict:
            return (
                f"the compile stage stopped with {outcome.compile_reason}, not {exp.verdict}: "
                f"{_first_line(outcome.compile_text)}"
            )
        if exp.message and exp.message not in outcome.compile_text:
            return f"the compile stage's message does not contain {exp.message!r}"
        return None
    if outcome.compile_reason:
        return (
            f"it must compile (its header expects {exp.verdict} when run), but the compile stage "
            f"stopped with {outcome.compile_reason}: {_first_line(outcome.compile_text)}"
        )
    if exp.finding == "divergent_barrier" and not any(
        "__syncthreads()" in w for w in outcome.warnings
    ):
        return "its header expects the barrier warning, which the compile stage did not give"
    return None


def run_problem(exp: FaultExpectation, outcome: Outcome) -> str | None:
    """Why running did not give what the header expects, or None when it did."""
    by_name = {name: (passed, verdict, message) for name, passed, verdict, message in outcome.cases}
    failing = [(n, v, m) for n, p, v, m in outcome.cases if not p]
    # A race may or may not corrupt a given run; its finding is what must show every time.
    if not failing and not (exp.finding and exp.fail_case is None):
        return (
            f"every case passed; its header expects {exp.describe()}, so the lab does not catch it"
        )
    if exp.fail_case:
        passed, verdict, message = by_name[exp.fail_case]
        if passed:
            return f"case {exp.fail_case} passed; its header expects {exp.verdict} there"
        if verdict != exp.verdict:
            return f"case {exp.fail_case} got {verdict}, not {exp.verdict}: {message}"
    elif exp.finding:
        # The sanitizer's case fails with the finding's own verdict (a race: data_race).
        allowed = {exp.verdict, verdict_of_finding(exp.finding)}
        others = [f"{n}: {v}" for n, v, _ in failing if v not in allowed]
        if others:
            return f"cases failed otherwise than with {exp.verdict} ({'; '.join(others)})"
    elif not any(v == exp.verdict for _, v, _ in failing):
        got = ", ".join(sorted({v for _, v, _ in failing}))
        return f"no case got {exp.verdict} (the failing cases got {got})"
    if exp.pass_case and not by_name[exp.pass_case][0]:
        _, verdict, message = by_name[exp.pass_case]
        return f"case {exp.pass_case} must pass but got {verdict}: {message}"
    if exp.message:
        texts = [m for _, _, m in failing] + [outcome.summary]
        if not any(exp.message in t for t in texts):
            return f"no failing case's message contains {exp.message!r}"
    if exp.finding and exp.finding not in outcome.findings:
        found = ", ".join(outcome.findings) or "none"
        return f"the finding {exp.finding} was not reported (found: {found})"
    return None
