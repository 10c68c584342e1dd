"""After each kind of attack, a matmul-tiled worker grades the next correct submission normally.

Through the real worker (grade_job) on the built-in matmul-tiled lab, with timing and the
sanitizer on: an attack, then the lab's tiled reference. The time the correct submission took
is printed (the issue's bar is 15 s); only that it was graded correctly is asserted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi", reason="needs the web stack (install the wheels on a GPU host)")

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.core.database import utcnow  # noqa: E402
from app.core.settings import get_settings  # noqa: E402
from app.courses.models import Role  # noqa: E402
from app.courses.service import add_lab, create_course  # noqa: E402
from app.grading.worker import Outcome, grade_job  # noqa: E402
from app.jobs.gpu_probe import run_unavailable_reason  # noqa: E402
from app.submissions.models import CaseResult, GradingJob, Status, Submission  # noqa: E402
from app.submissions.service import create_submission  # noqa: E402
from graders.spec import load_builtin_lab  # noqa: E402
from tests.app.conftest import make_member, unique  # noqa: E402
from tests.security.hostile import KERNELS_DIR  # noqa: E402

ATTACKS = [
    "replay_cached_output",  # timing replayed
    "skips_unchecked_launches",  # timing skipped
    "sanitizer_only_hang",  # a hang only under compute-sanitizer
    "unguarded_tile_loads",  # reads past the inputs
    "matmul_printf_flood",  # printf that the host expands for minutes
]


@pytest.fixture
def gpu_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KERNELGRADER_RUN_ON_GPU", "true")
    get_settings.cache_clear()
    run_unavailable_reason.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()
    run_unavailable_reason.cache_clear()


def _grade(session: Session, lab, user, source: str) -> tuple[Submission, Outcome, float]:  # noqa: ANN001
    intake = create_submission(
        session, user=user, course=lab.course, lab=lab.row, filename="k.cu",
        data=source.encode(), now=utcnow(),
    )  # fmt: skip
    session.commit()
    began = time.monotonic()
    outcome = grade_job(intake.submission.id, intake.job.id, me="attack-test:1")
    took = time.monotonic() - began
    session.expire_all()
    return session.get_one(Submission, intake.submission.id), outcome, took


class _Lab:
    def __init__(self, course, row) -> None:  # noqa: ANN001
        self.course, self.row = course, row


@pytest.mark.gpu
@pytest.mark.parametrize("attack", ATTACKS)
def test_the_worker_grades_the_next_correct_submission_after_an_attack(
    gpu_worker: None, session: Session, attack: str
) -> None:
    assert run_unavailable_reason() is None
    course = create_course(session, slug=unique("attacks"), title="Attacks")
    lab = _Lab(course, add_lab(session, course=course, ref="matmul-tiled"))
    student = make_member(session, course, Role.student)
    session.commit()
    hostile = (KERNELS_DIR / f"{attack}.cu").read_text(encoding="utf-8")
    bad, outcome, bad_took = _grade(session, lab, student.user, hostile)
    assert outcome is Outcome.graded and bad.status == Status.graded.value, bad.status_message
    assert bad.score is not None and bad.score < bad.max_score
    good_source = load_builtin_lab("matmul-tiled").reference("tiled").source
    good, outcome, took = _grade(session, lab, student.user, good_source)
    print(f"{attack}: the attack took {bad_took:.1f} s; the next correct one {took:.1f} s")
    assert outcome is Outcome.graded and good.status == Status.graded.value
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == good.id)).one()
    rows = session.scalars(select(CaseResult).where(CaseResult.job_id == job.id)).all()
    assert rows and all(r.passed for r in rows), [(r.name, r.message) for r in rows]
