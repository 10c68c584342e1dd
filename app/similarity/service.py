"""Similarity reports: the staff ask for one (the web request only writes a queued row, and
`similarity.compute(report_id)` is sent once it commits), a worker computes it
(app.similarity.compute), and the staff read its most similar pairs side by side. Students
never reach any of it: every read here checks the course's staff first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import as_dict
from app.core.errors import Conflict, NotFound
from app.courses.models import Course, Lab
from app.courses.service import require_staff
from app.jobs.celery_app import QUEUE, SIMILARITY_TASK
from app.jobs.send import Send
from app.jobs.sender import send_after_commit
from app.similarity.models import (
    REPORTS,
    ReferenceCopy,
    ReportState,
    SimilarityPair,
    SimilarityReport,
)
from app.similarity.offerings import earlier_course_ids
from app.submissions.models import Submission
from app.users.models import User


@dataclass(frozen=True)
class Passage:
    """A stretch of one side's source: shared with the other side or not."""

    text: str
    shared: bool


# What a report shows in place of a submission of a course it may not read (one that is no
# longer, or never was, linked as an earlier offering of the report's course).
WITHHELD_LABEL = "a submission of another course (not linked to this one)"


@dataclass(frozen=True)
class ShownPair:
    """A pair as its report's readers may see it: a side from a course that is not the
    report's, nor linked to it as an earlier offering, shows neither its label nor its source."""

    pair: SimilarityPair
    a_label: str
    b_label: str
    a_withheld: bool = False
    b_withheld: bool = False


@dataclass(frozen=True)
class PairView:
    shown: ShownPair
    a_passages: list[Passage]
    b_passages: list[Passage]
    a_lab: str
    b_lab: str

    @property
    def pair(self) -> SimilarityPair:
        return self.shown.pair


def request_report(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    user: User | None,
    include_past: bool,
    now: datetime,
) -> SimilarityReport:
    """Queue a report of the lab, sent to a worker once the caller commits."""
    if user is not None:
        require_staff(session, user=user, course=course)
    busy = session.scalar(
        select(SimilarityReport.id).where(
            SimilarityReport.lab_id == lab.id,
            SimilarityReport.state.in_([ReportState.queued.value, ReportState.running.value]),
        )
    )
    if busy is not None:
        raise Conflict(
            f"Report {busy} of {lab.slug} is still being computed; wait for it before asking "
            "for another."
        )
    report = SimilarityReport(
        lab_id=lab.id,
        requested_by_id=user.id if user else None,
        include_past=include_past,
        created_at=now,
        sent_at=now,
    )
    session.add(report)
    session.flush()
    send_after_commit(session, report_message(report))
    return report


def report_message(report: SimilarityReport) -> Send:
    """A stamped report's message, for the main queue (any worker computes it)."""
    assert report.sent_at is not None, "stamp the report before sending it"
    return Send(
        task=SIMILARITY_TASK,
        args=(report.id,),
        queue=QUEUE,
        stamped_at=report.sent_at,
        lease=REPORTS,
        job_id=report.id,
    )


def reports_of(session: Session, *, lab: Lab) -> list[SimilarityReport]:
    return list(
        session.scalars(
            select(SimilarityReport)
            .where(SimilarityReport.lab_id == lab.id)
            .order_by(SimilarityReport.id.desc())
        )
    )


def get_report(session: Session, *, user: User, report_id: int) -> tuple[SimilarityReport, Lab]:
    report = session.get(SimilarityReport, report_id)
    if report is None:
        raise NotFound(f"There is no similarity report {report_id}.")
    lab = session.get_one(Lab, report.lab_id)
    require_staff(session, user=user, course=session.get_one(Course, lab.course_id))
    return report, lab


