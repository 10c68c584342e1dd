"""A deadline's last two hours, compressed, with workers borrowed from a real Slurm.

Needs the single-node Slurm of `scripts/ci-slurm.sh` (run it as root; it prints the three
KERNELGRADER_TEST_SLURM_* lines this bench reads, or pass --slurm-conf and friends). Its jobs
run here, without a GPU, so the borrowed workers compile only: the queue is the compile work,
and a compiled upload waits for a GPU as a local worker without one leaves it.

The bench seeds last term's course with the same lab, its uploads before its due date shaped
as a rush (and its gradings' seconds), and this term's course with the same number of students
and the lab due --start simulated minutes after the start. It then plays the uploads of this
term (last term's curve, with Poisson noise) through the service's intake, and runs the fleet's
loop (`kernelgrader fleet run`'s pass) every simulated minute. Time runs MINUTE seconds per
simulated minute; the fleet's lead and idle times are compressed alike, a worker's start and a
compile are not.

    python bench/deadline_fleet.py                        # 3 s a simulated minute, 60 students
    python bench/deadline_fleet.py --minute 2 --students 90 --ceiling 4 --json out.json

It prints, every 5 simulated minutes: uploads, the queue (to compile, being compiled), compiled
uploads waiting for a GPU, borrowed workers by state and what the plan wants; then the wait from
upload to compiled (p50, p95, max), how long the first job took to start a worker, and the
borrowed worker-minutes against a fixed fleet at the ceiling. Every Slurm job it submitted is
cancelled at the end (by id); it stops nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

KERNEL = """\
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = factor * src[i];
}
"""
LAB = "vector-scale"
# Last term's uploads per 10 simulated minutes before its due date, the last first (120 min).
LAST_TERM = (30, 22, 14, 9, 6, 4, 3, 2, 2, 1, 1, 1)
# Uploads after the due date (late), per 10 simulated minutes.
LATE = (4, 1)
# What last term's gradings took (seconds), which the rush estimate reads.
LAST_TERM_GRADING_S = 3.0


@dataclass
class Row:
    minute: float  # simulated, relative to the due date
    uploads: int
    to_compile: int
    compiling: int
    waiting_gpu: int
    borrowed: dict[str, int]
    wanted: int


@dataclass
class Run:
    rows: list[Row] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minute", type=float, default=3.0, help="real seconds per simulated minute")
    p.add_argument("--students", type=int, default=60)
    p.add_argument("--start", type=int, default=100, help="simulated minutes before the due")
    p.add_argument("--after", type=int, default=20, help="simulated minutes after the due")
    p.add_argument("--ceiling", type=int, default=3)
    p.add_argument("--jobs-per-worker", type=int, default=4)
    p.add_argument("--lead", type=float, default=60, help="lead time, simulated minutes")
    p.add_argument("--idle", type=float, default=5, help="idle time, simulated minutes")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--slurm-conf", default=os.environ.get("KERNELGRADER_TEST_SLURM_CONF", ""))
    p.add_argument("--partition", default=os.environ.get("KERNELGRADER_TEST_SLURM_PARTITION", ""))
    p.add_argument("--constraint", default=os.environ.get("KERNELGRADER_TEST_SLURM_CONSTRAINT", ""))
    p.add_argument("--json", type=Path, help="also write the figures here")
    return p.parse_args()


def configure(args: argparse.Namespace, work: Path) -> None:
    """The service's and the fleet's settings, before any `app` module is imported."""
    database = f"sqlite:///{work / 'bench.sqlite'}"
    broker = f"sqla+sqlite:///{work / 'broker.sqlite'}"
    worker_env = {
        "KERNELGRADER_DATA_DIR": str(work / "data"),
        "KERNELGRADER_DATABASE_URL": database,
        "KERNELGRADER_BROKER_URL": broker,
        "KERNELGRADER_RUN_ON_GPU": "false",
        "KERNELGRADER_HEARTBEAT_SECONDS": "1",
        "KERNELGRADER_HEARTBEAT_TIMEOUT_SECONDS": "10",
        "KERNELGRADER_SWEEP_SECONDS": "1",
        "KERNELGRADER_BROKER_POLLING_SECONDS": "0.1",
        "KERNELGRADER_SUBMISSION_RATE_LIMIT": "0",
    }
    env_file = work / "worker.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in worker_env.items()))
    env_file.chmod(0o600)
    m = args.minute
    os.environ.update(worker_env)
    os.environ.update(
        {
            "SLURM_CONF": args.slurm_conf,
            "KERNELGRADER_FLEET_BACKEND": "slurm",
            "KERNELGRADER_FLEET_CEILING": str(args.ceiling),
            "KERNELGRADER_FLEET_JOBS_PER_WORKER": str(args.jobs_per_worker),
            "KERNELGRADER_FLEET_LEAD_SECONDS": str(args.lead * m),
            "KERNELGRADER_FLEET_IDLE_SECONDS": str(args.idle * m),
            "KERNELGRADER_FLEET_TICK_SECONDS": str(m),
            "KERNELGRADER_FLEET_START_SECONDS": "300",
            "KERNELGRADER_FLEET_DRAIN_SECONDS": "120",
            "KERNELGRADER_SLURM_PARTITION": args.partition,
            "KERNELGRADER_SLURM_CONSTRAINTS": json.dumps({"": args.constraint}),
            "KERNELGRADER_SLURM_CPUS": "1",
            "KERNELGRADER_SLURM_MEMORY": "1500M",
            "KERNELGRADER_SLURM_TIME_LIMIT": "60",
            "KERNELGRADER_SLURM_ENV_FILE": str(env_file),
            "KERNELGRADER_SLURM_CHDIR": str(work),
            "KERNELGRADER_SLURM_JOB_NAME": f"kg-bench-{work.name}",
            "KERNELGRADER_SLURM_WORKER_COMMAND": (
                f"{Path(sys.executable).parent / 'kernelgrader'} worker --loglevel WARNING"
            ),
        }
    )


def seed(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    """Last term's course (its uploads and gradings) and this term's: (course, lab, students)."""
    from app.cli.database import upgrade_database
    from app.core.database import session_scope, utcnow
    from app.courses.models import Role
    from app.courses.service import add_lab, create_course, enroll
    from app.submissions.models import GradingJob, JobState, Submission
    from app.users.service import ensure_user

    upgrade_database()
    m = args.minute
    now = utcnow()
    rng = random.Random(args.seed)
    with session_scope() as session:
        last = create_course(session, slug="gpu101-last", title="Last term")
        last_due = now - timedelta(days=120)
        last_lab = add_lab(session, course=last, ref=LAB, due_at=last_due)
        course = create_course(session, slug="gpu101", title="This term")
        # Due once the seeding is done (start_clock).
        lab = add_lab(session, course=course, ref=LAB, due_at=now + timedelta(days=1))
        students = []
        for n in range(args.students):
            old = ensure_user(session, email=f"old{n:03d}@bench.example")
            enroll(session, user=old, course=last, role=Role.student)
            new = ensure_user(session, email=f"new{n:03d}@bench.example")
            enroll(session, user=new, course=course, role=Role.student)
            students.append(new)
        session.flush()
        # Last term's curve, in this bench's compressed minutes before its due date.
        for index, count in enumerate(LAST_TERM):
            for _ in range(count):
                minutes = (index + rng.random()) * 10
                at = last_due - timedelta(seconds=minutes * m)
                row = Submission(
                    user_id=_old(session, rng, args.students),
                    lab_id=last_lab.id,
                    source_text=KERNEL,
                    sha256="0" * 64,
                    created_at=at,
                    status="graded",
                )
                session.add(row)
                session.flush()
                session.add(
                    GradingJob(
                        submission_id=row.id,
                        state=JobState.done.value,
                        queued_at=at,
                        compile_seconds=LAST_TERM_GRADING_S,
                    )
                )
        session.expunge_all()
    return course, lab, students


def start_clock(lab: Any, args: argparse.Namespace) -> float:
    """Set this term's due date START simulated minutes from now; the real time of now."""
    from app.core.database import session_scope, utcnow
    from app.courses.models import Lab

    with session_scope() as session:
        row = session.get_one(Lab, lab.id)
        row.due_at = utcnow() + timedelta(seconds=args.start * args.minute)
    return time.monotonic()


