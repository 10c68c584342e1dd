"""`/metrics` in Prometheus's text format, read from the database at each scrape.

Why the database and not in-process counters: gradings happen in worker processes on other
hosts, and any number of web processes may answer a scrape. The database already holds every
upload, job outcome, stage duration and worker heartbeat, so each web process reports the same
complete numbers, a restart loses nothing, and workers need no port of their own. (Prometheus
multiprocess mode would only sum the processes of one host, and not the workers at all.) A
scrape is a handful of aggregate queries over the jobs and workers tables. Scrape one web
replica, or take `max` over replicas: they all report the same numbers.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app import __version__
from app.core.database import utcnow
from app.core.fleet_settings import FleetSettingsInvalid, fleet_settings
from app.courses.models import Course, Lab
from app.fleet.inputs import current_plan
from app.fleet.models import BorrowedState, BorrowedWorker
from app.fleet.service import REPLACED_BY_REGRADE
from app.jobs.workers import live_workers
from app.submissions.models import GradingJob, JobState, Submission

log = logging.getLogger(__name__)

# Seconds, shared by the three stages so their histograms compare; waits can be long.
STAGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
STAGES = {
    "wait": GradingJob.wait_seconds,
    "compile": GradingJob.compile_seconds,
    "run": GradingJob.run_seconds,
}
WAITING = (JobState.queued.value, JobState.waiting_gpu.value)


def _outcome() -> Any:
    """A job's outcome as SQL, from the same fields the submission page reads."""
    failed = GradingJob.state == JobState.failed.value
    return case(
        (GradingJob.state == JobState.done.value, "graded"),
        (failed & (GradingJob.error == "") & GradingJob.compiled_at.is_not(None), "compile_error"),
        (failed & (GradingJob.error == REPLACED_BY_REGRADE), "replaced"),
        (failed, "error"),
        else_="",
    )


