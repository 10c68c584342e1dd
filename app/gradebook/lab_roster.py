"""The staff's view of one lab: a row per enrolled student, filters, and the counted sources."""

from __future__ import annotations

import io
import re
import zipfile
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import IO

from sqlalchemy import select
from sqlalchemy.orm import Session, load_only

from app.core.csv_out import SafeCsvWriter
from app.core.errors import Invalid
from app.courses.deadlines import Deadline, deadline_from
from app.courses.models import Enrollment, Lab, Role
from app.performance.service import TimedResult, timed_results
from app.policy.counting import LabCell, Scored, lab_cell, policy_inputs
from app.rubric.service import points_possible
from app.submissions.models import Status, Submission
from app.submissions.service import LISTED
from app.teams.models import SubmissionCredit, Team, TeamMember
from app.users.models import User

# ?status= values of the staff view and its API.
STATUS_FILTERS = {
    "none": "no submission",
    "pending": "still grading",
    "scored": "has a score",
    "full": "full marks",
    "not_full": "below full marks",
}


@dataclass
class StudentRow:
    student: User
    cell: LabCell
    attempts: int
    last: Submission | None
    counted: Submission | None
    deadline: Deadline
    timed: TimedResult | None  # the counted submission's timed case, if a GPU timed it
    # The newest submission that compiled, graded or not: the zip's choice where the counted
    # one is a compile error and a later one is still on its way to a verdict.
    compiled: Submission | None = None
    team: str = ""  # the team they are in now, if any

    @property
    def late(self) -> bool:
        return self.cell.late


def lab_roster(
    session: Session,
    *,
    lab: Lab,
    status: str | None = None,
    late: bool | None = None,
    extension: bool | None = None,
    query: str | None = None,
) -> list[StudentRow]:
    """One row per student enrolled in the lab's course, by email, filtered."""
    if status and status not in STATUS_FILTERS:
        raise Invalid(
            f"'{status}' is not a status filter; use one of: {', '.join(STATUS_FILTERS)}."
        )
    students = list(
        session.scalars(
            select(User)
            .join(Enrollment, Enrollment.user_id == User.id)
            .where(Enrollment.course_id == lab.course_id, Enrollment.role == Role.student.value)
            .order_by(User.email)
        )
    )
    by_user: dict[int, list[Submission]] = {}
    # Only the columns a list shows: no source, log or report (the zip reads the chosen
    # sources, in one query of its own).
    of_lab = select(Submission).where(Submission.lab_id == lab.id)
    by_id: dict[int, Submission] = {}
    columns = load_only(
        *LISTED, Submission.sha256, Submission.compile_ok, Submission.points_adjustment
    )
    for sub in session.scalars(of_lab.options(columns)):
        by_id[sub.id] = sub
        by_user.setdefault(sub.user_id, []).append(sub)
    # A team's submission counts for each member of its moment.
    for sub_id, user_id in session.execute(
        select(SubmissionCredit.submission_id, SubmissionCredit.user_id)
        .join(Submission, Submission.id == SubmissionCredit.submission_id)
        .where(Submission.lab_id == lab.id)
    ):
        by_user.setdefault(user_id, []).append(by_id[sub_id])
    inputs = policy_inputs(session, labs=[lab])
    teams = {
        user_id: name
        for user_id, name in session.execute(
            select(TeamMember.user_id, Team.name)
            .join(Team, Team.id == TeamMember.team_id)
            .where(TeamMember.lab_id == lab.id, TeamMember.left_at.is_(None))
        )
    }
    extensions = {user_id: e for (_, user_id), e in inputs.extensions.items()}  # one lab's
    timed = timed_results(session, lab=lab)
    rows = []
    for student in students:
        subs = by_user.get(student.id, [])
        cell = inputs.cell(lab, student.id, lab_cell(lab, [Scored.of(s) for s in subs]))
        counted = (
            next(s for s in subs if s.id == cell.counted.submission_id) if cell.counted else None
        )
        rows.append(
            StudentRow(
                student=student,
                cell=cell,
                attempts=len(subs),
                last=max(subs, key=lambda s: (s.created_at, s.id)) if subs else None,
                counted=counted,
                deadline=deadline_from(lab, extensions.get(student.id)),
                timed=timed.get(counted.id) if counted else None,
                compiled=max(
                    (s for s in subs if s.compile_ok),
                    key=lambda s: (s.created_at, s.id),
                    default=None,
                ),
                team=teams.get(student.id, ""),
            )
        )
    most = points_possible(session, labs=[lab])[lab.id]
    return [r for r in rows if _keep(r, most, status, late, extension, query)]


