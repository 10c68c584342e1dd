"""The part of `lab check` that runs kernels: references pass, faulty kernels get their
verdicts, shortcut probes fail.

It grades through `graders.grade.run_submission` exactly as a submission is graded
(correctness only: no timing); the sanitizer runs for a faulty kernel whose header expects a
finding or the sanitizer's verdict. The tile forms (graders.labcheck.tile_forms) must pass
every case, as the references do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graders.config import DEFAULTS, EngineSettings
from graders.labcheck.faults import FaultExpectation, Outcome, run_problem
from graders.labcheck.probes import CaseOutcome, Probe, judge_probe
from graders.labcheck.report import FAIL, OK, SKIP, LabCheckReport
from graders.labcheck.slow import SlowExpectation, ladder_problem, profile_problem
from graders.labcheck.tile_forms import TileForm
from graders.results import CompileResult, GradeReport
from graders.spec import LabSpec

if TYPE_CHECKING:
    from graders.profile.stage import ProfileRun


def _failed_cases(report: GradeReport) -> list[str]:
    return [f"{c.name}: {c.verdict}: {c.message}" for c in report.cases if not c.passed]


def run_on_gpu(
    lab: LabSpec,
    references: dict[str, CompileResult],
    faulty: list[tuple[FaultExpectation, CompileResult]],
    report: LabCheckReport,
    *,
    secret: str,
    probes: list[tuple[Probe, CompileResult]] | None = None,
    forms: list[tuple[TileForm, CompileResult]] | None = None,
    engine: EngineSettings = DEFAULTS,
) -> None:
    from graders.gpu import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason:
        report.add(SKIP, "GPU", f"kernels were not run: {reason}")
        return
    from graders.grade import run_submission

    passing = [
        (f"run reference {lab.reference(name).file}", lab.reference(name).source, compiled,
         "a reference must pass every case")
        for name, compiled in references.items()
    ] + [
        (f"run {form.label}", form.source, compiled,
         f"{form.origin} written this way must pass every case, as it does as written")
        for form, compiled in forms or []
    ]  # fmt: skip
    for subject, source, compiled, rule in passing:
        graded = run_submission(
            lab,
            source,
            compiled=compiled,
            secret=secret,
            sanitizer=False,
            timing=False,
            engine=engine,
        )
        failed = _failed_cases(graded)
        if graded.error or failed:
            detail = "; ".join(failed) or graded.summary
            report.add(FAIL, subject, f"{rule}: {detail}")
        else:
            report.add(OK, subject, f"passes all {len(graded.cases)} cases")
    for exp, compiled in faulty:
        source = exp.path.read_text(encoding="utf-8")
        graded = run_submission(
            lab, source, compiled=compiled, secret=secret, sanitizer=exp.needs_sanitizer,
            timing=False, engine=engine,
        )  # fmt: skip
        subject = f"run {exp.label}"
        if graded.error in ("internal", "gpu_unhealthy", "no_gpu"):
            report.add(FAIL, subject, f"the grader could not run it: {graded.summary}")
            continue
        outcome = Outcome(
            compile_reason="",
            compile_text="",
            warnings=tuple(compiled.warnings),
            cases=tuple((c.name, c.passed, c.verdict, c.message) for c in graded.cases),
            findings=tuple(f.kind for f in graded.findings),
            summary=graded.summary,
        )
        problem = run_problem(exp, outcome)
        if problem:
            report.add(FAIL, subject, f"{problem}. Its header says: {exp.why}")
        else:
            report.add(OK, subject, f"got {exp.describe()}, as its header expects")
    for probe, compiled in probes or []:
        graded = run_submission(
            lab,
            probe.source,
            compiled=compiled,
            secret=secret,
            sanitizer=False,
            timing=False,
            engine=engine,
        )
        if graded.error in ("internal", "gpu_unhealthy", "no_gpu"):
            report.add(FAIL, probe.label, f"the grader could not run it: {graded.summary}")
            continue
        outcomes = [CaseOutcome(c.name, c.passed, c.verdict, c.message) for c in graded.cases]
        status, message = judge_probe(lab, probe, outcomes)
        report.add(status, probe.label, message)


# A reference that the profile of an earlier one stopped before it was reached.
NOT_REACHED = "it was not profiled (the profile of the references before it stopped the rest)"


def _with_tool_said(message: str, run: ProfileRun | None) -> str:
    """A profile's failure, with what ncu itself said (a check is read by staff)."""
    said = run.tool_said() if run is not None else ""
    return f"{message} ncu said: {said}" if said else message


