"""What the pages and the API show of profiles: a submission's findings and ladder, a
student's history in a lab, two submissions side by side, and the class's common findings.

The findings and figures are made here from the stored summaries (graders.profile), so a
better sentence reaches old profiles too.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session, load_only

from app.courses.models import Course, Lab
from app.gradebook.lab_roster import lab_roster
from app.performance.peaks import peak_for
from app.performance.service import timed_results
from app.profiling.models import KernelProfile, ProfileState
from app.profiling.service import PENDING, kept_reference_profiles, latest_profile
from app.submissions.models import Submission
from app.submissions.schemas import hidden_details_visible
from graders.profile.findings import (
    PATTERN_KINDS,
    ProfileFinding,
    findings_of,
    with_estimate,
)
from graders.profile.ladder import FIGURES, figures_of, ladder, show

if TYPE_CHECKING:
    from graders.spec import LabSpec

STATE_WORDS = {
    ProfileState.queued.value: (
        "Nsight Compute profiles it after the gradings waiting now are done; this page shows "
        "the findings when it has."
    ),
    ProfileState.started.value: "Nsight Compute is profiling it now.",
}


@dataclass
class FindingView:
    kind: str
    title: str
    sentence: str  # with NVIDIA's estimate where there is one
    line: int | None
    kernel: str
    speedup: float | None
    speedup_type: str
    metrics: list[tuple[str, str]]  # ncu metric name, value as shown
    rule: str
    rule_message: str

    @classmethod
    def of(cls, f: ProfileFinding) -> FindingView:
        return cls(
            kind=f.kind,
            title=f.title,
            sentence=with_estimate(f),
            line=f.line,
            kernel=f.kernel,
            speedup=f.speedup,
            speedup_type=f.speedup_type,
            metrics=[(name, _metric(value)) for name, value in f.metrics.items()],
            rule=f.rule,
            rule_message=f.rule_message,
        )


def _metric(value: float) -> str:
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.1f}"


@dataclass
class LadderView:
    order: list[str]
    rows: list[dict[str, Any]]  # label, yours, references {name: text}, phrase
    resembles: str
    next_up: str
    sentence: str
    differences: list[str]
    gpu: str


@dataclass
class ProfileView:
    # "none" (never profiled), queued, started, done, unavailable, failed, or "withheld"
    # (the profiled case is hidden from students until the due date).
    state: str
    message: str = ""
    profile_id: int | None = None
    case: str = ""
    gpu_name: str = ""
    ncu_version: str = ""
    seconds: float | None = None
    finished_at: datetime | None = None
    findings: list[FindingView] = field(default_factory=list)
    lines: dict[int, list[str]] = field(default_factory=dict)  # line -> finding titles
    ladder: LadderView | None = None
    figures: dict[str, float] = field(default_factory=dict)
    download_url: str | None = None
    report_bytes: int = 0
    report_kept: bool = False
    # The lab changed since this profile (another content digest): staff may profile again.
    stale: bool = False
    can_request: bool = False

    @property
    def pending(self) -> bool:
        return self.state in PENDING


def may_download(spec: LabSpec, *, viewer_is_staff: bool) -> bool:
    return viewer_is_staff or spec.profile.report_download == "students"


def withheld_cases(
    session: Session, spec: LabSpec, *, lab: Lab, viewer_is_staff: bool
) -> frozenset[str]:
    """The lab's hidden cases whose details the viewer may not see yet (none for staff, or once
    the grades are released): a profile that ran on one of them is withheld wherever it would
    show (the submission's page, its history, a comparison, their APIs)."""
    hidden = frozenset(c.name for c in spec.cases if c.hidden)
    if not hidden:
        return hidden
    course = session.get_one(Course, lab.course_id)
    if hidden_details_visible(course, lab, viewer_is_staff=viewer_is_staff):
        return frozenset()
    return hidden


def ladder_view(
    session: Session, *, profile: KernelProfile, figures: dict[str, float]
) -> LadderView | None:
    kept = kept_reference_profiles(
        session, gpu=profile.gpu_name, digest=profile.lab_digest, case=profile.case_name
    )
    if not kept:
        return None
    refs = {name: figures_of(row.summary) for name, row in kept.items()}
    steps = ladder(figures, refs)
    rows = [
        {
            "label": row.label,
            "yours": show(row.key, row.yours),
            "references": {n: show(row.key, row.references.get(n)) for n in steps.order},
            "phrase": row.phrase(steps.order),
        }
        for row in steps.rows
    ]
    return LadderView(
        order=steps.order,
        rows=rows,
        resembles=steps.resembles,
        next_up=steps.next_up,
        sentence=steps.sentence,
        differences=steps.differences,
        gpu=profile.gpu_name,
    )


def profile_view(
    session: Session, *, submission: Submission, spec: LabSpec, viewer_is_staff: bool
) -> ProfileView:
    """The submission's latest profile as the viewer may see it."""
    lab = session.get_one(Lab, submission.lab_id)
    profile = latest_profile(session, submission_id=submission.id)
    can_request = viewer_is_staff and submission.compile_ok is not False
    if profile is None:
        view = ProfileView(state="none", can_request=can_request)
        if not spec.profile.enabled:
            view.message = "This lab does not profile its submissions."
        return view
    view = ProfileView(
        state=profile.state,
        profile_id=profile.id,
        case=profile.case_name,
        gpu_name=profile.gpu_name,
        ncu_version=profile.ncu_version,
        seconds=profile.seconds,
        finished_at=profile.finished_at,
        stale=bool(profile.lab_digest and profile.lab_digest != spec.digest),
        can_request=can_request and profile.state not in PENDING,
        report_bytes=profile.report_bytes,
        report_kept=profile.report_kept,
    )
    if profile.case_name in withheld_cases(session, spec, lab=lab, viewer_is_staff=viewer_is_staff):
        view.state = "withheld"
        view.message = (
            f"The profile ran on a hidden case ({profile.case_name} is hidden until the due "
            "date), so it is shown after the due date."
        )
        return view
    if profile.state in STATE_WORDS:
        view.message = STATE_WORDS[profile.state]
        return view
    if profile.state != ProfileState.done.value:
        view.message = profile.message or "The profile did not come."
        return view
    found = findings_of(profile.summary)
    view.findings = [FindingView.of(f) for f in found]
    for f in found:
        if f.line and f.kind != "throughput":
            titles = view.lines.setdefault(f.line, [])
            if f.title not in titles:
                titles.append(f.title)
    view.figures = figures_of(profile.summary)
    view.ladder = ladder_view(session, profile=profile, figures=view.figures)
    if profile.report_kept and may_download(spec, viewer_is_staff=viewer_is_staff):
        view.download_url = f"/api/v1/submissions/{submission.id}/profile.ncu-rep"
    return view


# --- history and comparison ------------------------------------------------------------------


@dataclass
class HistoryPoint:
    submission_id: int
    number: int  # 1 for the student's first submission to the lab
    created_at: datetime
    status: str
    score: float | None
    median_ms: float | None = None
    all_passed: bool = False
    ratios: dict[str, float] = field(default_factory=dict)  # reference -> your time / theirs
    peak_percent: float | None = None  # of the GPU's memory or arithmetic peak, the higher
    peak_kind: str = ""  # "memory" or "arithmetic"
    top_finding: str = ""  # the title of the profile's first access-pattern finding
    top_kind: str = ""
    # Its profile ran on a hidden case the viewer may not see yet: no finding is shown.
    profile_withheld: bool = False
    best_so_far: bool = False


def _top_finding(summary: dict[str, Any]) -> ProfileFinding | None:
    found = [f for f in findings_of(summary) if f.kind != "throughput"]
    return found[0] if found else None


def done_profiles(session: Session, submission_ids: Iterable[int]) -> dict[int, KernelProfile]:
    """Each submission's newest finished profile (done), by submission id."""
    ids = list(submission_ids)
    out: dict[int, KernelProfile] = {}
    for start in range(0, len(ids), 500):
        rows = session.scalars(
            select(KernelProfile)
            .where(
                KernelProfile.submission_id.in_(ids[start : start + 500]),
                KernelProfile.state == ProfileState.done.value,
            )
            .order_by(KernelProfile.id)
        )
        for row in rows:
            out[row.submission_id] = row  # the newest wins
    return out


def _peak(spec: LabSpec, sizes_of: dict[str, Any], gpu: str, median_ms: float) -> tuple[float, str]:
    peak = peak_for(gpu)
    if spec.work is None or peak is None or median_ms <= 0:
        return math.nan, ""
    flops, traffic = spec.work.for_case(sizes_of)
    seconds = median_ms * 1e-3
    outputs = [p for p in spec.params if p.is_output]
    dtype = outputs[0].dtype if outputs else "float32"
    arithmetic = flops / seconds / (peak.tflops(dtype) * 1e12) if flops else 0.0
    memory = traffic / seconds / (peak.bandwidth_gbs * 1e9) if traffic else 0.0
    return (100 * memory, "memory") if memory >= arithmetic else (100 * arithmetic, "arithmetic")


def history(
    session: Session, *, lab: Lab, spec: LabSpec, user_id: int, viewer_is_staff: bool
) -> list[HistoryPoint]:
    """Every submission of one student to one lab, oldest first, with its time, ratios to the
    references, percent of peak and top finding (withheld where the profile ran on a hidden
    case the viewer may not see yet); the best fully correct time so far marked."""
    subs = list(
        session.scalars(
            select(Submission)
            .options(
                load_only(
                    Submission.id,
                    Submission.created_at,
                    Submission.status,
                    Submission.score,
                    Submission.declarations,
                )
            )
            .where(Submission.lab_id == lab.id, Submission.user_id == user_id)
            .order_by(Submission.created_at, Submission.id)
        )
    )
    timed = {sid: t for sid, t in timed_results(session, lab=lab).items() if t.user_id == user_id}
    profiles = done_profiles(session, [s.id for s in subs])
    withheld = withheld_cases(session, spec, lab=lab, viewer_is_staff=viewer_is_staff)
    points = []
    best: float | None = None
    for number, sub in enumerate(subs, start=1):
        point = HistoryPoint(sub.id, number, sub.created_at, sub.status, sub.score)
        result = timed.get(sub.id)
        if result is not None:
            point.median_ms = result.median_ms
            point.all_passed = result.all_passed
            point.ratios = {
                name: result.median_ms / ms for name, ms in result.references.items() if ms > 0
            }
            try:
                names = spec.sizes_for(result.case, sub.declarations or {})
                percent, kind = _peak(spec, names, result.gpu, result.median_ms)
            except (KeyError, ValueError, ArithmeticError):
                percent, kind = math.nan, ""
            if math.isfinite(percent):
                point.peak_percent, point.peak_kind = percent, kind
            if result.all_passed and (best is None or result.median_ms < best):
                best = result.median_ms
                point.best_so_far = True
        profile = profiles.get(sub.id)
        if profile is not None and profile.case_name in withheld:
            point.profile_withheld = True
        elif profile is not None:
            top = _top_finding(profile.summary)
            if top is not None:
                point.top_kind, point.top_finding = top.group
        points.append(point)
    return points


@dataclass
class DiffLine:
    kind: str  # "same", "added", "removed", "hunk"
    text: str
    old: int | None = None
    new: int | None = None


@dataclass
class Comparison:
    a: Submission
    b: Submission
    diff: list[DiffLine]
    figures: list[dict[str, Any]]  # label, a, b, change ("better", "worse", "")
    only_a: list[FindingView]
    only_b: list[FindingView]
    both: list[str]  # titles found in both
    times: dict[str, float | None]  # "a", "b": median ms
    profiled: dict[str, bool]
    # "a", "b": profiled on a hidden case the viewer may not see yet (shown as not profiled).
    withheld: dict[str, bool] = field(default_factory=dict)


def source_diff(old: str, new: str, *, context: int = 3) -> list[DiffLine]:
    """A unified diff of two sources, each line with its numbers in the old and new file."""
    a, b = old.split("\n"), new.split("\n")
    out: list[DiffLine] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first = group[0]
        out.append(DiffLine("hunk", f"@@ line {first[1] + 1} → line {first[3] + 1} @@"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [DiffLine("same", a[i1 + k], i1 + k + 1, j1 + k + 1) for k in range(i2 - i1)]
                continue
            out += [DiffLine("removed", a[i], old=i + 1) for i in range(i1, i2)]
            out += [DiffLine("added", b[j], new=j + 1) for j in range(j1, j2)]
    return out


def compare(
    session: Session,
    *,
    a: Submission,
    b: Submission,
    a_source: str,
    b_source: str,
    spec: LabSpec,
    viewer_is_staff: bool,
) -> Comparison:
    """Two submissions of one student to one lab: source diff, figures, findings, times; a
    profile on a hidden case the viewer may not see yet counts as none."""
    lab = session.get_one(Lab, a.lab_id)
    profiles = done_profiles(session, [a.id, b.id])
    hidden = withheld_cases(session, spec, lab=lab, viewer_is_staff=viewer_is_staff)
    withheld = {
        side: sub.id in profiles and profiles[sub.id].case_name in hidden
        for side, sub in (("a", a), ("b", b))
    }
    pa = None if withheld["a"] else profiles.get(a.id)
    pb = None if withheld["b"] else profiles.get(b.id)
    fa = figures_of(pa.summary) if pa else {}
    fb = figures_of(pb.summary) if pb else {}
    rows = []
    for figure in FIGURES:
        if figure.key not in fa and figure.key not in fb:
            continue
        va, vb = fa.get(figure.key), fb.get(figure.key)
        change = ""
        if figure.better and va is not None and vb is not None:
            gap = abs(vb - va)
            if gap > figure.noise and gap > 0.05 * max(abs(va), abs(vb)):
                improved = vb > va if figure.better == "higher" else vb < va
                change = "better" if improved else "worse"
        rows.append(
            {
                "label": figure.label,
                "a": show(figure.key, va),
                "b": show(figure.key, vb),
                "change": change,
            }
        )
    found_a = [f for f in findings_of(pa.summary) if f.kind != "throughput"] if pa else []
    found_b = [f for f in findings_of(pb.summary) if f.kind != "throughput"] if pb else []
    kinds_a = {(f.group[0], f.kernel) for f in found_a}
    kinds_b = {(f.group[0], f.kernel) for f in found_b}
    timed = timed_results(session, lab=lab)
    return Comparison(
        a=a,
        b=b,
        diff=source_diff(a_source, b_source),
        figures=rows,
        only_a=[FindingView.of(f) for f in found_a if (f.group[0], f.kernel) not in kinds_b],
        only_b=[FindingView.of(f) for f in found_b if (f.group[0], f.kernel) not in kinds_a],
        both=sorted({f.group[1] for f in found_a if (f.group[0], f.kernel) in kinds_b}),
        times={
            "a": timed[a.id].median_ms if a.id in timed else None,
            "b": timed[b.id].median_ms if b.id in timed else None,
        },
        profiled={"a": pa is not None, "b": pb is not None},
        withheld=withheld,
    )


# --- the class -------------------------------------------------------------------------------


@dataclass
class CommonFinding:
    kind: str
    title: str
    students: int
    share: float  # of the students whose counted submission was profiled
    examples: list[tuple[int, int | None]]  # (submission id, line), a few


@dataclass
class ClassSummary:
    students: int  # enrolled
    counted: int  # with a counted submission
    profiled: int  # whose counted submission has a profile
    common: list[CommonFinding]


def class_summary(session: Session, *, lab: Lab, examples: int = 5) -> ClassSummary:
    """The findings most common across the class's counted submissions, with how many
    students each, linked to a few examples."""
    rows = lab_roster(session, lab=lab)
    counted = {r.student.id: r.counted.id for r in rows if r.counted is not None}
    profiles = done_profiles(session, counted.values())
    by_kind: dict[str, list[tuple[int, int | None]]] = {}
    titles: dict[str, str] = {}
    for sid in counted.values():
        profile = profiles.get(sid)
        if profile is None:
            continue
        seen: set[str] = set()
        for f in findings_of(profile.summary):
            key, title = f.group
            if f.kind == "throughput" or key in seen:
                continue
            seen.add(key)
            titles[key] = title
            by_kind.setdefault(key, []).append((sid, f.line))
    profiled = sum(1 for sid in counted.values() if sid in profiles)
    order = {kind: i for i, kind in enumerate(PATTERN_KINDS)}
    common = [
        CommonFinding(
            kind=key,
            title=titles[key],
            students=len(found),
            share=len(found) / profiled if profiled else 0.0,
            examples=found[:examples],
        )
        for key, found in by_kind.items()
    ]
    # The most students first; at a tie, access patterns (what a lab teaches) first.
    common.sort(key=lambda c: (-c.students, order.get(c.kind, len(order)), c.kind))
    return ClassSummary(students=len(rows), counted=len(counted), profiled=profiled, common=common)