def _old(session: Any, rng: random.Random, students: int) -> int:
    from sqlalchemy import select

    from app.users.models import User

    email = f"old{rng.randrange(students):03d}@bench.example"
    return int(session.scalar(select(User.id).where(User.email == email)))


def schedule(args: argparse.Namespace) -> list[float]:
    """This term's upload times, simulated minutes relative to the due date."""
    rng = random.Random(args.seed + 1)

    def poisson(mean: float) -> int:
        # Knuth's method: small means only.
        limit, k, p = math.exp(-mean), 0, 1.0
        while True:
            p *= rng.random()
            if p <= limit:
                return k
            k += 1

    times = []
    for index, mean in enumerate(LAST_TERM):
        for _ in range(poisson(mean)):
            times.append(-(index + rng.random()) * 10)
    for index, mean in enumerate(LATE):
        for _ in range(poisson(mean)):
            times.append((index + rng.random()) * 10)
    return sorted(t for t in times if -args.start <= t <= args.after)


def upload(course: Any, lab: Any, student: Any) -> None:
    """As the API's upload does: store and commit; the job then goes to the sender."""
    from app.core.database import session_scope, utcnow
    from app.courses.models import Course, Lab
    from app.submissions.service import create_submission
    from app.users.models import User

    with session_scope() as session:
        create_submission(
            session,
            user=session.get_one(User, student.id),
            course=session.get_one(Course, course.id),
            lab=session.get_one(Lab, lab.id),
            filename="scale.cu",
            data=KERNEL.encode(),
            now=utcnow(),
        )