def profile_on_gpu(
    lab: LabSpec,
    slow: list[tuple[SlowExpectation, CompileResult]],
    report: LabCheckReport,
    *,
    secret: str,
    arch: str | None = None,
    engine: EngineSettings = DEFAULTS,
) -> None:
    """Slow kernels pass every case and show their finding on their line; the references
    show the findings the ladder expects and no other (graders.labcheck.slow)."""
    from graders.gpu import gpu_unavailable_reason

    if gpu_unavailable_reason() or not lab.profile.enabled:
        return
    from graders.grade import run_submission
    from graders.profile import tool
    from graders.profile.findings import PATTERN_KINDS, findings_of
    from graders.profile.stage import profile_submission
    from graders.run.inputs import case_seed

    reason = tool.unavailable_reason()
    if reason:
        report.add(SKIP, "profile", f"kernels were not profiled: {reason}")
        return
    case = lab.profile_case
    seed = case_seed(lab.id, case.name, hidden=case.hidden, secret=secret)
    references = [r.name for r in lab.references if r.file]
    if references:
        first = lab.reference(references[0])
        # Compiled as references are, without the lab's `requires` (a naive baseline has none).
        result = profile_submission(
            lab.for_references(), first.source, seed=seed, filename=first.file or "reference.cu",
            arch=arch, references=references[1:],
        )  # fmt: skip
        if result.status != "ok" or result.submission is None:
            why = _with_tool_said(result.message, result.submission)
            report.add(FAIL, "profile references", f"they could not be profiled: {why}")
        else:
            runs = {references[0]: result.submission, **result.references}
            for name in references:
                subject = f"profile reference {lab.reference(name).file}"
                run = runs.get(name)
                if run is None or not run.ok:
                    why = NOT_REACHED if run is None else _with_tool_said(run.message, run)
                    report.add(FAIL, subject, f"it could not be profiled: {why}")
                    continue
                kinds = sorted(
                    {f.kind for f in findings_of(run.summary) if f.kind in PATTERN_KINDS}
                )
                problem = ladder_problem(lab.profile.expect.get(name, ()), kinds)
                if problem:
                    report.add(FAIL, subject, f"the profile {problem}")
                else:
                    shown = ", ".join(kinds) or "no access-pattern finding"
                    report.add(OK, subject, f"shows {shown}, as the lab's ladder expects")
    for exp, compiled in slow:
        source = exp.path.read_text(encoding="utf-8")
        graded = run_submission(
            lab,
            source,
            compiled=compiled,
            secret=secret,
            sanitizer=False,
            timing=False,
            engine=engine,
        )
        failed = _failed_cases(graded)
        if graded.error or failed:
            detail = "; ".join(failed) or graded.summary
            report.add(FAIL, exp.label, f"a slow kernel must pass every case: {detail}")
            continue
        result = profile_submission(lab, source, seed=seed, filename=exp.path.name, arch=arch)
        subject = f"profile {exp.label}"
        if result.status != "ok" or result.submission is None:
            why = _with_tool_said(result.message, result.submission)
            report.add(FAIL, subject, f"it could not be profiled: {why}")
            continue
        found = [(f.kind, f.line) for f in findings_of(result.submission.summary)]
        problem = profile_problem(exp, found)
        if problem:
            report.add(FAIL, subject, f"{problem}. Its header says: {exp.why}")
        else:
            report.add(OK, subject, f"passes every case; the profiler finds {exp.describe()}")
