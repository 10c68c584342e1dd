"""What a student is told by mail about a team invitation, where the server sends mail: that
they were invited (and where to answer), and that one was closed because its team filled up.
Sent once the unit of work commits (app.core.database.after_commit), never for one it rolls
back. The course's and the lab's pages say the same to a student without mail."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core.database import after_commit
from app.core.mail import outbox
from app.core.settings import get_settings
from app.courses.models import Course, Lab
from app.teams.models import Team, TeamInvite
from app.users.models import User


def team_page_url(course: Course, lab: Lab) -> str:
    base = get_settings().public_url.rstrip("/")
    return f"{base}/courses/{course.slug}/labs/{lab.slug}/teams"


def _mail(session: Session, *, to: str, subject: str, body: str) -> None:
    def send() -> None:
        outbox.send(to=to, subject=subject, body=body)

    if get_settings().mail_enabled:
        after_commit(session, send)


def invited(
    session: Session,
    *,
    invite: TeamInvite,
    team: Team,
    lab: Lab,
    course: Course,
    by: User,
    guest: User,
) -> None:
    who = f"{by.name} ({by.email})" if by.name else by.email
    _mail(
        session,
        to=guest.email,
        subject=f"{who} invites you to their team for {lab.title}",
        body=(
            f"{who} invites you to the team {team.name} for {lab.title} in {course.title} on "
            f"kernelgrader (teams of up to {lab.team_size}; a submission by any member counts "
            "for everyone in the team).\n\n"
            f"Accept or decline it on the lab's team page:\n\n{team_page_url(course, lab)}\n\n"
            "If the team fills up before you answer, the invitation is closed and you are told.\n"
        ),
    )


def closed_because_full(session: Session, *, invite: TeamInvite, team: Team, lab: Lab) -> None:
    guest = session.get(User, invite.user_id)
    course = session.get(Course, lab.course_id)
    if guest is None or course is None:
        return
    _mail(
        session,
        to=guest.email,
        subject=f"The team {team.name} for {lab.title} is full",
        body=(
            f"The team {team.name} for {lab.title} in {course.title} filled up (teams of up to "
            f"{lab.team_size}) before you answered, so its invitation to you is closed and "
            "needs no answer.\n\n"
            f"Start a team or join another on the lab's team page:\n\n"
            f"{team_page_url(course, lab)}\n"
        ),
    )
