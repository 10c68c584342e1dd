"""/admin/fleet and `kernelgrader fleet status`: the plan per GPU model and why, each borrowed
worker's job and what Slurm says of it, the loop; /metrics carries what each model needs."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import delete, update
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.core.database import session_scope, utcnow
from app.fleet.models import BorrowedWorker, FleetRunner
from tests.app.conftest import make_world
from tests.app.fleet.slurm_bed import environment
from tests.app.fleet.test_routes import samples
from tests.app.scaled import settings_from
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio

_ids = itertools.count(int(time.time()) % 10**6 * 1000)
TOKEN = "metrics-token-for-the-tests-0123456789"
DRAINING = "idle 10 min or more, not needed: the plan wants 0 for GPU model h100, 1 held."


@pytest.fixture
def on_slurm() -> Iterator[None]:
    with environment(KERNELGRADER_FLEET_BACKEND="slurm", KERNELGRADER_FLEET_LEAD_SECONDS="7200"):
        yield


def borrowed(state: str, **values: object) -> BorrowedWorker:
    now = utcnow()
    return BorrowedWorker(
        backend="slurm",
        job_id=str(next(_ids)),
        state=state,
        submitted_at=now - timedelta(minutes=3),
        reason="2 jobs (2 to compile): one worker per 6 makes 1.",
        **values,
    )


@pytest.fixture
def fleet_rows(session: Session, on_slurm: None) -> Iterator[dict[str, str]]:
    now = utcnow()
    rows = {
        "pending": borrowed("pending", scheduler_state="PENDING", scheduler_reason="Priority"),
        "draining": borrowed(
            "draining",
            scheduler_state="RUNNING",
            node="gpu-node-4",
            worker_name="gpu-node-4:311",
            drain_at=now,
            end_reason=DRAINING,
        ),
        "ended": borrowed(
            "ended",
            scheduler_state="TIMEOUT",
            ended_at=now - timedelta(minutes=1),
            end_reason="Slurm ended it at its time limit (TIMEOUT on gpu-node-2).",
        ),
    }
    with session_scope() as s:
        s.execute(delete(FleetRunner).where(FleetRunner.backend == "slurm"))
        s.add(FleetRunner(backend="slurm", holder="login1:77", started_at=now, ticked_at=now,
                          note="submitted slurm:1"))  # fmt: skip
        s.add_all(rows.values())
    keys = {name: f"slurm:{row.job_id}" for name, row in rows.items()}
    yield keys
    with session_scope() as s:
        s.execute(delete(BorrowedWorker).where(BorrowedWorker.job_id.in_(
            [k.split(":")[1] for k in keys.values()])))  # fmt: skip
        s.execute(delete(FleetRunner).where(FleetRunner.backend == "slurm"))


async def test_staff_read_the_plan_and_the_borrowed_workers(
    client: httpx.AsyncClient, session: Session, fleet_rows: dict[str, str]
) -> None:
    mine = make_world(session, due_at=utcnow() + timedelta(minutes=30))
    theirs = make_world(session, due_at=utcnow() + timedelta(minutes=40))
    await login(client, mine.student)
    refused = await client.get("/admin/fleet")
    assert refused.status_code == 403 and "course staff" in refused.text
    client.cookies.clear()
    await login(client, mine.ta)
    page = await client.get("/admin/fleet")
    assert page.status_code == 200, page.text
    assert "The loop login1:77 carries the plan out through slurm" in page.text
    plan = page.text.split('id="plan"')[1].split("</table>")[0]
    assert f"{mine.course.slug}/scale-test is due in" in plan
    # Another course's lab is counted, not named.
    assert theirs.course.slug not in page.text and "A lab is due in" in plan
    table = page.text.split('id="borrowed"')[1].split("</table>")[0]
    assert fleet_rows["pending"] in table and "PENDING Priority" in table
    assert fleet_rows["draining"] in table and DRAINING in table
    ended = page.text.split('id="ended"')[1].split("</table>")[0]
    assert fleet_rows["ended"] in ended and "at its time limit (TIMEOUT on gpu-node-2)" in ended
    system = await client.get("/admin/system")
    assert '<a href="/admin/fleet">Borrowed GPUs</a>' in system.text


def test_the_command_shows_every_course(session: Session, fleet_rows: dict[str, str]) -> None:
    mine = make_world(session, due_at=utcnow() + timedelta(minutes=30))
    shown = CliRunner().invoke(cli, ["fleet", "status"])
    assert shown.exit_code == 0, shown.output
    assert f"{mine.course.slug}/scale-test is due in" in shown.output
    assert "The loop login1:77 carries the plan out through slurm" in shown.output
    lines = shown.output.splitlines()
    pending = next(line for line in lines if line.strip().startswith(fleet_rows["pending"]))
    assert "pending" in pending and "PENDING Priority" in pending
    assert f"  {fleet_rows['draining']}: {DRAINING}" in lines
    ended = shown.output.split("Ended in the last day:")[1]
    assert fleet_rows["ended"] in ended and "TIMEOUT on gpu-node-2" in ended


def test_a_loop_silent_for_three_passes_is_said_to_have_stopped(on_slurm: None) -> None:
    with session_scope() as s:
        s.execute(delete(FleetRunner).where(FleetRunner.backend == "slurm"))
        quiet = utcnow() - timedelta(minutes=2)
        s.add(FleetRunner(backend="slurm", holder="login1:77", started_at=quiet, ticked_at=quiet))
    try:
        # Passes every 30 s: silent for more than 90 s (at least 60) reads as stopped.
        shown = CliRunner().invoke(cli, ["fleet", "status"])
        assert shown.exit_code == 0, shown.output
        assert (
            "No `kernelgrader fleet run` loop has acted lately (the last, login1:77, 2 min ago): "
            "the plan below is not carried out." in shown.output
        )
        with environment(KERNELGRADER_FLEET_TICK_SECONDS="60"):
            shown = CliRunner().invoke(cli, ["fleet", "status"])
        assert "The loop login1:77 carries the plan out through slurm" in shown.output
        # Passes every 5 s: still a minute's grace, as the lease gives.
        with session_scope() as s:
            s.execute(update(FleetRunner).values(ticked_at=utcnow() - timedelta(seconds=30)))
        with environment(KERNELGRADER_FLEET_TICK_SECONDS="5"):
            shown = CliRunner().invoke(cli, ["fleet", "status"])
        assert "The loop login1:77 carries the plan out through slurm" in shown.output
    finally:
        with session_scope() as s:
            s.execute(delete(FleetRunner).where(FleetRunner.backend == "slurm"))


def test_the_command_refuses_settings_that_do_not_hold(on_slurm: None) -> None:
    with environment(KERNELGRADER_FLEET_FLOOR="3", KERNELGRADER_FLEET_CEILING="2"):
        refused = CliRunner().invoke(cli, ["fleet", "status"])
    assert refused.exit_code == 1
    assert "KERNELGRADER_FLEET_FLOOR (3) is above KERNELGRADER_FLEET_CEILING (2)" in refused.output
    with environment(KERNELGRADER_FLEET_CEILING="many"):
        refused = CliRunner().invoke(cli, ["fleet", "run", "--once"])
    assert refused.exit_code == 1
    assert "The fleet's settings do not hold: KERNELGRADER_FLEET_CEILING: " in refused.output


async def test_the_page_says_which_setting_does_not_hold(
    client: httpx.AsyncClient, session: Session, on_slurm: None
) -> None:
    world = make_world(session)
    await login(client, world.ta)
    with environment(KERNELGRADER_FLEET_FLOOR="3", KERNELGRADER_FLEET_CEILING="2"):
        page = await client.get("/admin/fleet")
        # /metrics leaves the fleet's figures out rather than failing the scrape.
        with settings_from(metrics_token=TOKEN):
            scrape = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert page.status_code == 500
    assert "KERNELGRADER_FLEET_FLOOR (3) is above KERNELGRADER_FLEET_CEILING (2)" in page.text
    assert scrape.status_code == 200 and "kernelgrader_queue_depth" in scrape.text
    assert "kernelgrader_fleet_needed_workers" not in scrape.text


def test_fleet_run_without_a_scheduler_says_what_to_set() -> None:
    refused = CliRunner().invoke(cli, ["fleet", "run", "--once"])
    assert refused.exit_code == 1 and "KERNELGRADER_FLEET_BACKEND=slurm" in refused.output


async def test_metrics_carry_what_each_model_needs(
    client: httpx.AsyncClient, session: Session, fleet_rows: dict[str, str]
) -> None:
    make_world(session, due_at=utcnow() + timedelta(minutes=30))
    with settings_from(metrics_token=TOKEN):
        text = (await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})).text
    found = samples(text)
    # A lab due within the lead time, no earlier term: at least the rush's one worker.
    assert found[("kernelgrader_fleet_needed_workers", (("gpu_model", ""),))] >= 1
    states = {
        labels[1][1]: value
        for (name, labels), value in found.items()
        if name == "kernelgrader_fleet_borrowed_workers"
    }
    assert states["pending"] >= 1 and states["draining"] >= 1 and "ended" not in states
