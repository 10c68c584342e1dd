"""The part of `lab check` that runs kernels: references pass, faulty kernels get their verdicts.

It grades through today's `graders.grade.run_submission` exactly as a submission is graded
(correctness only: no timing). What the run stage cannot run yet is listed by
`run_stage_gaps`; phase 2 of issue 12 removes each entry as the run stage learns it.
"""

from __future__ import annotations

from graders.labcheck.faults import FaultExpectation, Outcome, run_problem
from graders.labcheck.report import FAIL, OK, SKIP, LabCheckReport
from graders.results import CompileResult, GradeReport
from graders.spec import LabSpec

# Dtypes the run stage cannot generate, pass or compare yet.
NEW_DTYPES = frozenset({"uint8", "float16", "bfloat16", "uint64"})


def run_stage_gaps(lab: LabSpec) -> list[str]:
    """What this lab uses that graders/run/ cannot run yet (empty: it can run the lab)."""
    gaps = []
    if lab.python_oracle is not None:
        gaps.append('a Python oracle (oracle = "python")')
    if len(lab.kernels) > 1:
        gaps.append(f"{len(lab.kernels)} kernels")
    dtypes = sorted({p.dtype for p in lab.params} & NEW_DTYPES)
    if dtypes:
        gaps.append(f"{', '.join(dtypes)} data")
    if any(p.init is not None and p.init.dist == "normal" for p in lab.params):
        gaps.append("the normal distribution")
    if any(case.inputs for case in lab.cases):
        gaps.append("hand-written inputs")
    if any(p.is_output and (p.properties or p.check == "none") for p in lab.params):
        gaps.append("property or Python checks on outputs")
    return gaps


def _failed_cases(report: GradeReport) -> list[str]:
    return [f"{c.name}: {c.verdict}: {c.message}" for c in report.cases if not c.passed]


def run_on_gpu(
    lab: LabSpec,
    references: dict[str, CompileResult],
    faulty: list[tuple[FaultExpectation, CompileResult]],
    report: LabCheckReport,
    *,
    secret: str,
) -> None:
    from graders.gpu import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason:
        report.add(SKIP, "GPU", f"kernels were not run: {reason}")
        return
    gaps = run_stage_gaps(lab)
    if gaps:
        report.add(
            SKIP,
            "GPU",
            f"kernels were not run: the run stage cannot run {', '.join(gaps)} yet (phase 2 of "
            "issue 12)",
        )
        return
    from graders.grade import run_submission

    for name, compiled in references.items():
        ref = lab.reference(name)
        subject = f"run reference {ref.file}"
        graded = run_submission(
            lab, ref.source, compiled=compiled, secret=secret, sanitizer=False, timing=False
        )
        failed = _failed_cases(graded)
        if graded.error or failed:
            detail = "; ".join(failed) or graded.summary
            report.add(FAIL, subject, f"a reference must pass every case: {detail}")
        else:
            report.add(OK, subject, f"passes all {len(graded.cases)} cases")
    for exp, compiled in faulty:
        source = exp.path.read_text(encoding="utf-8")
        graded = run_submission(
            lab, source, compiled=compiled, secret=secret, sanitizer=exp.needs_sanitizer,
            timing=False,
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
