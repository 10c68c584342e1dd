"""The grading's API: the staff's regrade of a whole lab."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.courses.service import (
    find_lab,
    require_staff,
)
from app.grading.bulk import regrade_lab
from app.users.models import User
from app.web.deps import ApiDb

router = APIRouter(prefix="/api/v1")


class BulkRegradeRead(BaseModel):
    queued: int
    skipped: int
    # Of the queued: last graded against another version of the lab, or before versions were
    # recorded; and the lab's version (content digest) they are graded against now.
    older_version: int = 0
    unrecorded_version: int = 0
    lab_digest: str = ""


@router.post(
    "/courses/{course}/labs/{lab}/regrade",
    status_code=202,
    tags=["labs"],
    responses=errors(*COURSE),
)
async def regrade_whole_lab(
    course: str,
    lab: str,
    api: ApiDb,
    counted_only: Annotated[bool, Query(description="only each student's counted one")] = False,
) -> BulkRegradeRead:
    """Staff: regrade every submission of a lab (after fixing it). The jobs wait behind
    students' new uploads and go to the workers a few at a time."""

    def work(session: Session, user: User) -> BulkRegradeRead:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        result = regrade_lab(
            session, lab=row, requested_by=user.email, now=utcnow(), counted_only=counted_only
        )
        return BulkRegradeRead(
            queued=result.queued,
            skipped=result.skipped,
            older_version=result.older,
            unrecorded_version=result.unrecorded,
            lab_digest=result.digest,
        )

    return await api.run(work)
