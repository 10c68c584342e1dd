"""A lab's leaderboard: students who opt in, under a pseudonym they choose, ranked per GPU model
by the timed median of their fastest fully correct submission."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import as_dict
from app.core.errors import Conflict, Forbidden, Invalid
from app.courses.models import Course, Lab, LeaderboardEntry
from app.courses.service import require_member
from app.performance.service import TimedResult, timed_results
from app.submissions.models import Submission
from app.teams.models import SubmissionCredit
from app.users.models import User

_PSEUDONYM = re.compile(r"^[^\W_][\w .'-]{1,22}[^\W_]$")


@dataclass(frozen=True)
class Place:
    rank: int
    pseudonym: str
    median_ms: float
    is_you: bool


@dataclass(frozen=True)
class Board:
    gpu_model: str
    places: list[Place]


def check_pseudonym(text: str) -> str:
    name = " ".join(text.split())
    if not _PSEUDONYM.match(name):
        raise Invalid(
            "A pseudonym is 3 to 24 letters, digits, spaces, dots, hyphens or apostrophes, "
            "starting and ending with a letter or digit; choose another."
        )
    if "@" in text:
        raise Invalid("Choose a pseudonym that is not your email address.")
    return name


def join_leaderboard(
    session: Session, *, course: Course, lab: Lab, user: User, pseudonym: str
) -> LeaderboardEntry:
    """Opt in (or change one's pseudonym)."""
    role = require_member(session, user=user, course=course)
    if role.is_staff:
        raise Forbidden("The leaderboard ranks students; staff are not listed on it.")
    name = check_pseudonym(pseudonym)
    key = name.casefold()
    taken = session.scalar(
        select(LeaderboardEntry).where(
            LeaderboardEntry.lab_id == lab.id,
            LeaderboardEntry.pseudonym_key == key,
            LeaderboardEntry.user_id != user.id,
        )
    )
    if taken is not None:
        raise Conflict(f"Someone on this leaderboard is already called {name}; choose another.")
    entry = my_entry(session, lab=lab, user=user)
    if entry is None:
        entry = LeaderboardEntry(lab_id=lab.id, user_id=user.id, pseudonym=name, pseudonym_key=key)
        session.add(entry)
    else:
        entry.pseudonym, entry.pseudonym_key = name, key
    session.flush()
    return entry


def leave_leaderboard(session: Session, *, lab: Lab, user: User) -> bool:
    entry = my_entry(session, lab=lab, user=user)
    if entry is None:
        return False
    session.delete(entry)
    session.flush()
    return True


def my_entry(session: Session, *, lab: Lab, user: User) -> LeaderboardEntry | None:
    return session.scalar(
        select(LeaderboardEntry).where(
            LeaderboardEntry.lab_id == lab.id, LeaderboardEntry.user_id == user.id
        )
    )


def leaderboard(session: Session, *, lab: Lab, viewer_id: int | None = None) -> list[Board]:
    """One board per GPU model with at least one entry, the busiest first. A team is one place:
    its submissions count for every member of their moment, and it shows under the pseudonym
    of its member who opted in first."""
    entries = {
        e.user_id: e
        for e in session.scalars(select(LeaderboardEntry).where(LeaderboardEntry.lab_id == lab.id))
    }
    if not entries:
        return []
    results = timed_results(session, lab=lab)
    teams = as_dict(
        session.execute(
            select(Submission.id, Submission.team_id).where(
                Submission.lab_id == lab.id, Submission.team_id.is_not(None)
            )
        )
    )
    credited: dict[int, set[int]] = {sid: {r.user_id} for sid, r in results.items()}
    for sid, uid in session.execute(
        select(SubmissionCredit.submission_id, SubmissionCredit.user_id)
        .join(Submission, Submission.id == SubmissionCredit.submission_id)
        .where(Submission.lab_id == lab.id)
    ):
        if sid in credited:
            credited[sid].add(uid)

    def competitor(result: TimedResult) -> tuple[str, int]:
        team = teams.get(result.submission_id)
        return ("team", team) if team is not None else ("student", result.user_id)

    shown = {sid: r for sid, r in results.items() if credited[sid] & set(entries)}
    models = sorted({r.gpu_model for r in shown.values()})
    boards = []
    for model in models:
        best: dict[tuple[str, int], TimedResult] = {}
        for r in shown.values():
            if r.gpu_model != model or not r.all_passed:
                continue
            key = competitor(r)
            if key not in best or r.median_ms < best[key].median_ms:
                best[key] = r
        ordered = sorted(best.values(), key=lambda r: (r.median_ms, r.submission_id))
        places = []
        for i, r in enumerate(ordered):
            people = credited[r.submission_id]
            first = min((entries[u] for u in people if u in entries), key=lambda e: e.id)
            places.append(
                Place(
                    rank=i + 1,
                    pseudonym=first.pseudonym,
                    median_ms=r.median_ms,
                    is_you=viewer_id in people,
                )
            )
        if places:
            boards.append(Board(gpu_model=model, places=places))
    return sorted(boards, key=lambda b: -len(b.places))
