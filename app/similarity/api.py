"""REST endpoints for similarity reports: staff only, computed by a worker."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.errors import NotFound
from app.courses.models import Lab
from app.courses.service import get_course, get_lab, require_staff
from app.similarity import offerings
from app.similarity import service as similarity
from app.similarity.models import SimilarityReport
from app.similarity.schemas import (
    EarlierOfferingRead,
    PassageRead,
    ReferenceCopyRead,
    SimilarityAsk,
    SimilarityPairDetail,
    SimilarityPairRead,
    SimilarityReportRead,
)
from app.users.models import User
from app.web.deps import ApiDb, RowId

router = APIRouter(prefix="/api/v1", tags=["similarity"], responses=errors(*COURSE))


def _pair_read(report: SimilarityReport, shown: similarity.ShownPair) -> SimilarityPairRead:
    pair = shown.pair
    return SimilarityPairRead(
        rank=pair.rank,
        a_submission=pair.a_submission_id,
        b_submission=pair.b_submission_id,
        a=shown.a_label,
        b=shown.b_label,
        withheld=shown.a_withheld or shown.b_withheld,
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
        reference_copies=[
            ReferenceCopyRead(
                submission=c.submission_id,
                label=c.label,
                reference=c.reference,
                share=c.share,
                overlap_tokens=c.overlap_tokens,
            )
            for c in similarity.reference_copies_of(session, report=report)
        ]
        if pairs
        else [],
    )


@router.post("/courses/{course}/labs/{lab}/similarity", status_code=202)
async def ask_similarity(
    course: str, lab: str, body: SimilarityAsk, api: ApiDb
) -> SimilarityReportRead:
    """Staff: compute a similarity report of the lab's counted submissions in a worker (the lab's
    references and starter code are boilerplate); `include_past` also compares with the same
    lab in the course's earlier offerings (linked by an instructor of both, and over)."""

    def work(session: Session, user: User) -> SimilarityReportRead:
        found = get_course(session, slug=course)
        row = get_lab(session, course=found, slug=lab)
        report = similarity.request_report(
            session, course=found, lab=row, user=user, include_past=body.include_past, now=utcnow()
        )
        return report_read(session, report, row, pairs=False)  # sent once this commits

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
        base = _pair_read(report, view.shown)
        return SimilarityPairDetail(
            **base.model_dump(),
            a_passages=[PassageRead(text=p.text, shared=p.shared) for p in view.a_passages],
            b_passages=[PassageRead(text=p.text, shared=p.shared) for p in view.b_passages],
        )

    return await api.run(work)


@router.get("/courses/{course}/earlier-offerings")
async def list_earlier_offerings(course: str, api: ApiDb) -> list[EarlierOfferingRead]:
    """Staff: the course's earlier offerings, and the later courses that compare with it."""

    def work(session: Session, user: User) -> list[EarlierOfferingRead]:
        found = get_course(session, slug=course)
        return [
            _offering_read(link) for link in offerings.links_of(session, course=found, user=user)
        ]

    return await api.run(work)


@router.put("/courses/{course}/earlier-offerings/{earlier}")
async def link_earlier_offering(course: str, earlier: str, api: ApiDb) -> EarlierOfferingRead:
    """An instructor of both courses: link `earlier` (over: every lab's grades released) as an
    earlier offering of `course`, whose similarity reports may then compare with it."""

    def work(session: Session, user: User) -> EarlierOfferingRead:
        found = get_course(session, slug=course)
        link = offerings.link_earlier(
            session, course=found, earlier_slug=earlier, user=user, now=utcnow()
        )
        links = offerings.links_of(session, course=found, user=user)
        return _offering_read(
            next(
                x for x in links if (x.later.id, x.earlier.id) == (found.id, link.earlier_course_id)
            )
        )

    return await api.run(work)


@router.delete("/courses/{course}/earlier-offerings/{other}", status_code=204)
async def unlink_earlier_offering(course: str, other: str, api: ApiDb) -> None:
    """Staff of either course: remove the link between the two, whichever way it points."""

    def work(session: Session, user: User) -> None:
        found = get_course(session, slug=course)
        if not offerings.unlink(session, course=found, other_slug=other, user=user):
            raise NotFound(f"{other} is not linked to {found.slug}.")

    await api.run(work)


def _offering_read(link: offerings.OfferingLink) -> EarlierOfferingRead:
    return EarlierOfferingRead(
        course=link.later.slug,
        earlier=link.earlier.slug,
        linked_by=link.linked_by,
        created_at=link.created_at,
    )
