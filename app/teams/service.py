"""Teams of a lab: formed by the staff (one by one or from a roster) or by students who invite
and accept. The credits a team's submission gives its members are app.submissions.credits'.

A membership is a stretch of time (`joined_at` .. `left_at`), never deleted. A submission made
by a team member records the team and, in `submission_credits`, every other member of that
moment: who joins or leaves later changes nothing about it, so a grade stays with the people
who were in the team when it was submitted.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.errors import Conflict, Forbidden, Invalid, NotFound
from app.courses.models import Course, Lab
from app.courses.service import require_member, role_in
from app.teams import notices
from app.teams.models import Team, TeamInvite, TeamMember
from app.users.models import User
from app.users.service import find_user, normalize_email

MAX_TEAM_SIZE = 20
# How long a student's pages say that an invitation was closed because its team filled up.
CLOSED_INVITATIONS_SHOWN = timedelta(days=14)
_NAME = re.compile(r"^[\w][\w .'&+-]{0,58}[\w.)]?$")


@dataclass
class TeamView:
    team: Team
    members: list[User]
    invited: list[User] = field(default_factory=list)

    @property
    def emails(self) -> list[str]:
        return [m.email for m in self.members]


def check_team_name(text: str) -> str:
    name = " ".join(text.split())
    if not name or len(name) > 60 or not _NAME.match(name):
        raise Invalid(
            "A team name is 1 to 60 letters, digits, spaces and . ' & + - characters; "
            "choose another."
        )
    return name


def check_team_size(size: int) -> int:
    if size < 1 or size > MAX_TEAM_SIZE:
        raise Invalid(
            f"A team holds 1 to {MAX_TEAM_SIZE} students (1: everyone submits alone); "
            f"{size} is outside that.",
            field="team_size",
        )
    return size


def set_team_size(lab: Lab, size: int) -> str:
    """Change how many students a team of the lab may hold; a sentence for the change."""
    check_team_size(size)
    if size == lab.team_size:
        return ""
    lab.team_size = size
    return "is done alone" if size == 1 else f"is done in teams of up to {size}"


def current_members(session: Session, *, team: Team) -> list[User]:
    return list(
        session.scalars(
            select(User)
            .join(TeamMember, TeamMember.user_id == User.id)
            .where(TeamMember.team_id == team.id, TeamMember.left_at.is_(None))
            .order_by(User.email)
        )
    )


def team_of(session: Session, *, lab: Lab, user_id: int) -> Team | None:
    """The team the student is in now for the lab, if any."""
    return session.scalar(
        select(Team)
        .join(TeamMember, TeamMember.team_id == Team.id)
        .where(
            TeamMember.lab_id == lab.id,
            TeamMember.user_id == user_id,
            TeamMember.left_at.is_(None),
        )
    )


def teams_of(session: Session, *, lab: Lab) -> list[TeamView]:
    """Every team of the lab with its current members and open invitations, by name."""
    teams = list(session.scalars(select(Team).where(Team.lab_id == lab.id).order_by(Team.name)))
    members: dict[int, list[User]] = {t.id: [] for t in teams}
    for team_id, user in session.execute(
        select(TeamMember.team_id, User)
        .join(User, User.id == TeamMember.user_id)
        .where(TeamMember.lab_id == lab.id, TeamMember.left_at.is_(None))
        .order_by(User.email)
    ):
        members[team_id].append(user)
    invited: dict[int, list[User]] = {t.id: [] for t in teams}
    for team_id, user in session.execute(
        select(TeamInvite.team_id, User)
        .join(User, User.id == TeamInvite.user_id)
        .join(Team, Team.id == TeamInvite.team_id)
        .where(Team.lab_id == lab.id, TeamInvite.answered_at.is_(None))
        .order_by(User.email)
    ):
        invited[team_id].append(user)
    return [TeamView(team=t, members=members[t.id], invited=invited[t.id]) for t in teams]


def _student(session: Session, *, course: Course, email: str) -> User:
    user = find_user(session, email=email)
    role = role_in(session, user=user, course=course) if user is not None else None
    if user is None or role is None:
        raise Invalid(
            f"{normalize_email(email)} is not enrolled in {course.slug}; only the course's "
            "students can be in a team. Enrol them first, or correct the address."
        )
    if role.is_staff:
        raise Invalid(f"{user.email} is on the staff of {course.slug}; teams are for students.")
    return user


def _require_teams(lab: Lab) -> None:
    if lab.team_size <= 1:
        raise Invalid(
            f"{lab.slug} is done alone; an instructor sets a team size first "
            f"(`kernelgrader lab update COURSE {lab.slug} --team-size 2`)."
        )


def _lock_lab_teams(session: Session, lab: Lab) -> None:
    # Team changes of one lab take turns (a row lock on PostgreSQL, the write lock on SQLite):
    # two invitations accepted at once cannot both take a team's last place.
    session.execute(
        update(Lab)
        .where(Lab.id == lab.id)
        .values(team_size=Lab.team_size)
        .execution_options(synchronize_session=False)
    )


def _join(
    session: Session, *, team: Team, lab: Lab, user: User, by: User | None, now: datetime
) -> None:
    held = team_of(session, lab=lab, user_id=user.id)
    if held is not None and held.id == team.id:
        return
    if held is not None:
        raise Conflict(
            f"{user.email} is already in the team {held.name} for {lab.slug}; they leave it "
            "first (or the staff move them)."
        )
    if len(current_members(session, team=team)) >= lab.team_size:
        raise Conflict(
            f"The team {team.name} already has {lab.team_size} members, the most {lab.slug} "
            "allows, so its invitations are closed."
        )
    session.add(
        TeamMember(
            team_id=team.id,
            lab_id=lab.id,
            user_id=user.id,
            added_by_id=by.id if by else None,
            joined_at=now,
        )
    )
    # An invitation to any team of the lab is moot once the student is in one.
    session.execute(
        update(TeamInvite)
        .where(
            TeamInvite.user_id == user.id,
            TeamInvite.answered_at.is_(None),
            TeamInvite.team_id.in_(select(Team.id).where(Team.lab_id == lab.id)),
        )
        .values(answered_at=now, accepted=TeamInvite.team_id == team.id)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    if len(current_members(session, team=team)) >= lab.team_size:
        close_invitations_of_full_teams(session, lab=lab, now=now, teams=[team])


def close_invitations_of_full_teams(
    session: Session, *, lab: Lab, now: datetime, teams: list[Team] | None = None
) -> list[TeamInvite]:
    """Close the open invitations of the lab's teams (or of `teams`) that are full: an
    invitation nobody can accept does not wait. A closed one is answered without a yes or no
    (`accepted` stays None); its student reads why on the lab's pages, and by mail where the
    server sends mail (app.teams.notices)."""
    if teams is None:
        teams = list(session.scalars(select(Team).where(Team.lab_id == lab.id)))
    full = [t for t in teams if len(current_members(session, team=t)) >= lab.team_size]
    if not full:
        return []
    closed = list(
        session.scalars(
            select(TeamInvite).where(
                TeamInvite.team_id.in_([t.id for t in full]), TeamInvite.answered_at.is_(None)
            )
        )
    )
    for row in closed:
        row.answered_at, row.accepted = now, None
    session.flush()
    by_id = {t.id: t for t in full}
    for row in closed:
        notices.closed_because_full(session, invite=row, team=by_id[row.team_id], lab=lab)
    return closed


def _leave(session: Session, *, lab: Lab, user_id: int, now: datetime) -> Team | None:
    row = session.scalar(
        select(TeamMember).where(
            TeamMember.lab_id == lab.id,
            TeamMember.user_id == user_id,
            TeamMember.left_at.is_(None),
        )
    )
    if row is None:
        return None
    row.left_at = now
    session.flush()
    return session.get(Team, row.team_id)


def _new_team(session: Session, *, lab: Lab, name: str, by: User | None, now: datetime) -> Team:
    name = check_team_name(name)
    if session.scalar(select(Team.id).where(Team.lab_id == lab.id, Team.name == name)):
        raise Conflict(f"{lab.slug} already has a team called {name}; choose another name.")
    team = Team(lab_id=lab.id, name=name, created_by_id=by.id if by else None, created_at=now)
    session.add(team)
    session.flush()
    return team


def form_team(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    name: str,
    emails: Iterable[str],
    by: User | None,
    now: datetime,
) -> Team:
    """Staff: make a team (or set an existing one's members) from students' emails. Students
    in another team of the lab are moved; members left out leave. All or nothing."""
    _require_teams(lab)
    _lock_lab_teams(session, lab)
    users = [_student(session, course=course, email=e) for e in emails if e.strip()]
    if not users:
        raise Invalid("Name at least one student for the team.")
    if len({u.id for u in users}) != len(users):
        raise Invalid("A student is named twice; name each member once.")
    if len(users) > lab.team_size:
        raise Invalid(
            f"{len(users)} students are more than the {lab.team_size} a team of {lab.slug} "
            "may hold."
        )
    name = check_team_name(name)
    team = session.scalar(select(Team).where(Team.lab_id == lab.id, Team.name == name))
    if team is None:
        team = _new_team(session, lab=lab, name=name, by=by, now=now)
    wanted = {u.id for u in users}
    for member in current_members(session, team=team):
        if member.id not in wanted:
            _leave(session, lab=lab, user_id=member.id, now=now)
    for user in users:
        held = team_of(session, lab=lab, user_id=user.id)
        if held is not None and held.id != team.id:
            _leave(session, lab=lab, user_id=user.id, now=now)
        _join(session, team=team, lab=lab, user=user, by=by, now=now)
    return team


def import_teams(
    session: Session, *, course: Course, lab: Lab, text: str, by: User | None, now: datetime
) -> list[Team]:
    """Staff: teams from a CSV with the columns team,email (a row per member). Every line is
    checked before anything changes; one bad line changes nothing."""
    _require_teams(lab)
    reader = csv.DictReader(io.StringIO(text))
    fields = [(f or "").strip().lower() for f in reader.fieldnames or []]
    if "team" not in fields or "email" not in fields:
        raise Invalid("The team roster needs the columns team and email (a line per member).")
    groups: dict[str, list[str]] = {}
    seen: dict[str, int] = {}
    for number, raw in enumerate(reader, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
        if not row.get("email") and not row.get("team"):
            continue
        if not row.get("team") or not row.get("email"):
            raise Invalid(f"Team roster line {number}: give both a team and an email.")
        try:
            name = check_team_name(row["team"])
            _student(session, course=course, email=row["email"])
        except Invalid as exc:
            raise Invalid(f"Team roster line {number}: {exc.message}") from None
        email = normalize_email(row["email"])
        if email in seen:
            raise Invalid(
                f"Team roster line {number}: {email} is already in a team on line "
                f"{seen[email]}; a student is in one team."
            )
        seen[email] = number
        groups.setdefault(name, []).append(email)
    if not groups:
        raise Invalid("The team roster has no lines; add a line per member (team,email).")
    for name, emails in groups.items():
        if len(emails) > lab.team_size:
            raise Invalid(
                f"The team {name} has {len(emails)} students, more than the {lab.team_size} "
                f"{lab.slug} allows; nothing was changed."
            )
    return [
        form_team(session, course=course, lab=lab, name=name, emails=emails, by=by, now=now)
        for name, emails in groups.items()
    ]


def remove_member(session: Session, *, lab: Lab, user: User, now: datetime) -> Team | None:
    """Staff (or the student themself): leave the team; earlier submissions keep their credit."""
    _lock_lab_teams(session, lab)
    return _leave(session, lab=lab, user_id=user.id, now=now)


def _require_student(session: Session, *, course: Course, user: User) -> None:
    role = require_member(session, user=user, course=course)
    if role.is_staff:
        raise Forbidden("Teams are for students; staff form them on the lab's teams page.")


def start_team(
    session: Session, *, course: Course, lab: Lab, user: User, name: str, now: datetime
) -> Team:
    """A student starts a team of their own, and is its first member."""
    _require_student(session, course=course, user=user)
    _require_teams(lab)
    _lock_lab_teams(session, lab)
    held = team_of(session, lab=lab, user_id=user.id)
    if held is not None:
        raise Conflict(f"You are already in the team {held.name}; leave it first.")
    team = _new_team(session, lab=lab, name=name, by=user, now=now)
    _join(session, team=team, lab=lab, user=user, by=user, now=now)
    return team


def invite(
    session: Session, *, course: Course, lab: Lab, user: User, email: str, now: datetime
) -> TeamInvite:
    """A member invites another student of the course to their team."""
    _require_student(session, course=course, user=user)
    _require_teams(lab)
    team = team_of(session, lab=lab, user_id=user.id)
    if team is None:
        raise Conflict("Start a team first; then invite others to it.")
    guest = _student(session, course=course, email=email)
    if guest.id == user.id:
        raise Invalid("You are in the team already; invite someone else.")
    held = team_of(session, lab=lab, user_id=guest.id)
    if held is not None:
        raise Conflict(f"{guest.email} is already in a team for {lab.slug}.")
    if len(current_members(session, team=team)) >= lab.team_size:
        raise Conflict(f"Your team is full: {lab.slug} allows {lab.team_size} members.")
    pending = session.scalar(
        select(TeamInvite).where(
            TeamInvite.team_id == team.id,
            TeamInvite.user_id == guest.id,
            TeamInvite.answered_at.is_(None),
        )
    )
    if pending is not None:
        return pending
    row = TeamInvite(team_id=team.id, user_id=guest.id, invited_by_id=user.id, created_at=now)
    session.add(row)
    session.flush()
    notices.invited(session, invite=row, team=team, lab=lab, course=course, by=user, guest=guest)
    return row


def invitations_for(session: Session, *, lab: Lab, user: User) -> list[tuple[TeamInvite, Team]]:
    return [
        (invite, team)
        for invite, team in session.execute(
            select(TeamInvite, Team)
            .join(Team, Team.id == TeamInvite.team_id)
            .where(
                Team.lab_id == lab.id,
                TeamInvite.user_id == user.id,
                TeamInvite.answered_at.is_(None),
            )
            .order_by(TeamInvite.id)
        )
    ]


@dataclass(frozen=True)
class Invitation:
    """An invitation as its student reads it on the course's and the lab's pages."""

    invite: TeamInvite
    team: Team
    lab: Lab
    by: User | None


def _invitations(session: Session, *, user: User, where: list[Any]) -> list[Invitation]:
    rows = session.execute(
        select(TeamInvite, Team, Lab)
        .join(Team, Team.id == TeamInvite.team_id)
        .join(Lab, Lab.id == Team.lab_id)
        .where(TeamInvite.user_id == user.id, Lab.archived_at.is_(None), *where)
        .order_by(Lab.position, Lab.id, TeamInvite.id)
    ).all()
    people = {
        u.id: u
        for u in session.scalars(
            select(User).where(User.id.in_({r[0].invited_by_id for r in rows} - {None}))
        )
    }
    return [
        Invitation(invite=i, team=t, lab=lab, by=people.get(i.invited_by_id or 0))
        for i, t, lab in rows
    ]


def open_invitations(
    session: Session, *, course: Course, user: User, lab: Lab | None = None
) -> list[Invitation]:
    """The invitations waiting for the student's answer, in the course (or one lab of it)."""
    where = [Lab.course_id == course.id, TeamInvite.answered_at.is_(None), Lab.team_size > 1]
    if lab is not None:
        where.append(Lab.id == lab.id)
    return _invitations(session, user=user, where=where)


def closed_invitations(
    session: Session, *, lab: Lab, user: User, since: datetime
) -> list[Invitation]:
    """The student's invitations to the lab's teams closed since then because they filled up."""
    where = [
        Lab.id == lab.id,
        TeamInvite.answered_at >= since,
        TeamInvite.accepted.is_(None),
    ]
    return _invitations(session, user=user, where=where)


def answer_invitation(
    session: Session, *, lab: Lab, user: User, invite_id: int, accept: bool, now: datetime
) -> Team:
    row = session.get(TeamInvite, invite_id)
    team = session.get(Team, row.team_id) if row is not None else None
    if row is None or team is None or row.user_id != user.id or team.lab_id != lab.id:
        raise NotFound(f"There is no invitation {invite_id} for you in {lab.slug}.")
    if row.answered_at is not None and row.accepted is None:
        raise Conflict(
            f"The team {team.name} filled up before you answered, so its invitation is closed."
        )
    if row.answered_at is not None:
        raise Conflict("That invitation was answered already.")
    _lock_lab_teams(session, lab)
    if accept:
        _join(session, team=team, lab=lab, user=user, by=None, now=now)
    row.answered_at, row.accepted = now, accept
    session.flush()
    return team
