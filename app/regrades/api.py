"""The regrade requests' API: asking, the staff's queue, answering and withdrawing."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.courses.service import (
    find_lab,
    require_member,
)
from app.regrades import service as regrades
from app.regrades.schemas import RegradeAnswer, RegradeAsk, RegradeRequestRead, request_read
from app.users.models import User
from app.web.deps import ApiDb, RowId

router = APIRouter(prefix="/api/v1", responses=errors(*COURSE))


@router.post(
    "/submissions/{submission_id}/regrade-requests",
    status_code=201,
    tags=["regrades"],
    responses=errors(409),
)
async def ask_regrade(submission_id: RowId, body: RegradeAsk, api: ApiDb) -> RegradeRequestRead:
    """Students: ask the staff to look at a submission that counts for me (or one of its
    cases), until the lab's window closes (some days after its grades are released)."""

    def work(session: Session, user: User) -> RegradeRequestRead:
        made = regrades.ask(
            session,
            user=user,
            submission_id=submission_id,
            text=body.text,
            case=body.case,
            now=utcnow(),
        )
        return request_read(regrades.get_request(session, user=user, request_id=made.id))

    return await api.run(work)


@router.get("/courses/{course}/labs/{lab}/regrade-requests", tags=["regrades"])
async def regrade_queue(
    course: str,
    lab: str,
    api: ApiDb,
    state: Annotated[
        str | None, Query(description="open (default), accepted, declined, withdrawn, or all")
    ] = "open",
) -> list[RegradeRequestRead]:
    """Staff: the lab's requests, oldest first; students: their own requests about the lab."""

    def work(session: Session, user: User) -> list[RegradeRequestRead]:
        found, row = find_lab(session, course=course, lab=lab)
        role = require_member(session, user=user, course=found)
        if not role.is_staff:
            return [request_read(r) for r in regrades.mine(session, user=user, lab=row)]
        wanted = None if state == "all" else state
        rows = regrades.queue(session, user=user, course=found, lab=row, state=wanted)
        return [request_read(r) for r in rows]

    return await api.run(work)


@router.get("/regrade-requests/{request_id}", tags=["regrades"])
async def get_regrade_request(request_id: RowId, api: ApiDb) -> RegradeRequestRead:
    """Its student, or the course's staff: the request, its answer and every change."""

    def work(session: Session, user: User) -> RegradeRequestRead:
        return request_read(regrades.get_request(session, user=user, request_id=request_id))

    return await api.run(work)


@router.post("/regrade-requests/{request_id}/answer", tags=["regrades"])
async def answer_regrade_request(
    request_id: RowId, body: RegradeAnswer, api: ApiDb
) -> RegradeRequestRead:
    """Staff: accept (regrade the submission, or adjust its points with the answer as the
    reason) or decline, with an answer the student reads."""

    def work(session: Session, user: User) -> RegradeRequestRead:
        request, _job = regrades.answer(
            session,
            user=user,
            request_id=request_id,
            decision=body.decision,
            text=body.answer,
            points=body.points,
            now=utcnow(),
        )
        # A regrade's job is sent once this commits.
        return request_read(regrades.get_request(session, user=user, request_id=request.id))

    return await api.run(work)


@router.post("/regrade-requests/{request_id}/withdraw", tags=["regrades"])
async def withdraw_regrade_request(request_id: RowId, api: ApiDb) -> RegradeRequestRead:
    """Students: take back an open request of mine."""

    def work(session: Session, user: User) -> RegradeRequestRead:
        regrades.withdraw(session, user=user, request_id=request_id, now=utcnow())
        return request_read(regrades.get_request(session, user=user, request_id=request_id))

    return await api.run(work)
