"""Which submission counts, with ties, and what a cell and a row add up to (no database).

Written against the survivors of scripts/mutation.py (app/gradebook).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from app.core.csv_out import safe_cell
from app.courses.models import ScorePolicy
from app.gradebook.service import GradebookRow, _number
from app.policy.counting import Counted, LabCell, Scored, counted_submission, lab_cell
from app.submissions.models import Status
from app.submissions.service import is_pending
from app.users.service import Student

T0 = datetime(2030, 3, 1, 12, 0, tzinfo=UTC)


def lab(policy: ScorePolicy) -> SimpleNamespace:
    return SimpleNamespace(score_policy=policy.value)


def counts(policy: ScorePolicy, subs: list[Scored]) -> tuple[float, bool, int] | None:
    """(score, late, submission id) of the submission that counts."""
    chosen = counted_submission(lab(policy), subs)  # type: ignore[arg-type]
    return None if chosen is None else (chosen.score, chosen.late, chosen.submission_id)


def scored(
    sid: int,
    score: float | None,
    *,
    minute: int = 0,
    late: bool = False,
    graded: bool = True,
    status: Status = Status.graded,
) -> Scored:
    at = T0 + timedelta(minutes=minute)
    return Scored(sid, 1, score, late, at, at if graded else None, status.value)


def test_best_counts_the_highest_score_ties_going_to_the_earlier_then_the_lower_id() -> None:
    subs = [scored(3, 7.0, minute=5, late=True), scored(2, 7.0, minute=1), scored(1, 5.0)]
    assert counts(ScorePolicy.best, subs) == (7.0, False, 2)
    same_time = [scored(9, 7.0, minute=1), scored(4, 7.0, minute=1)]
    assert counts(ScorePolicy.best, same_time) == (7.0, False, 4)
    # A compile error's missing score counts as 0, below any positive score.
    zero = [scored(5, None, minute=9), scored(6, 0.5, minute=1)]
    assert counts(ScorePolicy.best, zero) == (0.5, False, 6)


def test_last_counts_the_latest_graded_ties_going_to_the_higher_id() -> None:
    subs = [scored(1, 9.0, minute=1), scored(2, 3.0, minute=5, late=True)]
    assert counts(ScorePolicy.last, subs) == (3.0, True, 2)
    same_time = [scored(7, 2.0, minute=5), scored(8, 4.0, minute=5), scored(6, 6.0, minute=5)]
    assert counts(ScorePolicy.last, same_time) == (4.0, False, 8)
    compile_error = [scored(1, 9.0), scored(2, None, minute=3)]
    assert counts(ScorePolicy.last, compile_error) == (0.0, False, 2)


def test_last_goes_by_time_not_by_id() -> None:
    # A submission made later may have the lower id (a regrade's copy, an import).
    subs = [scored(5, 9.0, minute=1), scored(2, 3.0, minute=5)]
    assert counts(ScorePolicy.last, subs) == (3.0, False, 2)


def test_only_graded_submissions_count() -> None:
    for policy in ScorePolicy:
        subs = [scored(1, 4.0), scored(2, 9.0, minute=3, graded=False, status=Status.running)]
        assert counts(policy, subs) == (4.0, False, 1)
        assert counts(policy, [subs[1]]) is None
        assert counts(policy, []) is None


@pytest.mark.parametrize("status", list(Status))
def test_every_status_but_a_final_one_is_pending(status: Status) -> None:
    final = {Status.graded, Status.compile_error, Status.error}
    assert is_pending(scored(1, None, status=status)) is (status not in final)


def test_a_cell_counts_its_pending_submissions_beside_the_counted_one() -> None:
    subs = [
        scored(1, 4.0),
        scored(2, None, minute=1, graded=False, status=Status.queued),
        scored(3, None, minute=2, graded=False, status=Status.timing),
        scored(4, None, minute=3, graded=False, status=Status.error),
    ]
    cell = lab_cell(lab(ScorePolicy.best), subs)  # type: ignore[arg-type]
    assert cell.counted is not None and cell.counted.submission_id == 1
    assert cell.pending == 2 and cell.score == 4.0
    assert LabCell(None).score is None and LabCell(None).pending == 0


def test_a_row_adds_up_counted_scores_and_pending_submissions() -> None:
    row = GradebookRow(
        Student(1, "", "ada@uni.edu"),
        [LabCell(Counted(4.5, False, 1), 1), LabCell(None, 2), LabCell(Counted(3.0, True, 2))],
    )
    assert row.total == 7.5 and row.pending == 3
    assert row.user.display_name == "ada@uni.edu"
    assert Student(1, "Ada", "ada@uni.edu").display_name == "Ada"


def test_csv_cells_never_start_a_formula_and_numbers_are_short() -> None:
    for text in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"):
        assert safe_cell(text) == "'" + text
    assert safe_cell("Ada") == "Ada" and safe_cell("") == ""
    assert (_number(10.0), _number(2.5), _number(0.0)) == ("10", "2.5", "0")
