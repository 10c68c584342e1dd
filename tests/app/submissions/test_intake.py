"""Intake at its limits (the file, its name, the lab's state), who may see a submission, regrades
and the queue's order, each refusal's sentence whole.

Written against the survivors of scripts/mutation.py (app/submissions/service.py).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.orm import Session

from app.core.errors import Closed, Conflict, Forbidden, Invalid, NotFound, TooLarge
from app.core.limits import size_words
from app.core.timefmt import when_text
from app.courses.models import LatePolicy, Role
from app.courses.service import add_lab, enroll
from app.jobs.workers import queued_message
from app.policy.rules import grant_extension
from app.submissions import service
from app.submissions.models import GradingJob, JobState, Priority, Status, Submission
from app.teams.models import SubmissionCredit, Team
from tests.app.conftest import World, make_member, make_world
from tests.app.factories import make_submission

NOW = datetime(2030, 3, 1, 12, 0, tzinfo=UTC)
KERNEL = b'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("C:\\Users\\ada\\scale.cu", "scale.cu"),
        ("/home/ada/labs/scale.cu", "scale.cu"),
        ("sc\x07ale\n.cu", "scale.cu"),
        ("  spaced.cu  ", "spaced.cu"),
        ("", "submission.cu"),
        (None, "submission.cu"),
        ("dir/", "submission.cu"),
        ("x" * 150 + ".cu", "x" * 100),
    ],
)
def test_a_filename_is_shown_as_its_last_part_printable_and_short(
    given: str | None, shown: str
) -> None:
    assert service.display_filename(given) == shown


def test_the_source_at_the_limit_passes_and_one_byte_more_is_refused() -> None:
    assert service.check_source(b"/" * 2048, limit=2048) == "/" * 2048
    with pytest.raises(TooLarge) as sized:
        service.check_source(b"/" * 2049, limit=2048, size=4096)
    assert str(sized.value) == (
        "The file is 4096 bytes (4 KiB), over the limit of 2048 bytes (2 KiB); submit only "
        "the kernel's .cu source file."
    )
    for size in (None, 2048):  # the size unknown, or not past the limit: what was read is
        with pytest.raises(TooLarge) as unsized:
            service.check_source(b"/" * 2049, limit=2048, size=size)
        assert str(unsized.value) == (
            "The file is larger than the limit of 2048 bytes (2 KiB); submit only the kernel's "
            ".cu source file."
        )


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        (b"", "The file is empty; choose the .cu file that holds your kernel."),
        (b" \n\t ", "The file is empty; choose the .cu file that holds your kernel."),
        (
            b"int x;\xff",
            "The file is not UTF-8 text (byte 6 cannot be decoded); submit the .cu source "
            "file, not a binary.",
        ),
        (
            b"int\x00 x;",
            "The file contains NUL bytes, so it is not source text; submit the .cu file.",
        ),
    ],
)
def test_a_file_that_is_not_source_text_is_refused_with_its_sentence(
    data: bytes, sentence: str
) -> None:
    with pytest.raises(Invalid) as refused:
        service.check_source(data, limit=1024)
    assert str(refused.value) == sentence


def test_only_a_cu_file_is_taken_and_a_nameless_upload_is_source() -> None:
    for fine in (None, "", "  ", "scale.cu", "SCALE.CU", "dir/k.cu"):
        service.check_filename(fine)
    with pytest.raises(Invalid) as refused:
        service.check_filename("dir/scale.cuh")
    assert str(refused.value) == (
        "scale.cuh is not a .cu file; submit the CUDA source file of your kernel, whose name "
        "ends in .cu (rename it if it holds CUDA source under another name)."
    )


def _submit(session: Session, world: World, *, who: object = None, **kw: object) -> service.Intake:
    args: dict[str, object] = dict(
        user=who or world.student.user,
        course=world.course,
        lab=world.lab,
        filename="dir/scale.cu",
        data=KERNEL,
        now=NOW,
    )
    args.update(kw)
    return service.create_submission(session, **args)  # type: ignore[arg-type]


def test_an_upload_is_stored_with_its_hash_name_time_and_a_queued_job(
    session: Session, world: World
) -> None:
    world.lab.due_at = NOW
    intake = _submit(session, world)
    sub, job = intake.submission, intake.job
    assert (intake.submission_id, intake.job_id, intake.lab_id) == (sub.id, job.id, world.lab.id)
    assert sub.sha256 == hashlib.sha256(KERNEL).hexdigest() and sub.source_text == KERNEL.decode()
    assert (sub.filename, sub.created_at, sub.late, sub.status) == (
        "scale.cu",
        NOW,
        False,
        "queued",
    )
    assert sub.max_score == world.lab.max_score and sub.user_id == world.student.user.id
    assert sub.status_message.startswith("Waiting for a worker to compile it.")
    assert (job.submission_id, job.queued_at, job.state) == (sub.id, NOW, JobState.queued.value)
    assert intake.stored(session)
    events = service.events_of(session, submission=sub)
    assert [e.status for e in events] == ["queued"]
    late = _submit(session, world, now=NOW + timedelta(microseconds=1)).submission
    assert late.late is True


def test_a_lab_not_yet_open_removed_or_closed_says_so(session: Session, world: World) -> None:
    world.lab.release_at = NOW + timedelta(seconds=1)
    with pytest.raises(Closed) as early:
        _submit(session, world)
    assert str(early.value) == (
        f"{world.lab.title} opens for submissions at {when_text(world.lab.release_at)}; submit "
        "again after that."
    )
    _submit(session, world, who=world.ta.user)  # staff try it out before release
    world.lab.release_at = NOW
    _submit(session, world)  # open from exactly its release
    world.lab.due_at, world.lab.late_policy = NOW, LatePolicy.refuse.value
    _submit(session, world)  # exactly at the due date: on time
    with pytest.raises(Closed) as closed:
        _submit(session, world, now=NOW + timedelta(microseconds=1))
    assert str(closed.value) == (
        f"{world.lab.title} was due at {when_text(NOW)} and does not accept late submissions. "
        "Ask the course staff if you need an extension."
    )
    grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=world.student.user,
        due_at=NOW + timedelta(hours=1),
        granted_by=None,
    )
    with pytest.raises(Closed) as extended:
        _submit(session, world, now=NOW + timedelta(hours=2))
    assert f"was due at {when_text(NOW + timedelta(hours=1))} (your extension) and" in str(
        extended.value
    )
    world.lab.archived_at = NOW
    with pytest.raises(Closed) as removed:
        _submit(session, world, who=world.ta.user)
    assert str(removed.value) == (
        f"The course staff removed {world.lab.slug}, so it takes no more submissions; your "
        "earlier submissions are kept."
    )


def test_a_closed_lab_says_how_late_days_stand(session: Session, world: World) -> None:
    world.course.late_days = 2
    world.lab.due_at, world.lab.late_policy = NOW, LatePolicy.refuse.value
    # Within the two days: taken, and late.
    assert _submit(session, world, now=NOW + timedelta(days=1)).submission.late is True
    with pytest.raises(Closed) as beyond:
        _submit(session, world, now=NOW + timedelta(days=3))
    assert str(beyond.value).endswith(
        "does not accept late submissions; your late days cover 2 days of it. Ask the course "
        "staff if you need an extension."
    )


def test_a_bad_name_or_file_stores_nothing(session: Session, world: World) -> None:
    for kw in ({"filename": "k.txt"}, {"data": b""}):
        with pytest.raises(Invalid):
            _submit(session, world, **kw)
    assert service.submissions_of(session, lab_ids=[world.lab.id]) == []


# --- who sees what ---


def test_a_submission_is_seen_by_its_author_and_the_courses_staff_only(
    session: Session, world: World
) -> None:
    sub = make_submission(session, user=world.student.user, lab=world.lab)[0]
    session.flush()
    assert service.visible_submission(session, user=world.student.user, submission_id=sub.id) == (
        sub,
        False,
    )
    assert service.visible_submission(session, user=world.ta.user, submission_id=sub.id) == (
        sub,
        True,
    )
    assert service.is_staff_for(session, world.instructor.user, sub)
    assert not service.is_staff_for(session, world.student.user, sub)
    assert not service.is_staff_for(session, world.outsider.user, sub)
    for who in (world.other_student.user, world.outsider.user):
        with pytest.raises(NotFound) as hidden:
            service.visible_submission(session, user=who, submission_id=sub.id)
        assert str(hidden.value) == f"There is no submission {sub.id} that you may see."
    with pytest.raises(NotFound):
        service.get_visible_submission(session, user=world.ta.user, submission_id=sub.id + 999)
    assert service.source_text_of(session, submission=sub) == sub.source_text


# --- regrades and the queue ---


def test_a_regrade_is_for_staff_and_waits_for_a_grading_under_way(
    session: Session, world: World
) -> None:
    sub, first = make_submission(
        session, user=world.student.user, lab=world.lab, job_state=JobState.queued
    )
    session.flush()
    with pytest.raises(Forbidden) as refused:
        service.regrade(session, user=world.student.user, submission=sub, now=NOW)
    assert str(refused.value) == "Only the course's staff may regrade a submission."
    for state in (JobState.queued, JobState.started):
        first.state = state.value
        session.flush()
        with pytest.raises(Conflict) as busy:
            service.regrade(session, user=world.ta.user, submission=sub, now=NOW)
        assert str(busy.value) == (
            f"Submission {sub.id} is already waiting or being graded; wait for its result "
            "before regrading it."
        )


def test_a_regrade_replaces_a_job_still_waiting_for_a_gpu(session: Session, world: World) -> None:
    sub, first = make_submission(
        session, user=world.student.user, lab=world.lab, job_state=JobState.waiting_gpu
    )
    done_sub, done_job = make_submission(session, user=world.student.user, lab=world.lab)
    session.flush()
    job = service.regrade(session, user=world.ta.user, submission=sub, now=NOW)
    session.refresh(first)
    assert (first.state, first.finished_at, first.error) == (
        JobState.failed.value,
        NOW,
        "replaced by a regrade",
    )
    assert (job.submission_id, job.queued_at, job.id != first.id) == (sub.id, NOW, True)
    assert service.latest_job(session, submission=sub) is job
    assert sub.status == Status.queued.value
    assert sub.status_message.startswith(f"Queued again for a regrade by {world.ta.user.email}.")
    assert service.regrade(session, user=world.ta.user, submission=done_sub, now=NOW).id
    session.refresh(done_job)
    assert done_job.state == JobState.done.value  # a finished job stays as it was


def test_the_queue_position_counts_the_jobs_queued_before_it(
    session: Session, world: World
) -> None:
    def job(at: datetime, *, state: JobState = JobState.queued, **kw: object) -> GradingJob:
        made = make_submission(session, user=world.student.user, lab=world.lab, job_state=state)[1]
        made.queued_at = at
        for key, value in kw.items():
            setattr(made, key, value)
        session.flush()
        return made

    # Other tests leave queued jobs: count from a clean queue inside this test's transaction.
    session.execute(
        update(GradingJob)
        .where(GradingJob.state == JobState.queued.value)
        .values(state=JobState.failed.value)
    )
    job(NOW - timedelta(minutes=3))
    job(NOW - timedelta(minutes=2), priority=Priority.background.value)  # held back: not ahead
    job(NOW - timedelta(minutes=2), priority=Priority.background.value, sent_at=NOW)  # sent
    job(NOW - timedelta(minutes=1), state=JobState.started)  # taken: not waiting
    same_time = job(NOW)
    mine = job(NOW)
    assert service.queue_position(session, job=mine) == 3
    assert service.queue_position(session, job=same_time) == 3
    held = job(NOW, priority=Priority.background.value)
    assert service.queue_position(session, job=held) is None
    assert service.queue_position(session, job=job(NOW, state=JobState.started)) is None
    assert service.queue_position(session, job=None) is None


def test_lists_are_newest_first_bounded_and_by_author(session: Session, world: World) -> None:
    mine = [make_submission(session, user=world.student.user, lab=world.lab)[0] for _ in range(3)]
    theirs = make_submission(session, user=world.other_student.user, lab=world.lab)[0]
    session.flush()
    ids = [s.id for s in service.submissions_of(session, lab_ids=[world.lab.id])]
    assert ids == sorted([*(s.id for s in mine), theirs.id], reverse=True)
    assert [s.id for s in service.submissions_of(session, lab_ids=[world.lab.id], limit=2)] == (
        ids[:2]
    )
    own = service.submissions_of(session, lab_ids=[world.lab.id], user_id=world.student.user.id)
    assert [s.id for s in own] == [s.id for s in reversed(mine)]
    assert service.submissions_of(session, lab_ids=[]) == []
    assert session.scalar(select(GradingJob.id).limit(1)) is not None


# --- teams, staff notes, and what lists load ---


def test_a_team_upload_is_credited_to_the_other_members_who_see_it(
    session: Session, world: World
) -> None:
    world.lab.team_size = 2
    world.pair_up(session, now=NOW)
    sub = _submit(session, world).submission
    credits = session.scalars(
        select(SubmissionCredit.user_id).where(SubmissionCredit.submission_id == sub.id)
    ).all()
    assert list(credits) == [world.other_student.user.id] and sub.team_id is not None
    # The upload took its turn on the team's row without changing it.
    names = session.execute(select(Team.id, Team.name).where(Team.lab_id == world.lab.id)).all()
    assert [(row.id, row.name) for row in names] == [(sub.team_id, "Pair")]
    mate = world.other_student.user
    assert service.visible_submission(session, user=mate, submission_id=sub.id) == (sub, False)
    # A credit on another submission shows this one to nobody else.
    stranger = make_member(session, world.course, Role.student).user
    other = make_submission(session, user=world.student.user, lab=world.lab)[0]
    session.flush()
    session.add(SubmissionCredit(submission_id=other.id, user_id=stranger.id))
    session.flush()
    with pytest.raises(NotFound):
        service.visible_submission(session, user=stranger, submission_id=sub.id)


def test_staff_of_another_course_are_not_staff_here(session: Session, world: World) -> None:
    sub = make_submission(session, user=world.student.user, lab=world.lab)[0]
    elsewhere = make_world(session)
    enroll(session, user=elsewhere.ta.user, course=world.course, role=Role.student)
    session.flush()
    assert not service.is_staff_for(session, elsewhere.ta.user, sub)
    assert service.is_staff_for(session, world.ta.user, sub)


def test_with_no_worker_alive_the_staff_read_what_to_start(session: Session, world: World) -> None:
    note = queued_message(session, "x", now=NOW)[1]
    assert note  # nobody has beaten a heartbeat in 2030
    sub = _submit(session, world).submission
    assert sub.status_staff_note == note
    done = make_submission(session, user=world.student.user, lab=world.lab)[0]
    session.flush()
    service.regrade(session, user=world.ta.user, submission=done, now=NOW)
    assert done.status_staff_note == note


def test_a_status_without_words_records_none() -> None:
    class Sink:
        def __init__(self) -> None:
            self.added: list[object] = []

        def add(self, row: object) -> None:
            self.added.append(row)

    sub = Submission(id=7)
    sink = Sink()
    service.set_status(sink, sub, Status.running)  # type: ignore[arg-type]
    assert (sub.status, sub.status_message, sub.status_staff_note) == ("running", "", "")
    service.set_status(sink, sub, Status.error, "Failed.", staff_note="disk full")  # type: ignore[arg-type]
    first, second = sink.added
    assert (first.status, first.message, first.staff_note) == ("running", "", "")  # type: ignore[attr-defined]
    assert (second.message, second.staff_note) == ("Failed.", "disk full")  # type: ignore[attr-defined]


def test_a_regrade_replaces_only_this_submissions_waiting_job(
    session: Session, world: World
) -> None:
    sub = make_submission(
        session, user=world.student.user, lab=world.lab, job_state=JobState.waiting_gpu
    )[0]
    other_job = make_submission(
        session, user=world.student.user, lab=world.lab, job_state=JobState.waiting_gpu
    )[1]
    session.flush()
    service.regrade(session, user=world.ta.user, submission=sub, now=NOW)
    session.refresh(other_job)
    assert other_job.state == JobState.waiting_gpu.value


def test_the_first_job_in_the_queue_is_first(session: Session, world: World) -> None:
    session.execute(
        update(GradingJob)
        .where(GradingJob.state == JobState.queued.value)
        .values(state=JobState.failed.value)
    )
    first = make_submission(
        session, user=world.student.user, lab=world.lab, job_state=JobState.queued
    )[1]
    first.queued_at, first.sent_at = NOW - timedelta(minutes=1), None
    second = make_submission(
        session, user=world.student.user, lab=world.lab, job_state=JobState.queued
    )[1]
    second.queued_at = NOW
    session.flush()
    assert service.queue_position(session, job=first) == 1
    assert service.queue_position(session, job=second) == 2  # the first, though never sent


def test_a_list_loads_only_its_columns_and_at_most_500(session: Session, world: World) -> None:
    for _ in range(501):
        make_submission(session, user=world.student.user, lab=world.lab)
    session.flush()
    session.expire_all()
    listed = service.submissions_of(session, lab_ids=[world.lab.id])
    assert len(listed) == 500
    with pytest.raises(InvalidRequestError):
        _ = listed[0].source_text  # a list never loads a source


def test_an_intake_whose_job_is_gone_is_not_stored(session: Session, world: World) -> None:
    make_submission(session, user=world.student.user, lab=world.lab)  # another job is there
    intake = _submit(session, world)
    assert intake.stored(session)
    session.delete(intake.job)
    session.flush()
    assert not intake.stored(session)


def test_sizes_are_shown_in_whole_kib_rounded_and_mib_past_one() -> None:
    sizes = (1024, 1536, 2047, 262144, 1024 * 1024 - 1, 1024 * 1024, 20 * 1024 * 1024 + 300)
    assert [size_words(n) for n in sizes] == [
        "1 KiB",
        "2 KiB",
        "2 KiB",
        "256 KiB",
        "1024 KiB",
        "1.0 MiB",
        "20.0 MiB",
    ]


def test_a_closed_lab_says_one_late_day_or_none_left(session: Session, world: World) -> None:
    world.course.late_days = 1
    world.lab.due_at, world.lab.late_policy = NOW, LatePolicy.refuse.value
    with pytest.raises(Closed) as one:
        _submit(session, world, now=NOW + timedelta(days=2))
    assert "; your late days cover 1 day of it. Ask" in str(one.value)
    world.lab.late_day_cap = 0  # this lab takes none of the course's late days
    with pytest.raises(Closed) as none:
        _submit(session, world, now=NOW + timedelta(hours=1))
    assert "; you have no late days left for it. Ask" in str(none.value)


def test_late_days_spent_on_another_lab_leave_none_for_this_one(
    session: Session, world: World
) -> None:
    from app.latedays.models import LateDayCharge

    world.course.late_days = 1
    world.lab.due_at, world.lab.late_policy = NOW, LatePolicy.refuse.value
    elsewhere = add_lab(session, course=world.course, ref="hadamard", due_at=NOW)
    session.add(
        LateDayCharge(
            course_id=world.course.id, lab_id=elsewhere.id, user_id=world.student.user.id, days=1
        )
    )
    session.flush()
    with pytest.raises(Closed) as refused:
        _submit(session, world, now=NOW + timedelta(hours=1))
    assert "; you have no late days left for it. Ask" in str(refused.value)
    # Another student still has theirs.
    assert _submit(session, world, who=world.other_student.user, now=NOW + timedelta(hours=1))
