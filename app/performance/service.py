"""Timed results of a lab's submissions, and what they mean on the GPU they ran on."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.courses.models import Enrollment, Lab, Role
from app.performance.peaks import GpuPeak, peak_for
from app.submissions.models import CaseResult, GradingJob, JobState, Submission
from app.submissions.report import StoredReport

if TYPE_CHECKING:
    from app.submissions.schemas import SubmissionRead
    from graders.spec import LabSpec


@dataclass(frozen=True)
class TimedResult:
    """The timed case of one submission's current verdict."""

    submission_id: int
    user_id: int
    gpu: str
    case: str
    median_ms: float
    all_passed: bool
    references: dict[str, float]

    @property
    def gpu_model(self) -> str:
        """The GPU's model as the peak table names it (the raw name where unknown)."""
        peak = peak_for(self.gpu)
        return peak.model if peak else self.gpu or "unknown GPU"


def _result_jobs(session: Session, *, lab: Lab) -> dict[int, tuple[int, int, str]]:
    """submission id -> (job id, user id, state) of the job whose verdict it shows (see
    app.submissions.schemas.result_job), for every submission of the lab."""
    verdict = or_(
        GradingJob.state == JobState.done.value,
        (GradingJob.state == JobState.failed.value)
        & (GradingJob.error == "")
        & GradingJob.compiled_at.is_not(None),
    )
    rows = session.execute(
        select(
            GradingJob.id,
            GradingJob.submission_id,
            GradingJob.state,
            GradingJob.finished_at,
            Submission.user_id,
        )
        .join(Submission, Submission.id == GradingJob.submission_id)
        .where(Submission.lab_id == lab.id, verdict)
    ).all()
    newest: dict[int, tuple[Any, int, int, str]] = {}
    for job_id, sub_id, state, finished_at, user_id in rows:
        key = (finished_at.timestamp() if finished_at else 0.0, job_id)
        if sub_id not in newest or key > newest[sub_id][0]:
            newest[sub_id] = (key, job_id, user_id, state)
    return {sid: (job_id, uid, state) for sid, (_, job_id, uid, state) in newest.items()}


def timed_results(session: Session, *, lab: Lab) -> dict[int, TimedResult]:
    """submission id -> its timed case, for every submission of the lab whose current verdict
    includes one (a GPU graded it with timing)."""
    jobs = {
        sid: (job_id, uid)
        for sid, (job_id, uid, state) in _result_jobs(session, lab=lab).items()
        if state == JobState.done.value
    }
    if not jobs:
        return {}
    by_job = {job_id: sid for sid, (job_id, _) in jobs.items()}
    failed: set[int] = set()
    timed: dict[int, tuple[str, dict[str, Any], dict[str, Any]]] = {}
    ids = list(by_job)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for job_id, name, passed, timing, refs in session.execute(
            select(
                CaseResult.job_id,
                CaseResult.name,
                CaseResult.passed,
                CaseResult.timing,
                CaseResult.reference_timings,
            ).where(CaseResult.job_id.in_(chunk))
        ):
            if not passed:
                failed.add(job_id)
            if timing and timing.get("median_ms"):
                timed[job_id] = (name, timing, refs or {})
    gpus: dict[int, str] = {}
    timed_ids = list(timed)
    for start in range(0, len(timed_ids), 500):
        for job_id, report in session.execute(
            select(GradingJob.id, GradingJob.report).where(
                GradingJob.id.in_(timed_ids[start : start + 500])
            )
        ):
            gpus[job_id] = StoredReport.read(report).gpu_name
    out = {}
    for job_id, (name, timing, refs) in timed.items():
        sid = by_job[job_id]
        out[sid] = TimedResult(
            submission_id=sid,
            user_id=jobs[sid][1],
            gpu=gpus.get(job_id, ""),
            case=name,
            median_ms=float(timing["median_ms"]),
            all_passed=job_id not in failed,
            references={
                k: float(v["median_ms"]) for k, v in refs.items() if v and v.get("median_ms")
            },
        )
    return out