def observe(minute: float, uploads: int, wanted: int) -> Row:
    from sqlalchemy import func, select

    from app.core.database import session_scope
    from app.fleet.models import BorrowedState, BorrowedWorker
    from app.submissions.models import GradingJob, JobState

    with session_scope() as session:
        states = dict(
            session.execute(
                select(GradingJob.state, func.count())
                .where(GradingJob.state.in_(["queued", "started", "waiting_gpu"]))
                .group_by(GradingJob.state)
            ).all()
        )
        borrowed = dict(
            session.execute(
                select(BorrowedWorker.state, func.count())
                .where(BorrowedWorker.state != BorrowedState.ended.value)
                .group_by(BorrowedWorker.state)
            ).all()
        )
    return Row(
        minute=minute,
        uploads=uploads,
        to_compile=states.get(JobState.queued.value, 0),
        compiling=states.get(JobState.started.value, 0),
        waiting_gpu=states.get(JobState.waiting_gpu.value, 0),
        borrowed=borrowed,
        wanted=wanted,
    )


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def main() -> int:
    args = parse()
    if not args.slurm_conf:
        print(
            "No Slurm: run scripts/ci-slurm.sh as root and export the lines it prints, or pass "
            "--slurm-conf, --partition and --constraint.",
            file=sys.stderr,
        )
        return 2
    work = Path(tempfile.mkdtemp(prefix="kg-deadline-fleet-"))
    configure(args, work)
    course, lab, students = seed(args)

    from sqlalchemy import select

    from app.core.database import session_scope
    from app.core.fleet_settings import fleet_settings
    from app.fleet import slurm
    from app.fleet.autoscale import FleetLoop, SlurmBackend
    from app.fleet.models import BorrowedWorker
    from app.jobs.sender import job_sender
    from app.submissions.models import GradingJob, Submission

    m = args.minute
    settings = fleet_settings()
    loop = FleetLoop(SlurmBackend(settings), settings)
    times = schedule(args)
    rng = random.Random(args.seed + 2)
    run = Run()
    t0 = start_clock(lab, args)  # real time of simulated minute -args.start
    uploaded = 0
    since_row = 0
    next_row = -args.start
    first_submit: float | None = None
    first_worker: float | None = None
    print(
        f"deadline_fleet: {len(times)} uploads by {args.students} students, {m:g} s a "
        f"simulated minute, lead {args.lead:g} min, idle {args.idle:g} min, one worker per "
        f"{args.jobs_per_worker} jobs, ceiling {args.ceiling}; work in {work}"
    )
    print(
        f"{'minute':>7} {'uploads':>7} {'queue':>6} {'compiling':>9} {'wait GPU':>8} "
        f"{'pending':>7} {'starting':>8} {'running':>7} {'draining':>8} {'wanted':>6}"
    )

    said = ""

    def one_pass(minute: float) -> int:
        nonlocal first_submit, first_worker, said
        report = loop.once()
        if report is None or report.plan is None:
            return 0
        for model in report.plan.models:
            why = " ".join(r.text for r in model.reasons)
            if why != said and (model.submit or model.drain or model.cancel):
                print(f"  minute {minute:+.0f}: the plan wants {model.wanted}: {why}")
                said = why
        for error in report.errors:
            print(f"  fleet: {error}", file=sys.stderr)
        run.submitted += report.submitted
        run.drained += report.drained
        run.cancelled += report.cancelled
        run.ended += report.ended
        if report.submitted and first_submit is None:
            first_submit = minute
        if first_worker is None:
            with session_scope() as session:
                if session.scalar(
                    select(BorrowedWorker.id).where(BorrowedWorker.worker_name != "")
                ):
                    first_worker = minute
        return sum(p.wanted for p in report.plan.models)

    wanted = 0
    try:
        while True:
            minute = (time.monotonic() - t0) / m - args.start
            while times and times[0] <= minute:
                times.pop(0)
                upload(course, lab, rng.choice(students))
                uploaded += 1
                since_row += 1
            wanted = one_pass(minute)
            if minute >= next_row:
                row = observe(next_row, since_row, wanted)
                run.rows.append(row)
                since_row = 0
                next_row += 5
                b = row.borrowed
                print(
                    f"{row.minute:>+7.0f} {row.uploads:>7} {row.to_compile:>6} "
                    f"{row.compiling:>9} {row.waiting_gpu:>8} {b.get('pending', 0):>7} "
                    f"{b.get('starting', 0):>8} {b.get('running', 0):>7} "
                    f"{b.get('draining', 0):>8} {row.wanted:>6}",
                    flush=True,
                )
                if minute >= args.after and not times:
                    with session_scope() as session:
                        open_rows = session.scalar(
                            select(BorrowedWorker.id).where(BorrowedWorker.state != "ended")
                        )
                    left = row.to_compile + row.compiling
                    if open_rows is None and left == 0:
                        break
                    if minute >= args.after + 60:
                        print("  gave up waiting 60 simulated minutes after the end")
                        break
            time.sleep(m)
    finally:
        job_sender.wait_sent(30)
        with session_scope() as session:
            ids = list(
                session.scalars(
                    select(BorrowedWorker.job_id).where(BorrowedWorker.state != "ended")
                )
            )
        for job_id in ids:
            with contextlib.suppress(slurm.SlurmError):
                slurm.cancel(job_id)

    with session_scope() as session:
        rows = session.execute(
            select(Submission.created_at, GradingJob.compiled_at)
            .join(GradingJob, GradingJob.submission_id == Submission.id)
            .where(Submission.lab_id == lab.id)
        ).all()
        borrowed = list(session.scalars(select(BorrowedWorker)))
        session.expunge_all()
    waits = [(c - s).total_seconds() / m for s, c in rows if c is not None]
    held_minutes = 0.0
    for b in borrowed:
        if b.started_at is not None:
            end = b.ended_at or b.started_at
            held_minutes += (end - b.started_at).total_seconds() / m
    span = round(run.rows[-1].minute + args.start) if run.rows else 0
    figures = {
        "uploads": uploaded,
        "compiled": len(waits),
        "wait_minutes_p50": percentile(waits, 50),
        "wait_minutes_p95": percentile(waits, 95),
        "wait_minutes_max": max(waits) if waits else None,
        "jobs_submitted": len(run.submitted),
        "drained": len(run.drained),
        "cancelled": len(run.cancelled),
        "first_submit_minute": first_submit,
        "first_worker_minute": first_worker,
        "borrowed_worker_minutes": round(held_minutes, 1),
        "fixed_fleet_worker_minutes": args.ceiling * span,
        "end_reasons": sorted({b.end_reason.split(".")[0] for b in borrowed}),
        "rows": [row.__dict__ for row in run.rows],
    }

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    print(
        f"\n{uploaded} uploads, {len(waits)} compiled; upload -> compiled p50 "
        f"{fmt(figures['wait_minutes_p50'])} min, p95 {fmt(figures['wait_minutes_p95'])} min, "
        f"max {fmt(figures['wait_minutes_max'])} min (simulated)"
    )
    print(
        f"{len(run.submitted)} Slurm jobs submitted (first at minute {fmt(first_submit)}, its "
        f"worker registered at minute {fmt(first_worker)}), {len(run.drained)} drained, "
        f"{len(run.cancelled)} cancelled"
    )
    print(
        f"borrowed worker-minutes {held_minutes:.0f}, against {args.ceiling * span} for "
        f"{args.ceiling} workers held the whole {span} minutes"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
