"""REST endpoints for similarity reports: staff only, computed by a worker."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.deps import ApiDb, RowId
from app.courses.models import Lab
from app.courses.service import get_course, get_lab, require_staff
from app.similarity import service as similarity
from app.similarity.models import SimilarityPair, SimilarityReport
from app.similarity.schemas import (
    PassageRead,
    SimilarityAsk,
    SimilarityPairDetail,
    SimilarityPairRead,
    SimilarityReportRead,
)
from app.users.models import User

router = APIRouter(prefix="/api/v1", tags=["similarity"], responses=errors(*COURSE))


def _pair_read(report: SimilarityReport, pair: SimilarityPair) -> SimilarityPairRead:
    return SimilarityPairRead(
        rank=pair.rank,
        a_submission=pair.a_submission_id,
        b_submission=pair.b_submission_id,
        a=pair.a_label,
        b=pair.b_label,
        a_similarity=pair.a_similarity,
        b_similarity=pair.b_similarity,
        overlap_tokens=pair.overlap_tokens,
        url=f"/api/v1/similarity/{report.id}/pairs/{pair.rank}",
    )


def report_read(
    session: Session, report: SimilarityReport, lab: Lab, *, pairs: bool
) -> SimilarityReportRead:
    return SimilarityReportRead(
        id=report.id,
        lab=lab.slug,
        state=report.state,
        include_past=report.include_past,
        created_at=report.created_at,
        finished_at=report.finished_at,
        error=report.error,
        stats=report.stats or {},
        url=f"/api/v1/similarity/{report.id}",
        pairs=[_pair_read(report, p) for p in similarity.pairs_of(session, report=report)]
        if pairs
        else [],
    )


@router.post("/courses/{course}/labs/{lab}/similarity", status_code=202)
async def ask_similarity(
    course: str, lab: str, body: SimilarityAsk, api: ApiDb
) -> SimilarityReportRead:
    """Staff: compute a similarity report of the lab's counted submissions in a worker (the lab's
    references and starter code are boilerplate); `include_past` also compares with the same
    lab in the other courses."""

    def work(session: Session, user: User) -> SimilarityReportRead:
        found = get_course(session, slug=course)
        row = get_lab(session, course=found, slug=lab)
        report = similarity.request_report(
            session, course=found, lab=row, user=user, include_past=body.include_past, now=utcnow()
        )
        read = report_read(session, report, row, pairs=False)
        session.commit()
        similarity.send_report(report.id)
        return read

    return await api.run(work)


@router.get("/courses/{course}/labs/{lab}/similarity")
async def list_similarity(course: str, lab: str, api: ApiDb) -> list[SimilarityReportRead]:
    """Staff: the lab's similarity reports, newest first."""

    def work(session: Session, user: User) -> list[SimilarityReportRead]:
        found = get_course(session, slug=course)
        row = get_lab(session, course=found, slug=lab)
        require_staff(session, user=user, course=found)
        return [
            report_read(session, r, row, pairs=False)
            for r in similarity.reports_of(session, lab=row)
        ]

    return await api.run(work)


@router.get("/similarity/{report_id}")
async def get_similarity(report_id: RowId, api: ApiDb) -> SimilarityReportRead:
    """Staff: a report and its most similar pairs."""

    def work(session: Session, user: User) -> SimilarityReportRead:
        report, lab = similarity.get_report(session, user=user, report_id=report_id)
        return report_read(session, report, lab, pairs=True)

    return await api.run(work)


@router.get("/similarity/{report_id}/pairs/{rank}")
async def get_similarity_pair(report_id: RowId, rank: int, api: ApiDb) -> SimilarityPairDetail:
    """Staff: one pair's two sources, cut into passages shared with the other side or not."""

    def work(session: Session, user: User) -> SimilarityPairDetail:
        report, _ = similarity.get_report(session, user=user, report_id=report_id)
        view = similarity.pair_view(session, report=report, rank=rank)
        base = _pair_read(report, view.pair)
        return SimilarityPairDetail(
            **base.model_dump(),
            a_passages=[PassageRead(text=p.text, shared=p.shared) for p in view.a_passages],
            b_passages=[PassageRead(text=p.text, shared=p.shared) for p in view.b_passages],
        )

    return await api.run(work)
