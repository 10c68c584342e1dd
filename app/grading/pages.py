"""The grading's page: the staff's regrade of a whole lab (its jobs go behind students' uploads)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.service import (
    find_lab,
    require_staff,
)
from app.grading.bulk import regrade_lab
from app.users.models import User
from app.web.deps import WebDb
from app.web.forms import back_to
from app.web.templating import check_csrf

router = APIRouter(include_in_schema=False)


@router.post("/courses/{course}/labs/{lab}/regrade")
async def regrade_lab_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
    scope: Annotated[str, Form()] = "all",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        result = regrade_lab(
            session,
            lab=row,
            requested_by=user.email,
            now=utcnow(),
            counted_only=scope == "counted",
        )
        skipped = f" ({result.skipped} were already waiting or grading)" if result.skipped else ""
        versions = f" {result.versions()}" if result.versions() else ""
        return back_to(
            f"/courses/{found.slug}/labs/{row.slug}/students",
            f"Queued {result.queued} submissions for a regrade{skipped}; they run behind new "
            f"uploads, a few at a time.{versions}",
        )

    return await web.run(work)