def best_times_by_student(
    results: dict[int, TimedResult], *, student_ids: set[int], gpu_model: str
) -> dict[int, TimedResult]:
    """Each student's fastest fully correct timed submission on one GPU model."""
    best: dict[int, TimedResult] = {}
    for result in results.values():
        if result.user_id not in student_ids or not result.all_passed:
            continue
        if result.gpu_model != gpu_model:
            continue
        held = best.get(result.user_id)
        if held is None or result.median_ms < held.median_ms:
            best[result.user_id] = result
    return best


def student_ids_of(session: Session, *, lab: Lab) -> set[int]:
    return set(
        session.scalars(
            select(Enrollment.user_id).where(
                Enrollment.course_id == lab.course_id, Enrollment.role == Role.student.value
            )
        )
    )


@dataclass
class Performance:
    """What the submission page draws for the timed case."""

    case: str
    sizes: dict[str, int | float]
    median_ms: float
    gpu_name: str
    gpu_model: str
    peak: GpuPeak | None
    dtype: str
    flops: float | None = None
    traffic_bytes: float | None = None
    references: list[tuple[str, float]] = field(default_factory=list)
    # The other students' best fully correct times on the same GPU model.
    class_times_ms: list[float] = field(default_factory=list)
    all_passed: bool = False

    @property
    def gflops(self) -> float | None:
        return None if self.flops is None else self.flops / (self.median_ms * 1e-3) / 1e9

    @property
    def gbs(self) -> float | None:
        if self.traffic_bytes is None:
            return None
        return self.traffic_bytes / (self.median_ms * 1e-3) / 1e9

    @property
    def flops_fraction(self) -> float | None:
        if self.gflops is None or self.peak is None:
            return None
        return self.gflops / (self.peak.tflops(self.dtype) * 1e3)

    @property
    def bandwidth_fraction(self) -> float | None:
        if self.gbs is None or self.peak is None:
            return None
        return self.gbs / self.peak.bandwidth_gbs

    @property
    def faster_than(self) -> int:
        """How many classmates' best times this one beats."""
        return sum(1 for t in self.class_times_ms if self.median_ms < t)


def submission_performance(
    session: Session, *, submission: Submission, view: SubmissionRead, spec: LabSpec
) -> Performance | None:
    """The timed case as the viewer may see it (hidden details stay hidden), with FLOP/s and
    GB/s from the lab's [work], the references' times and the class's best times."""
    timed = next((c for c in view.cases if c.timings and c.timings.get("kernel") and c.sizes), None)
    if timed is None or timed.timings is None or timed.sizes is None:
        return None
    kernel = timed.timings["kernel"]
    median = float(kernel.get("median_ms") or 0.0)
    if not median or not math.isfinite(median):
        return None
    gpu_name = str((view.gpu or {}).get("name") or "")
    peak = peak_for(gpu_name)
    outputs = [p for p in spec.params if p.is_output]
    perf = Performance(
        case=timed.name,
        sizes=dict(timed.sizes),
        median_ms=median,
        gpu_name=gpu_name,
        gpu_model=peak.model if peak else gpu_name or "unknown GPU",
        peak=peak,
        dtype=outputs[0].dtype if outputs else "float32",
        references=sorted(
            (
                (name, float(t["median_ms"]))
                for name, t in (timed.timings.get("references") or {}).items()
                if t and t.get("median_ms")
            ),
            key=lambda item: item[1],
        ),
        all_passed=all(c.passed for c in view.cases),
    )
    if spec.work is not None:
        try:
            names = spec.sizes_for(timed.name, submission.declarations or {})
            flops, perf.traffic_bytes = spec.work.for_case(names)
            perf.flops = flops or None  # a copy (a transpose) has no arithmetic to rate
        except (KeyError, ValueError, ArithmeticError):
            pass  # the spec changed since this grading; show times only
    lab = session.get_one(Lab, submission.lab_id)
    best = best_times_by_student(
        timed_results(session, lab=lab),
        student_ids=student_ids_of(session, lab=lab) - {submission.user_id},
        gpu_model=perf.gpu_model,
    )
    perf.class_times_ms = sorted(r.median_ms for r in best.values())
    return perf