class FleetCollector(Collector):
    """Reads the numbers over `session` (the scraping request's, in its request thread)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def collect(self) -> Iterator[Metric]:
        yield from self._collect(self.session, utcnow())

    def _collect(self, session: Session, now: datetime) -> Iterable[Metric]:
        info = GaugeMetricFamily("kernelgrader_info", "The service's version.", labels=["version"])
        info.add_metric([__version__], 1)
        yield info

        uploads = CounterMetricFamily(
            "kernelgrader_uploads", "Submissions stored, by course.", labels=["course"]
        )
        for course, count in session.execute(
            select(Course.slug, func.count(Submission.id))
            .join(Lab, Lab.course_id == Course.id)
            .join(Submission, Submission.lab_id == Lab.id)
            .group_by(Course.slug)
        ):
            uploads.add_metric([course], count)
        yield uploads

        gradings = CounterMetricFamily(
            "kernelgrader_gradings",
            "Grading jobs finished, by outcome: graded, compile_error, error (on our side), "
            "replaced (by a regrade).",
            labels=["outcome"],
        )
        outcome = _outcome().label("outcome")
        counts = dict.fromkeys(("graded", "compile_error", "error", "replaced"), 0)
        for name, count in session.execute(
            select(outcome, func.count())
            .where(GradingJob.state.in_([JobState.done.value, JobState.failed.value]))
            .group_by(outcome)
        ):
            if name:
                counts[name] = count
        for name, count in counts.items():
            gradings.add_metric([name], count)
        yield gradings

        stages = HistogramMetricFamily(
            "kernelgrader_stage_seconds",
            "Seconds per stage: wait (queued until a worker took it), compile, run (after "
            "compiling until recorded).",
            labels=["stage"],
        )
        for stage, column in STAGES.items():
            row = session.execute(
                select(
                    func.count(column),
                    func.coalesce(func.sum(column), 0.0),
                    *[func.sum(case((column <= bound, 1), else_=0)) for bound in STAGE_BUCKETS],
                )
            ).one()
            total, seconds, *below = row
            buckets = [(str(b), int(n or 0)) for b, n in zip(STAGE_BUCKETS, below, strict=True)]
            stages.add_metric([stage], buckets + [("+Inf", int(total))], float(seconds))
        yield stages

        depth = GaugeMetricFamily(
            "kernelgrader_queue_depth",
            "Jobs not finished, by state (queued, started, waiting_gpu) and the GPU model they "
            "need ('' : any).",
            labels=["state", "gpu_model"],
        )
        by_state = {(state, ""): 0 for state in (*WAITING, JobState.started.value)}
        for state, model, count in session.execute(
            select(GradingJob.state, GradingJob.gpu_model, func.count())
            .where(GradingJob.state.in_([*WAITING, JobState.started.value]))
            .group_by(GradingJob.state, GradingJob.gpu_model)
        ):
            by_state[(state, model)] = count
        for (state, model), count in sorted(by_state.items()):
            depth.add_metric([state, model], count)
        yield depth

        oldest = session.scalar(
            select(func.min(GradingJob.queued_at)).where(GradingJob.state.in_(WAITING))
        )
        age = GaugeMetricFamily(
            "kernelgrader_queue_oldest_age_seconds",
            "Age of the oldest job waiting for a worker (0 when none waits).",
        )
        if oldest is not None and oldest.tzinfo is None:  # SQLite through a raw aggregate
            oldest = oldest.replace(tzinfo=UTC)
        age.add_metric([], max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
        yield age

        alive = live_workers(session, now=now)
        workers = GaugeMetricFamily(
            "kernelgrader_workers_alive",
            "Workers heard from within the heartbeat timeout, by what they can do and GPU model.",
            labels=["can_run", "gpu_model"],
        )
        grouped: dict[tuple[str, str], int] = {}
        for w in alive:
            kind = ("true" if w.can_run else "false", w.gpu_model)
            grouped[kind] = grouped.get(kind, 0) + 1
        for group, count in sorted(grouped.items()):
            workers.add_metric(list(group), count)
        yield workers

        labels = ["host", "gpu", "gpu_model"]
        temperature = GaugeMetricFamily(
            "kernelgrader_gpu_temperature_celsius",
            "A live GPU worker's GPU temperature at its latest timed section.",
            labels=labels,
        )
        clock = GaugeMetricFamily(
            "kernelgrader_gpu_sm_clock_mhz",
            "A live GPU worker's SM clock at its latest timed section.",
            labels=labels,
        )
        latest: dict[tuple[str, str, str], Any] = {}
        for w in sorted(alive, key=lambda w: w.heartbeat_at):
            if w.timed_at is not None:
                latest[(w.host, w.gpu, w.gpu_model)] = w  # a restarted worker replaces its past
        for where, w in sorted(latest.items()):
            if w.timing_temperature_c is not None:
                temperature.add_metric(list(where), w.timing_temperature_c)
            if w.timing_sm_clock_mhz is not None:
                clock.add_metric(list(where), w.timing_sm_clock_mhz)
        yield temperature
        yield clock
        yield from _fleet(session, now)


def _fleet(session: Session, now: datetime) -> Iterable[Metric]:
    """What the fleet's policy needs per GPU model (the Kubernetes manifests scale on it), and
    the borrowed workers by state."""
    try:
        settings = fleet_settings()
    except FleetSettingsInvalid:
        log.warning("the fleet's settings do not validate; /metrics leaves its figures out")
        return
    plan = current_plan(session, now=now, settings=settings)
    needed = GaugeMetricFamily(
        "kernelgrader_fleet_needed_workers",
        "GPU workers the queue and the coming due dates call for, by GPU model ('' : labs "
        "that name none), before the floor and the ceiling; 0 where nothing waits.",
        labels=["gpu_model"],
    )
    for model_plan in plan.models:
        needed.add_metric([model_plan.model], model_plan.needed)
    yield needed
    borrowed = GaugeMetricFamily(
        "kernelgrader_fleet_borrowed_workers",
        "Workers borrowed from the scheduler and not ended, by GPU model and state (pending, "
        "starting, running, draining).",
        labels=["gpu_model", "state"],
    )
    for model, state, count in session.execute(
        select(BorrowedWorker.gpu_model, BorrowedWorker.state, func.count())
        .where(BorrowedWorker.state != BorrowedState.ended.value)
        .group_by(BorrowedWorker.gpu_model, BorrowedWorker.state)
    ):
        borrowed.add_metric([model, state], count)
    yield borrowed


def metrics_text(session: Session) -> tuple[bytes, str]:
    """The exposition and its content type, read over `session`."""
    # A registry of its own per scrape: nothing of the process (or of prometheus_client's
    # defaults) leaks in, and the collector reads over the request's own session.
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(session))
    return generate_latest(registry), CONTENT_TYPE_LATEST


def token_matches(expected: str, authorization: str) -> bool:
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), expected.encode()
    )