def _keep(
    row: StudentRow,
    most: float,
    status: str | None,
    late: bool | None,
    extension: bool | None,
    query: str | None,
) -> bool:
    score = row.cell.score
    checks = {
        "none": row.attempts == 0,
        "pending": row.cell.pending > 0,
        "scored": score is not None,
        "full": score is not None and score >= most,
        "not_full": score is None or score < most,
    }
    if status and not checks[status]:
        return False
    if late is not None and row.late != late:
        return False
    if extension is not None and row.deadline.extended != extension:
        return False
    if query:
        needle = query.strip().lower()
        if needle not in row.student.email.lower() and needle not in row.student.name.lower():
            return False
    return True


def kernel_time_groups(rows: list[StudentRow]) -> list[tuple[str, list[float]]]:
    """The counted submissions' timed medians (ms), grouped by GPU model, biggest group first:
    times on different GPUs are not comparable."""
    groups: dict[str, list[float]] = {}
    for row in rows:
        if row.timed is not None:
            groups.setdefault(row.timed.gpu_model, []).append(row.timed.median_ms)
    return sorted(groups.items(), key=lambda item: -len(item[1]))


def for_review(row: StudentRow) -> tuple[Submission | None, str]:
    """The submission of a student that the zip holds, and why: the counted one; where that
    is a compile error (it counts as 0) but a later one compiled and waits for its verdict,
    that compiled kernel, which is the code to review; with nothing counted yet, the newest
    that compiled, else the newest."""
    counted, compiled = row.counted, row.compiled
    if counted is not None and counted.status != Status.compile_error.value:
        return counted, "counted"
    if compiled is not None and (counted is None or compiled.created_at > counted.created_at):
        graded = compiled.graded_at is not None
        return compiled, "latest that compiled" + ("" if graded else " (not graded yet)")
    if counted is not None:
        return counted, "counted"
    return row.last, "latest (not graded yet)"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@+-]", "_", text)[:100] or "file"


def counted_sources_zip(session: Session, *, lab: Lab, now: datetime, out: IO[bytes]) -> None:
    """Write a zip with each student's counted submission (their latest, where nothing is
    counted yet) as `<lab>/<email>/<file>`, and a manifest.csv; the layout plagiarism checkers
    such as MOSS and JPlag take, a folder per student."""
    rows = lab_roster(session, lab=lab)
    picks = {row.student.id: for_review(row) for row in rows}
    chosen_ids = [c.id for c, _ in picks.values() if c is not None]
    sources = {
        sid: text
        for sid, text in session.execute(
            select(Submission.id, Submission.source_text).where(Submission.id.in_(chosen_ids))
        )
    }
    manifest = io.StringIO()
    writer = SafeCsvWriter(manifest)
    writer.writerow(
        ["email", "name", "submission_id", "which", "score", "late", "created_at", "sha256", "path"]
    )
    names: Counter[str] = Counter()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for row in rows:
            chosen, which = picks[row.student.id]
            if chosen is None:
                continue
            folder = _safe(row.student.email)
            names[folder] += 1
            if names[folder] > 1:
                folder += f"-{names[folder]}"
            filename = _safe(chosen.filename)
            if not filename.endswith((".cu", ".cuh")):
                filename += ".cu"
            path = f"{lab.slug}/{folder}/{filename}"
            info = zipfile.ZipInfo(path, date_time=chosen.created_at.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, sources[chosen.id])
            writer.writerow(
                [
                    row.student.email,
                    row.student.name,
                    chosen.id,
                    which,
                    "" if chosen.score is None else f"{chosen.score:g}",
                    "1" if chosen.late else "0",
                    chosen.created_at.isoformat(),
                    chosen.sha256,
                    path,
                ]
            )
        info = zipfile.ZipInfo(f"{lab.slug}/manifest.csv", date_time=now.timetuple()[:6])
        info.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(info, manifest.getvalue())
