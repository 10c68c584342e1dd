"""The fleet's policy, a pure function: each threshold on both sides, and the ties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.fleet.policy import (
    Borrowed,
    Deadline,
    Demand,
    ModelPlan,
    NoGpu,
    Phase,
    PolicySettings,
    UploadCurve,
    minutes,
    plan_fleet,
)

NOW = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)
SETTINGS = PolicySettings(
    floor=0,
    ceiling=4,
    jobs_per_worker=6,
    lead_seconds=7200,
    idle_seconds=600,
    rush_workers=1,
    grading_seconds=30,
    no_gpu_retry_seconds=1800,
)


def plan_of(
    model: str = "",
    *,
    settings: PolicySettings = SETTINGS,
    demand: Demand | None = None,
    borrowed: list[Borrowed] | None = None,
    deadlines: list[Deadline] | None = None,
    **extra: object,
) -> ModelPlan:
    plan = plan_fleet(
        now=NOW,
        demand={model: demand} if demand else {},
        borrowed=borrowed or [],
        deadlines=deadlines or [],
        settings=settings,
        **extra,  # type: ignore[arg-type]
    )
    found = plan.of(model)
    assert found is not None, plan
    return found


def running(key: str, idle: float | None, model: str = "") -> Borrowed:
    return Borrowed(key, model, Phase.running, NOW - timedelta(hours=1), idle_seconds=idle)


def pending(key: str, minutes_ago: float, model: str = "") -> Borrowed:
    return Borrowed(key, model, Phase.pending, NOW - timedelta(minutes=minutes_ago))


def due_in(seconds: float, *, model: str = "", curve: UploadCurve | None = None,
           students: int = 100, course_id: int = 1) -> Deadline:  # fmt: skip
    return Deadline(
        course_id=course_id,
        label="gpu101/matmul",
        model=model,
        due_at=NOW + timedelta(seconds=seconds),
        students=students,
        curve=curve,
    )


# --- the queue -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "wanted"), [(1, 1), (6, 1), (7, 2), (12, 2), (13, 3)]
)  # fmt: skip
def test_one_worker_per_jobs_per_worker_waiting_or_being_graded(jobs: int, wanted: int) -> None:
    plan = plan_of(demand=Demand(to_compile=jobs - jobs // 2, in_progress=jobs // 2))
    assert (plan.needed, plan.wanted, plan.submit) == (wanted, wanted, wanted)
    assert f"one worker per 6 makes {wanted}." in plan.reasons[0].text


def test_every_kind_of_waiting_job_counts() -> None:
    plan = plan_of(demand=Demand(to_compile=2, to_run=3, in_progress=2))
    assert plan.needed == 2  # 7 jobs
    assert plan.reasons[0].text == (
        "7 jobs (2 to compile, 3 compiled, waiting for a GPU, 2 being graded): one worker per 6 "
        "makes 2."
    )


def test_an_empty_queue_with_nothing_due_has_no_plan() -> None:
    plan = plan_fleet(now=NOW, demand={"": Demand()}, borrowed=[], deadlines=[], settings=SETTINGS)
    assert plan.models == []


def test_models_are_planned_apart() -> None:
    plan = plan_fleet(
        now=NOW,
        demand={"h100": Demand(to_run=7), "a100": Demand(to_compile=1)},
        borrowed=[],
        deadlines=[],
        settings=SETTINGS,
    )
    assert [(m.model, m.wanted) for m in plan.models] == [("a100", 1), ("h100", 2)]


@pytest.mark.parametrize(("jobs", "wanted", "capped"), [(24, 4, False), (25, 4, True)])
def test_the_ceiling_caps_what_is_borrowed(jobs: int, wanted: int, capped: bool) -> None:
    plan = plan_of(demand=Demand(to_compile=jobs))
    assert plan.wanted == wanted
    assert plan.needed == -(-jobs // 6)
    assert any("ceiling of 4" in r.text for r in plan.reasons) is capped


def test_workers_not_borrowed_serve_first() -> None:
    plan = plan_of(demand=Demand(to_compile=13), fixed={"": 2})
    assert (plan.needed, plan.wanted) == (3, 1)
    assert "2 workers not borrowed serve labs that name no GPU model already." in [
        r.text for r in plan.reasons
    ]
    assert plan_of(demand=Demand(to_compile=13), fixed={"": 3}).wanted == 0
    assert plan_of(demand=Demand(to_compile=13), fixed={"": 4}).wanted == 0


# --- the floor -----------------------------------------------------------------------------


def test_the_floor_holds_while_a_lab_that_needs_the_model_is_due() -> None:
    floor = PolicySettings(**{**SETTINGS.__dict__, "floor": 1})
    due_next_week = due_in(7 * 86400, model="h100")
    assert plan_of("h100", settings=floor, deadlines=[due_next_week]).wanted == 1
    # Due a second ago: no lab of that model is due any more, so nothing is kept.
    past = Deadline(1, "gpu101/matmul", "h100", NOW - timedelta(seconds=1), 100)
    plan = plan_fleet(now=NOW, demand={}, borrowed=[], deadlines=[past], settings=floor)
    assert plan.models == []
    # Jobs of a model with no lab due: the queue alone decides, no floor.
    no_lab = plan_of("a100", settings=floor, demand=Demand(to_compile=0, in_progress=0),
                     borrowed=[running("slurm:1", 1000, "a100")])  # fmt: skip
    assert no_lab.wanted == 0 and no_lab.drain == ["slurm:1"]


def test_the_floor_is_not_added_to_the_queue() -> None:
    floor = PolicySettings(**{**SETTINGS.__dict__, "floor": 2})
    plan = plan_of(settings=floor, demand=Demand(to_compile=13), deadlines=[due_in(86400)])
    assert plan.wanted == 3


# --- the rush before a due date ------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "wanted"),
    [(7201, 0), (7200, 1), (1, 1), (0, 0), (-1, 0)],
)
def test_the_lead_time_before_a_due_date(seconds: float, wanted: int) -> None:
    plan = plan_fleet(
        now=NOW, demand={}, borrowed=[], deadlines=[due_in(seconds)], settings=SETTINGS
    )
    got = plan.of("")
    assert (got.wanted if got else 0) == wanted
    if wanted:
        assert got is not None
        assert "with no earlier term to learn from: 1 worker." in got.reasons[0].text


def test_last_terms_busiest_bin_ahead_sets_the_rush() -> None:
    # 10-minute bins before the due date, the last first: 40 uploads in the last 10 minutes,
    # 300 an hour before it.
    counts = (40, 20, 10, 10, 10, 300, 0, 0, 0, 0, 0, 0)
    curve = UploadCurve(students=100, bin_seconds=600, counts=counts, grading_seconds=60)
    # 45 min left: bins 0..4 are ahead (the one now falls in whole), the 300 has passed.
    plan = plan_of(deadlines=[due_in(45 * 60, curve=curve)])
    # 40 uploads in 600 s, 60 s each: 4 at once; one worker per 6: 1.
    assert plan.wanted == 1
    assert "peaked at 40 uploads in 10 min" in plan.reasons[0].text
    assert "about 4.0 jobs at once at 60 s a grading, so 1 worker." in plan.reasons[0].text
    # 50 min left: the bin [50, 60) min before the due date is ahead too.
    plan = plan_of(deadlines=[due_in(50 * 60, curve=curve)])
    assert (plan.needed, plan.wanted) == (5, 4)  # 300 / 600 s * 60 s = 30 at once; ceiling 4
    # Just under 50 min: not yet.
    assert plan_of(deadlines=[due_in(50 * 60 - 1, curve=curve)]).wanted == 1


def test_the_rush_scales_with_the_students_enrolled_now() -> None:
    curve = UploadCurve(students=100, bin_seconds=600, counts=(60,), grading_seconds=60)
    # 60 in 10 min at 60 s: 6 at once -> 1 worker; with twice the students, 12 -> 2.
    assert plan_of(deadlines=[due_in(300, curve=curve, students=100)]).wanted == 1
    assert plan_of(deadlines=[due_in(300, curve=curve, students=200)]).wanted == 2
    assert plan_of(deadlines=[due_in(300, curve=curve, students=201)]).wanted == 3


def test_a_curve_without_grading_seconds_takes_the_setting() -> None:
    curve = UploadCurve(students=100, bin_seconds=600, counts=(240,), grading_seconds=None)
    # 240 in 600 s at the setting's 30 s: 12 at once -> 2.
    assert plan_of(deadlines=[due_in(300, curve=curve)]).wanted == 2


def test_a_quiet_last_term_borrows_nothing_for_the_rush() -> None:
    curve = UploadCurve(students=100, bin_seconds=600, counts=(0, 0, 0), grading_seconds=60)
    plan = plan_fleet(
        now=NOW, demand={}, borrowed=[], deadlines=[due_in(300, curve=curve)], settings=SETTINGS
    )
    got = plan.of("")
    assert got is not None and got.wanted == 0
    assert "peaked at 0 uploads" in got.reasons[0].text


def test_labs_due_together_add_up_and_the_queue_takes_over_when_larger() -> None:
    two = [due_in(600, course_id=1), due_in(900, course_id=2)]
    assert plan_of(deadlines=two).wanted == 2
    assert plan_of(deadlines=two, demand=Demand(to_compile=13)).wanted == 3
    assert plan_of(deadlines=two, demand=Demand(to_compile=6)).wanted == 2


def test_a_lab_is_named_only_to_its_own_courses_staff() -> None:
    (reason,) = plan_of(deadlines=[due_in(600, course_id=7)]).reasons
    assert reason.for_courses({7}).startswith("gpu101/matmul is due in 10 min")
    assert reason.for_courses(None).startswith("gpu101/matmul")
    other = reason.for_courses({8})
    assert other.startswith("A lab is due in 10 min") and "gpu101" not in other


# --- letting workers go --------------------------------------------------------------------


@pytest.mark.parametrize(("idle", "drained"), [(599.9, False), (600, True), (601, True)])
def test_an_idle_worker_drains_at_the_idle_time(idle: float, drained: bool) -> None:
    plan = plan_of(borrowed=[running("slurm:1", idle)], deadlines=[due_in(86400)])
    assert plan.wanted == 0 and plan.held == 1
    assert plan.drain == (["slurm:1"] if drained else [])
    if not drained:
        assert "1 more than needed, kept until idle for 10 min" in plan.reasons[-1].text


def test_a_worker_the_plan_wants_stays_however_idle() -> None:
    plan = plan_of(demand=Demand(to_compile=1), borrowed=[running("slurm:1", 86400)])
    assert plan.drain == [] and plan.submit == 0


def test_the_most_idle_drain_first_and_only_the_excess() -> None:
    workers = [running("slurm:1", 700), running("slurm:2", 5000), running("slurm:3", 900)]
    plan = plan_of(demand=Demand(to_compile=6), borrowed=workers)
    assert plan.wanted == 1 and plan.drain == ["slurm:2", "slurm:3"]


def test_a_worker_not_heard_from_yet_is_not_drained() -> None:
    plan = plan_of(borrowed=[running("slurm:1", None)], deadlines=[due_in(86400)])
    assert plan.drain == []


def test_pending_jobs_go_first_newest_first() -> None:
    workers = [pending("slurm:1", 30), pending("slurm:2", 5), running("slurm:3", 5000)]
    plan = plan_of(demand=Demand(to_compile=6), borrowed=workers)
    assert plan.wanted == 1
    assert plan.cancel == ["slurm:2", "slurm:1"] and plan.drain == []
    plan = plan_of(demand=Demand(to_compile=7), borrowed=workers)
    assert plan.cancel == ["slurm:2"] and plan.drain == []


def test_starting_workers_are_neither_cancelled_nor_drained() -> None:
    starting = Borrowed("slurm:1", "", Phase.starting, NOW - timedelta(minutes=1))
    plan = plan_of(borrowed=[starting], deadlines=[due_in(86400)])
    assert plan.held == 1 and plan.cancel == [] and plan.drain == []


def test_draining_workers_are_not_counted() -> None:
    draining = Borrowed("slurm:1", "", Phase.draining, NOW - timedelta(hours=1), 700.0)
    plan = plan_of(demand=Demand(to_compile=1), borrowed=[draining])
    assert (plan.held, plan.submit) == (0, 1)
    assert "1 draining: finishing a task, then exiting." in [r.text for r in plan.reasons]


def test_held_workers_are_subtracted_from_what_is_submitted() -> None:
    plan = plan_of(demand=Demand(to_compile=13), borrowed=[pending("slurm:1", 1)])
    assert (plan.wanted, plan.held, plan.submit) == (3, 1, 2)


def test_nothing_is_submitted_for_a_model_the_backend_cannot_place() -> None:
    why = "No Slurm constraint is set for GPU model h100."
    plan = plan_of("h100", demand=Demand(to_run=3), cannot_borrow={"h100": why})
    assert plan.wanted == 1 and plan.submit == 0
    assert plan.reasons[-1].text == why


# --- a worker that came up without a GPU ---------------------------------------------------


@pytest.mark.parametrize(("ago", "counted"), [(1799, False), (1800, True)])
def test_jobs_waiting_for_a_gpu_wait_out_a_worker_that_had_none(ago: float, counted: bool) -> None:
    no_gpu = {"": NoGpu(at=NOW - timedelta(seconds=ago), note="no CUDA driver.")}
    plan = plan_of(demand=Demand(to_compile=1, to_run=12), no_gpu=no_gpu)
    assert plan.wanted == (3 if counted else 1)  # 13 jobs, or the 1 to compile
    if not counted:
        assert "came up unable to run kernels (no CUDA driver): the 12 jobs" in (
            plan.reasons[0].text
        )
        assert "not counted for another 1 s; compiling still is." in plan.reasons[0].text


def test_minutes_reads_as_people_write_spans() -> None:
    assert [minutes(s) for s in (0, 59, 60, 3599, 3600, 3660, 7200)] == [
        "0 s", "59 s", "1 min", "59 min", "1 h", "1 h 1 min", "2 h"
    ]  # fmt: skip
