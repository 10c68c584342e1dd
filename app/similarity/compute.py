"""Computing a similarity report in a worker, with copydetect's winnowing (the MOSS method).

What is compared: each student's counted submission of the lab (their latest where nothing
counts yet), a team's once; with `include_past`, also the same lab's submissions in the course's
earlier offerings (app.similarity.offerings: linked by an instructor of both, and over), each
author's latest graded one, against this course's only. What is left out as boilerplate: every
fingerprint of the lab's own files, its reference kernels and any starter code (the `.cu`/`.cuh`
files at the top of the lab folder and in `starter/`). Since that leaves a verbatim copy of a
reference invisible to the pairs, a submission that is (nearly) one of the references is listed
on its own.

Run as the task `similarity.compute(report_id)`: it claims the report, computes, and writes
the pairs in one transaction, replacing any of an earlier attempt, so a job delivered twice
writes one report.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.core.database import as_dict, session_scope, utcnow
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.specs import folder_of
from app.gradebook.lab_roster import lab_roster
from app.similarity.models import ReferenceCopy, ReportState, SimilarityPair, SimilarityReport
from app.similarity.offerings import past_labs
from app.similarity.service import claim
from app.submissions.models import Submission
from app.users.models import User

log = logging.getLogger(__name__)

# copydetect's defaults: k-grams of 25 characters of filtered code, every one kept (window 1).
NOISE = 25
GUARANTEE = 25
TOP_PAIRS = 50
# Pairs sharing less than this share of both files are not listed.
LIST_AT_LEAST = 0.10
# A submission this much of whose code is found in one of the lab's reference kernels is listed
# as a copy of that reference: "identical, or nearly" (a renamed variable, a dropped comment).
NEARLY_REFERENCE = 0.80


@dataclass
class Entry:
    submission_id: int
    label: str
    source: str
    past: bool = False


def _fingerprint(text: str, name: str = "submission.cu", boilerplate: Any = None) -> Any:
    from copydetect import CodeFingerprint

    return CodeFingerprint(
        name,
        k=NOISE,
        win_size=GUARANTEE - NOISE + 1,
        boilerplate=boilerplate if boilerplate is not None else [],
        fp=io.StringIO(text),
    )


def boilerplate_files(lab: Lab) -> list[Path]:
    folder = folder_of(lab)
    files = []
    for where in (folder, folder / "starter"):
        if where.is_dir():
            files += sorted(p for p in where.iterdir() if p.suffix in (".cu", ".cuh"))
    return files


@dataclass
class LabFile:
    name: str
    text: str
    reference: bool  # a reference kernel (the lab folder's top), not starter code


def _lab_files(lab: Lab) -> tuple[list[LabFile], int]:
    """The lab's readable boilerplate files, and how many there are, readable or not."""
    files = boilerplate_files(lab)
    top = folder_of(lab)
    read = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        read.append(LabFile(path.name, text, reference=path.parent == top))
    return read, len(files)


def _boilerplate(files: list[LabFile]) -> Any:
    hashes: list[int] = []
    for file in files:
        hashes.extend(_fingerprint(file.text, file.name).hashes)
    return np.unique(np.array(hashes, dtype=np.int64))


@dataclass
class CopyFound:
    entry: Entry
    reference: str
    share: float  # of the entry's fingerprinted code, the share found in the reference
    overlap: int


def reference_copies(entries: list[Entry], references: list[LabFile]) -> list[CopyFound]:
    """The entries that are (nearly) one of the references, each with the one it is most."""
    from copydetect import compare_files

    prints = [(ref.name, _fingerprint(ref.text, ref.name)) for ref in references]
    found = []
    for entry in entries:
        own = _fingerprint(entry.source)
        best: CopyFound | None = None
        for name, reference in prints:
            overlap, (share, _), _ = compare_files(own, reference)
            if share >= NEARLY_REFERENCE and (best is None or share > best.share):
                best = CopyFound(entry, name, float(share), int(overlap))
        if best is not None:
            found.append(best)
    return found


def _entries(session: Session, lab: Lab) -> list[Entry]:
    """The course's side: each student's counted submission (latest if none counts), once."""
    chosen: dict[int, list[str]] = {}
    for row in lab_roster(session, lab=lab):
        sub = row.counted or row.last
        if sub is not None:
            chosen.setdefault(sub.id, []).append(row.student.email)
    sources = as_dict(
        session.execute(
            select(Submission.id, Submission.source_text).where(Submission.id.in_(list(chosen)))
        )
    )
    return [
        Entry(submission_id=sid, label=", ".join(sorted(emails)), source=sources[sid])
        for sid, emails in sorted(chosen.items())
    ]


