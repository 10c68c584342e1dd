"""Set-password links that a course's staff may cause, and who gets to see them.

A course's staff vouch only for their own course: enrolling someone (adding, inviting, a
roster) gives them no credential for an account that anyone already uses. A link is shown to
the staff (where the server sends no mail) only for an account that nobody has used yet: no
password, no outside identity (an LMS or university sign-in), no API token ever, enrolled in
no course but theirs. Such a link works only while all of that still holds, so once the person
signs in some other way, or another course enrols them, the staff's copy opens nothing. For any
other account a link goes by mail to the account's own address, and where the server sends no
mail the page says how that person signs in instead. The operator's CLI (`kernelgrader user
invite`) is trusted and is not bound by this (SECURITY.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from app.core.errors import NotFound
from app.courses.models import Course, Enrollment
from app.users.invites import IssuedInvite, accept_invite, find_invite, issue_invite
from app.users.models import ApiToken, Invite, User, UserIdentity

IN_USE_SINCE = (
    "This link was made for an account that has been used since (or that another course has "
    "enrolled), so it no longer works. Log in the way you do now; if you forgot your "
    "password, ask for a new link."
)


@dataclass(frozen=True)
class Handout:
    """What enrolling or inviting one person gave: a link made now (mailed to the person, or
    `shown` to the staff), or for an account in use without mail a sentence for the staff."""

    person: User
    issued: IssuedInvite | None
    shown: bool
    in_use: bool
    sentence: str = ""


def unused_account(session: Session, *, user: User, course_id: int) -> bool:
    """Whether nobody has used the account yet, and no course but this one enrols it."""
    if user.password_hash is not None:
        return False
    used = select(
        exists().where(UserIdentity.user_id == user.id)
        | exists().where(ApiToken.user_id == user.id)
        | exists().where(Enrollment.user_id == user.id, Enrollment.course_id != course_id)
    )
    return not session.scalar(used)


def hand_out(
    session: Session, *, course: Course, person: User, now: datetime, mail: bool, days: float
) -> Handout:
    """The set-password link that the course's staff may cause for one of its people."""
    fresh = unused_account(session, user=person, course_id=course.id)
    if mail:
        issued = issue_invite(session, user=person, now=now, days=days)
        return Handout(person=person, issued=issued, shown=False, in_use=not fresh)
    if fresh:
        issued = issue_invite(
            session, user=person, now=now, days=days, shown_in_course_id=course.id
        )
        return Handout(person=person, issued=issued, shown=True, in_use=False)
    return Handout(
        person=person,
        issued=None,
        shown=False,
        in_use=True,
        sentence=how_they_sign_in(session, user=person),
    )


def how_they_sign_in(session: Session, *, user: User) -> str:
    """For the staff, where no mail goes out: why no link was made, and how the person gets in."""
    kinds = set(session.scalars(select(UserIdentity.kind).where(UserIdentity.user_id == user.id)))
    ways = []
    if user.password_hash is not None:
        ways.append(
            "with their own password (if they lost it, whoever runs this kernelgrader server "
            "can make them a link: `kernelgrader user invite EMAIL`)"
        )
    if kinds & {"oidc", "saml"}:
        ways.append("through their university's sign-in (/sso)")
    if "lti" in kinds:
        ways.append("through the kernelgrader link in their LMS course")
    how = (
        "They log in " + "; or ".join(ways) + "."
        if ways
        else "They have no way to log in yet and another course enrols them too, so only whoever "
        "runs this kernelgrader server can make them a link (`kernelgrader user invite EMAIL`)."
    )
    return (
        f"{user.email} already has an account in use, so no link was made: this server sends "
        f"no mail, and a link shown to you would let you into their account. {how}"
    )


def live_invite(session: Session, *, token: str, now: datetime) -> tuple[Invite, User]:
    """The live link for a token (app.users.invites.find_invite), and for a link shown to a
    course's staff only while its account is still unused."""
    invite, user = find_invite(session, token=token, now=now)
    if invite.shown_in_course_id is not None and not unused_account(
        session, user=user, course_id=invite.shown_in_course_id
    ):
        raise NotFound(IN_USE_SINCE)
    return invite, user


def accept_link(
    session: Session, *, token: str, password: str, confirm: str, now: datetime
) -> User:
    """Set the password through a live link (see live_invite)."""
    live_invite(session, token=token, now=now)
    return accept_invite(session, token=token, password=password, confirm=confirm, now=now)