def _screen(
    session: Session, report: SimilarityReport, pairs: list[SimilarityPair]
) -> list[ShownPair]:
    course_id = session.get_one(Lab, report.lab_id).course_id
    readable = {course_id} | earlier_course_ids(session, course_id=course_id)
    ids = {p.a_submission_id for p in pairs} | {p.b_submission_id for p in pairs}
    course_of = as_dict(
        session.execute(
            select(Submission.id, Lab.course_id)
            .join(Lab, Lab.id == Submission.lab_id)
            .where(Submission.id.in_(ids or {-1}))
        )
    )
    shown = []
    for pair in pairs:
        a_hidden = course_of.get(pair.a_submission_id) not in readable
        b_hidden = course_of.get(pair.b_submission_id) not in readable
        shown.append(
            ShownPair(
                pair=pair,
                a_label=WITHHELD_LABEL if a_hidden else pair.a_label,
                b_label=WITHHELD_LABEL if b_hidden else pair.b_label,
                a_withheld=a_hidden,
                b_withheld=b_hidden,
            )
        )
    return shown


def pairs_of(session: Session, *, report: SimilarityReport) -> list[ShownPair]:
    """The report's pairs, most similar first, as its readers may see them."""
    pairs = list(
        session.scalars(
            select(SimilarityPair)
            .where(SimilarityPair.report_id == report.id)
            .order_by(SimilarityPair.rank)
        )
    )
    return _screen(session, report, pairs)


def reference_copies_of(session: Session, *, report: SimilarityReport) -> list[ReferenceCopy]:
    """The report's submissions that are (nearly) a reference kernel, the closest first."""
    return list(
        session.scalars(
            select(ReferenceCopy)
            .where(ReferenceCopy.report_id == report.id)
            .order_by(ReferenceCopy.share.desc(), ReferenceCopy.id)
        )
    )


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _on_tokens(text: str, start: int, end: int) -> tuple[int, int]:
    """The range narrowed to whole words, without space at its ends: copydetect's ranges come
    from k-grams of code with its spaces taken out, so one can start in the last letter of a
    type that differs ("floa|t" against "in|t"). A word cut at an edge is not shared whole, so
    it is left out rather than taken in."""
    while 0 < start < end and _word(text[start - 1]) and _word(text[start]):
        start += 1
    while start < end < len(text) and _word(text[end - 1]) and _word(text[end]):
        end -= 1
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _passages(text: str, slices: list[list[int]]) -> list[Passage]:
    spans: list[list[int]] = []
    for s, e in sorted((max(0, s), min(len(text), e)) for s, e in slices):
        start, end = _on_tokens(text, s, e)
        if start >= end:
            continue
        if spans and start <= spans[-1][1]:  # overlapping or touching: one passage
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    out, at = [], 0
    for start, end in spans:
        if start > at:
            out.append(Passage(text[at:start], False))
        out.append(Passage(text[start:end], True))
        at = end
    if at < len(text):
        out.append(Passage(text[at:], False))
    return out


def pair_view(session: Session, *, report: SimilarityReport, rank: int) -> PairView:
    """One pair of a report its viewer may see (get_report checked that)."""
    pair = session.scalar(
        select(SimilarityPair).where(
            SimilarityPair.report_id == report.id, SimilarityPair.rank == rank
        )
    )
    if pair is None:
        raise NotFound(f"Similarity report {report.id} has no pair {rank}.")
    (shown,) = _screen(session, report, [pair])
    sources = as_dict(
        session.execute(
            select(Submission.id, Submission.source_text).where(
                Submission.id.in_([pair.a_submission_id, pair.b_submission_id])
            )
        )
    )
    labs = as_dict(
        session.execute(
            select(Submission.id, Lab.slug)
            .join(Lab, Lab.id == Submission.lab_id)
            .where(Submission.id.in_([pair.a_submission_id, pair.b_submission_id]))
        )
    )
    a_text = "" if shown.a_withheld else sources.get(pair.a_submission_id, "")
    b_text = "" if shown.b_withheld else sources.get(pair.b_submission_id, "")
    return PairView(
        shown=shown,
        a_passages=_passages(a_text, pair.a_slices),
        b_passages=_passages(b_text, pair.b_slices),
        a_lab=labs.get(pair.a_submission_id, ""),
        b_lab=labs.get(pair.b_submission_id, ""),
    )


def claim(session: Session, *, report_id: int, now: datetime) -> bool:
    """A worker takes a queued report; False when another took it or it is finished."""
    return REPORTS.claim(session, report_id, now=now)