def _past_entries(session: Session, lab: Lab) -> list[Entry]:
    """The same lab in the course's linked earlier offerings that are over (never another
    course merely because it has a lab of that name): each author's latest graded one."""
    earlier = past_labs(session, lab=lab, now=utcnow())
    if not earlier:
        return []
    rows = session.execute(
        select(Submission.id, Submission.user_id, Submission.lab_id, User.email, Course.slug)
        .join(Lab, Lab.id == Submission.lab_id)
        .join(Course, Course.id == Lab.course_id)
        .join(User, User.id == Submission.user_id)
        .join(
            Enrollment,
            (Enrollment.user_id == Submission.user_id) & (Enrollment.course_id == Course.id),
        )
        .where(
            Submission.lab_id.in_([past.id for past in earlier]),
            Submission.graded_at.is_not(None),
            Enrollment.role == Role.student.value,
        )
        .order_by(Submission.id)
    ).all()
    latest: dict[tuple[int, int], tuple[int, str]] = {}
    for sid, uid, lab_id, email, course in rows:
        latest[(lab_id, uid)] = (sid, f"{course}: {email}")
    ids = [sid for sid, _ in latest.values()]
    sources = as_dict(
        session.execute(
            select(Submission.id, Submission.source_text).where(Submission.id.in_(ids or [-1]))
        )
    )
    return [
        Entry(submission_id=sid, label=label, source=sources[sid], past=True)
        for sid, label in sorted(latest.values())
    ]


def _slices(array: Any) -> list[list[int]]:
    if len(array) == 0 or len(array[0]) == 0:
        return []
    return [[int(s), int(e)] for s, e in zip(array[0], array[1], strict=True)]


@dataclass
class Found:
    a: Entry
    b: Entry
    share_a: float  # of a's fingerprinted code, the share found in b
    share_b: float
    overlap: int  # shared tokens
    slices_a: list[list[int]]  # character ranges of a's source shared with b
    slices_b: list[list[int]]

    @property
    def key(self) -> tuple[float, int]:
        return (-max(self.share_a, self.share_b), -self.overlap)


def compute_pairs(entries: list[Entry], past: list[Entry], boilerplate: Any) -> list[Found]:
    """Every pair of this course's entries, and each of them against every past one, most
    similar first (by the larger of the two shares)."""
    from copydetect import compare_files

    prints = [_fingerprint(e.source, boilerplate=boilerplate) for e in entries]
    past_prints = [_fingerprint(e.source, boilerplate=boilerplate) for e in past]
    count = len(entries)
    candidates = [(i, entries[j], prints[j]) for i in range(count) for j in range(i + 1, count)]
    candidates += [(i, past[j], past_prints[j]) for i in range(count) for j in range(len(past))]
    found: list[Found] = []
    for i, other, other_print in candidates:
        overlap, (share_a, share_b), (slices_a, slices_b) = compare_files(prints[i], other_print)
        if overlap <= 0 or max(share_a, share_b) < LIST_AT_LEAST:
            continue
        found.append(
            Found(
                a=entries[i],
                b=other,
                share_a=float(share_a),
                share_b=float(share_b),
                overlap=int(overlap),
                slices_a=_slices(slices_a),
                slices_b=_slices(slices_b),
            )
        )
    found.sort(key=lambda f: f.key)
    return found[:TOP_PAIRS]


def compute_report(report_id: int) -> str:
    """The task's body: claim, compute, record; returns the report's state."""
    with session_scope() as session:
        if not claim(session, report_id=report_id, now=utcnow()):
            report = session.get(SimilarityReport, report_id)
            return report.state if report is not None else "missing"
    try:
        with session_scope() as session:
            report = session.get_one(SimilarityReport, report_id)
            lab = session.get_one(Lab, report.lab_id)
            entries = _entries(session, lab)
            past = _past_entries(session, lab) if report.include_past else []
            lab_files, files = _lab_files(lab)
            pairs = compute_pairs(entries, past, _boilerplate(lab_files))
            copies = reference_copies(entries, [f for f in lab_files if f.reference])
            session.execute(delete(SimilarityPair).where(SimilarityPair.report_id == report.id))
            session.execute(delete(ReferenceCopy).where(ReferenceCopy.report_id == report.id))
            for copy in copies:
                session.add(
                    ReferenceCopy(
                        report_id=report.id,
                        submission_id=copy.entry.submission_id,
                        label=copy.entry.label[:400],
                        reference=copy.reference[:200],
                        share=copy.share,
                        overlap_tokens=copy.overlap,
                    )
                )
            for rank, pair in enumerate(pairs, start=1):
                session.add(
                    SimilarityPair(
                        report_id=report.id,
                        rank=rank,
                        a_submission_id=pair.a.submission_id,
                        b_submission_id=pair.b.submission_id,
                        a_label=pair.a.label[:400],
                        b_label=pair.b.label[:400],
                        a_similarity=pair.share_a,
                        b_similarity=pair.share_b,
                        overlap_tokens=pair.overlap,
                        a_slices=pair.slices_a,
                        b_slices=pair.slices_b,
                    )
                )
            report.state = ReportState.done.value
            report.finished_at = utcnow()
            report.error = ""
            report.stats = {
                "submissions": len(entries),
                "past_submissions": len(past),
                "boilerplate_files": files,
                "pairs_listed": len(pairs),
                "reference_copies": len(copies),
            }
        return ReportState.done.value
    except Exception as exc:
        log.exception("similarity report %s failed", report_id)
        with session_scope() as session:
            report = session.get_one(SimilarityReport, report_id)
            report.state = ReportState.failed.value
            report.finished_at = utcnow()
            report.error = f"{type(exc).__name__}: {exc}"[:2000]
        return ReportState.failed.value
