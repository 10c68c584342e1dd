"""A deadline rush on one machine: many students upload at once while things break.

Starts its own stack on loopback (a web server without a local worker, and workers it owns),
seeds a course with STUDENTS students holding API tokens, then offers UPLOADS uploads at RATE
per second with at most CONCURRENCY in flight, while it

- kills a worker with SIGKILL every KILL_EVERY seconds and starts a new one,
- restarts the broker once (--setup scaled: its own redis-server, without persistence unless
  --redis-persistence, so queued messages are lost as in the issue) and the database once (its
  own PostgreSQL cluster, stopped for DB_DOWN seconds),
- asks /api/v1/health four times a second throughout.

Then it waits for every acknowledged upload to be final, reads submissions back at 32 in flight,
optionally exports a 1,000 x 30 gradebook, and audits: acknowledged uploads vs rows, rows not
final, submissions graded more than once, 5xx answers, latency percentiles, health answers.

    python bench/rush.py                                   # embedded default (SQLite)
    python bench/rush.py --setup scaled                    # own PostgreSQL + Redis (needs both)
    python bench/rush.py --uploads 1000 --rate 100 --concurrency 128 --gradebook
    python bench/rush.py --json out.json                   # the figures as JSON too

Loopback only. Every process it stops is one it started, by pid. Exit status 0 when the audit
finds nothing lost, stuck or doubled and no 5xx; 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

KERNEL = b"""\
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = factor * src[i];
}
"""
# A submission is done for this audit once it reached one of these (no GPU here: "compiled").
FINAL = {"compiled", "compile_error", "graded", "error"}
COURSE = "rush"
LAB = "vector-scale"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms"


class Processes:
    """Child processes this bench started; stopped by pid, never by name."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        out = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        out.close()
        self.started.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[bytes], *, kill: bool = False, wait: float = 15) -> None:
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=wait)

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            self.stop(proc)


class Redis:
    """A redis-server of our own on a free loopback port."""

    def __init__(self, procs: Processes, work: Path, *, persistence: bool) -> None:
        self.procs, self.port, self.persistence = procs, free_port(), persistence
        self.dir = work / "redis"
        self.dir.mkdir()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise SystemExit("redis-server is not installed; run scripts/ci-services.sh as root.")
        keep = ["--appendonly", "yes"] if self.persistence else ["--appendonly", "no"]
        self.proc = self.procs.start(
            "redis",
            [
                exe,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                *keep,
                "--dir",
                str(self.dir),
            ],
            dict(os.environ),
        )
        wait_for_port(self.port)

    def waiting(self) -> int:
        """Messages waiting on the main queue (0 while the server does not answer)."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            return int(client.llen("grading"))
        except redis.RedisError:
            return 0
        finally:
            client.close()

    def restart(self, down: float = 0.0) -> None:
        assert self.proc is not None
        # SIGKILL: no shutdown save; without persistence every queued message is gone.
        self.procs.stop(self.proc, kill=True)
        time.sleep(down)
        self.start()


class Postgres:
    """A PostgreSQL cluster of our own (initdb in the work folder) on a free loopback port."""

    def __init__(self, work: Path) -> None:
        versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not versions:
            raise SystemExit("PostgreSQL is not installed; run scripts/ci-services.sh as root.")
        self.bin = versions[-1].parent
        self.port = free_port()
        self.data = work / "pg"
        self.data.mkdir(mode=0o777)
        self.data.chmod(0o777)
        self.log = work / "postgres.log"
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            shutil.chown(self.data, "postgres")
            self.log.touch()
            shutil.chown(self.log, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://kg@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [
                *self.as_user,
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                *args,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            subprocess.run(
                [
                    *self.as_user,
                    str(self.bin / "initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    "kg",
                    "-A",
                    "trust",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off "
            "-c max_connections=200"
        )
        self._ctl("-w", "-o", options, "start")

    def stop(self) -> None:
        with suppress(subprocess.CalledProcessError):
            self._ctl("-w", "-m", "fast", "stop")


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@dataclass
class Results:
    uploads: list[tuple[int, float, int | None]] = field(default_factory=list)  # status, s, id
    timeline: list[tuple[float, float, int]] = field(default_factory=list)  # sent, s, status
    errors: list[str] = field(default_factory=list)  # transport errors (no answer)
    refusals_without_sentence: int = 0
    health: list[tuple[float, float, int]] = field(default_factory=list)  # t, seconds, status
    events: list[tuple[float, str]] = field(default_factory=list)
    reads: list[tuple[int, float]] = field(default_factory=list)
    reads_seconds: float = 0.0


def seed(students: int) -> tuple[dict[str, str], str]:
    """The course, its lab, the students' tokens (email -> token) and a TA's token."""
    from app.cli.database import upgrade_database
    from app.core.database import session_scope
    from app.courses.models import Role
    from app.courses.service import add_lab, create_course, enroll
    from app.users.service import create_api_token, ensure_user

    upgrade_database()
    tokens: dict[str, str] = {}
    with session_scope() as session:
        course = create_course(session, slug=COURSE, title="Rush")
        add_lab(session, course=course, ref=LAB)
        ta = ensure_user(session, email="ta@rush.example")
        enroll(session, user=ta, course=course, role=Role.ta)
        ta_token = create_api_token(session, user=ta)
        for n in range(students):
            user = ensure_user(session, email=f"student{n:04d}@rush.example")
            enroll(session, user=user, course=course, role=Role.student)
            tokens[user.email] = create_api_token(session, user=user)
    return tokens, ta_token


async def offer_uploads(
    args: argparse.Namespace, base: str, tokens: dict[str, str], results: Results, start: float
) -> dict[int, str]:
    """Uploads at `rate` per second, at most `concurrency` in flight; id -> token of 202s."""
    import httpx

    owners: dict[int, str] = {}
    slots = asyncio.Semaphore(args.concurrency)
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    url = f"{base}/api/v1/courses/{COURSE}/labs/{LAB}/submissions"
    emails = list(tokens)
    async with httpx.AsyncClient(limits=limits, timeout=args.request_timeout) as client:

        async def one(n: int) -> None:
            token = tokens[emails[n % len(emails)]]
            async with slots:
                t0 = time.monotonic()
                try:
                    r = await client.post(
                        url,
                        headers={"Authorization": f"Bearer {token}"},
                        files={"file": ("scale.cu", KERNEL, "text/plain")},
                    )
                except httpx.HTTPError as exc:
                    results.errors.append(f"{type(exc).__name__}: {exc}")
                    results.uploads.append((0, time.monotonic() - t0, None))
                    results.timeline.append((t0 - start, time.monotonic() - t0, 0))
                    return
                took = time.monotonic() - t0
                sid = r.json().get("id") if r.status_code == 202 else None
                if r.status_code in (429, 503):
                    detail = (
                        r.json().get("detail", "")
                        if r.headers.get("content-type", "").startswith("application/json")
                        else ""
                    )
                    if not detail.endswith(".") or "Retry-After" not in r.headers:
                        results.refusals_without_sentence += 1
                if sid is not None:
                    owners[sid] = token
                results.uploads.append((r.status_code, took, sid))
                results.timeline.append((t0 - start, took, r.status_code))

        tasks = []
        for n in range(args.uploads):
            at = start + n / args.rate
            delay = at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(n)))
        await asyncio.gather(*tasks)
    return owners


# /health is asked with this long a wait: longer is "no answer". How long it took is a figure
# (the slowest, and how many took over a second), never a verdict: the machine may be shared.
HEALTH_WAIT_SECONDS = 10.0


async def watch_health(base: str, results: Results, stop: asyncio.Event, start: float) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=HEALTH_WAIT_SECONDS) as client:
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                status = (await client.get(f"{base}/api/v1/health")).status_code
            except httpx.HTTPError:
                status = 0
            results.health.append((t0 - start, time.monotonic() - t0, status))
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.25)


def audit(acknowledged: set[int], student_ids: set[int]) -> dict[str, Any]:
    from sqlalchemy import func, select

    from app.core.database import session_scope
    from app.submissions.models import GradingJob, Submission, SubmissionEvent

    with session_scope() as session:
        rows = dict(
            session.execute(
                select(Submission.id, Submission.status).where(Submission.user_id.in_(student_ids))
            ).all()
        )
        jobs = dict(
            session.execute(
                select(GradingJob.submission_id, func.count(GradingJob.id))
                .where(GradingJob.submission_id.in_(list(rows) or [-1]))
                .group_by(GradingJob.submission_id)
            ).all()
        )
        verdicts = dict(
            session.execute(
                select(SubmissionEvent.submission_id, func.count(SubmissionEvent.id))
                .where(
                    SubmissionEvent.submission_id.in_(list(rows) or [-1]),
                    SubmissionEvent.status.in_(["compiled", "compile_error", "graded"]),
                )
                .group_by(SubmissionEvent.submission_id)
            ).all()
        )
    return {
        "acknowledged": len(acknowledged),
        "rows": len(rows),
        "lost": sorted(acknowledged - set(rows)),
        "stored_not_acknowledged": len(set(rows) - acknowledged),
        "not_final": sorted(sid for sid, status in rows.items() if status not in FINAL),
        "more_than_one_result": sorted(
            sid for sid in rows if jobs.get(sid, 0) > 1 or verdicts.get(sid, 0) > 1
        ),
        "statuses": dict(sorted(_count(rows.values()).items())),
    }


def _count(values: Any) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def final_count(ids: set[int]) -> int:
    from sqlalchemy import func, select

    from app.core.database import session_scope
    from app.submissions.models import Submission

    if not ids:
        return 0
    try:
        with session_scope() as session:
            return int(
                session.scalar(
                    select(func.count(Submission.id)).where(
                        Submission.id.in_(ids), Submission.status.in_(FINAL)
                    )
                )
                or 0
            )
    except Exception:  # the database is restarting
        return -1


async def read_back(
    base: str, owners: dict[int, str], count: int, concurrency: int, results: Results
) -> None:
    import httpx

    if not owners or count <= 0:
        return
    ids = list(owners)
    slots = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:

        async def one(n: int) -> None:
            sid = ids[n % len(ids)]
            async with slots:
                t0 = time.monotonic()
                try:
                    r = await client.get(
                        f"{base}/api/v1/submissions/{sid}",
                        headers={"Authorization": f"Bearer {owners[sid]}"},
                    )
                    status = r.status_code
                except httpx.HTTPError:
                    status = 0
                results.reads.append((status, time.monotonic() - t0))

        t0 = time.monotonic()
        await asyncio.gather(*(one(n) for n in range(count)))
        results.reads_seconds = time.monotonic() - t0


def seed_gradebook(students: int, labs: int) -> str:
    """A course of `students` x `labs` graded submissions (two per cell); a TA's token."""
    from sqlalchemy import insert, select

    from app.core.database import session_scope, utcnow
    from app.courses.models import Course, Enrollment, Lab, Role
    from app.submissions.models import Submission
    from app.users.models import User
    from app.users.service import create_api_token, ensure_user

    now = utcnow()
    with session_scope() as session:
        course = Course(slug="book", title="Gradebook")
        session.add(course)
        session.flush()
        session.execute(
            insert(Lab),
            [
                {
                    "course_id": course.id,
                    "slug": f"lab-{n:02d}",
                    "title": f"Lab {n}",
                    "builtin_id": LAB,
                    "max_score": 10.0,
                }
                for n in range(labs)
            ],
        )
        lab_ids = list(session.scalars(select(Lab.id).where(Lab.course_id == course.id)))
        session.execute(
            insert(User),
            [
                {"email": f"book{n:05d}@rush.example", "name": f"Student {n}"}
                for n in range(students)
            ],
        )
        user_ids = list(session.scalars(select(User.id).where(User.email.like("book%"))))
        session.execute(
            insert(Enrollment),
            [{"user_id": u, "course_id": course.id, "role": Role.student.value} for u in user_ids],
        )
        source = KERNEL.decode() * 20  # a few KiB of source per row, as real uploads have
        for user_id in user_ids:
            session.execute(
                insert(Submission),
                [
                    {
                        "user_id": user_id,
                        "lab_id": lab_id,
                        "source_text": source,
                        "sha256": "0" * 64,
                        "status": "graded",
                        "score": float(k + user_id % 7),
                        "max_score": 10.0,
                        "graded_at": now,
                        "created_at": now,
                        "compile_log": "ok " * 200,
                    }
                    for lab_id in lab_ids
                    for k in range(2)
                ],
            )
        ta = ensure_user(session, email="book-ta@rush.example")
        session.add(Enrollment(user_id=ta.id, course_id=course.id, role=Role.ta.value))
        return create_api_token(session, user=ta)


def sweeper_sends(logs: Path) -> list[tuple[float, str, list[int]]]:
    """The sweepers' sends of jobs never sent (`resent`), of jobs judged lost (`lost`) and of
    jobs whose worker stopped (`requeued`), from the workers' logs: (epoch seconds, kind, job
    ids in the order sent), oldest first."""
    sends = []
    for log in logs.glob("worker*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if "sweep: SweepReport(" not in line:
                continue
            try:  # logging's asctime: local time, milliseconds after a comma
                at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            for kind in ("resent", "lost", "requeued"):
                if f"{kind}=[" not in line:
                    continue
                inside = line.split(f"{kind}=[", 1)[1].split("]", 1)[0]
                ids = [int(x) for x in inside.split(",") if x.strip()]
                if ids:
                    sends.append((at, kind, ids))
    return sorted(sends, key=lambda item: item[0])


def sent_again_as_lost(logs: Path) -> int:
    """How many sends the workers' sweepers made for jobs they judged lost (from their logs)."""
    return sum(len(ids) for _, kind, ids in sweeper_sends(logs) if kind == "lost")


def jobs_taken(job_ids: list[int]) -> dict[int, tuple[int, float, float | None]]:
    """job id -> (submission id, epoch seconds it was uploaded, epoch seconds a worker last
    took it or None)."""
    from sqlalchemy import select

    from app.core.database import session_scope
    from app.submissions.models import GradingJob, Submission

    if not job_ids:
        return {}
    with session_scope() as session:
        rows = session.execute(
            select(GradingJob.id, Submission.id, Submission.created_at, GradingJob.started_at)
            .join(Submission, Submission.id == GradingJob.submission_id)
            .where(GradingJob.id.in_(job_ids))
        ).all()
    return {
        job_id: (sid, created.timestamp(), started.timestamp() if started is not None else None)
        for job_id, sid, created, started in rows
    }


def across_broker_restart(
    results: Results, start_wall: float, logs: Path, *, before: float, after: float
) -> dict[str, Any]:
    """Uploads sent from `before` s ahead of the broker restart to `after` s past its end, and
    the jobs the sweepers sent again from the restart on: those uploaded before it (the
    restart lost them), those whose send failed while it was down, and those uploaded after it
    (sent again because they waited long): when, in which order, when a worker took them."""
    begun = next((t for t, what in results.events if what == "restart broker"), None)
    done = next((t for t, what in results.events if what == "restart broker: done"), None)
    if begun is None or done is None:
        return {}
    window = [
        took
        for t0, took, status in results.timeline
        if status and begun - before <= t0 <= done + after
    ]
    elsewhere = [
        took
        for t0, took, status in results.timeline
        if status and not begun - before <= t0 <= done + after
    ]
    back = start_wall + done  # the broker answers again (epoch seconds)
    first_send: dict[int, tuple[float, str]] = {}
    order: list[int] = []
    requeued: set[int] = set()  # taken by a worker that was killed: not lost by the restart
    for at, kind, ids in sweeper_sends(logs):
        if kind == "requeued":
            requeued.update(ids)
            continue
        if at < start_wall + begun:
            continue
        for job_id in ids:
            if job_id not in first_send:
                first_send[job_id] = (at, kind)
                order.append(job_id)
    taken = jobs_taken(order)

    def group(job_id: int) -> str:
        if first_send[job_id][1] == "resent":
            return "unsent"
        if taken[job_id][1] < start_wall + begun and job_id not in requeued:
            return "lost"
        return "waited"

    groups: dict[str, list[int]] = {"lost": [], "unsent": [], "waited": []}
    for job_id in order:
        if job_id in taken:
            groups[group(job_id)].append(job_id)

    def figures(jobs: list[int]) -> dict[str, Any]:
        ats = [first_send[j][0] - back for j in jobs]
        # Taken by a worker after it was sent again (an earlier attempt's start does not count).
        took = [
            started - back
            for j in jobs
            if (started := taken[j][2]) is not None and started >= first_send[j][0]
        ]
        ids = [taken[j][0] for j in jobs]  # submission ids, in the order the sweepers logged
        return {
            "jobs": len(jobs),
            "first_s": round(min(ats), 1) if ats else None,
            "last_s": round(max(ats), 1) if ats else None,
            "within_30_s": sum(1 for at in ats if at <= 30),
            # Consecutive sends where the later upload went first.
            "out_of_upload_order": sum(1 for a, b in itertools.pairwise(ids) if a > b),
            "taken_first_s": round(min(took), 1) if took else None,
            "taken_last_s": round(max(took), 1) if took else None,
            "not_taken": len(jobs) - len(took),
        }

    return {
        "window": f"sent {before:g} s before the restart to {after:g} s after it",
        "uploads": len(window),
        "p50": percentile(window, 50),
        "p99": percentile(window, 99),
        "max": max(window, default=None),
        # The same load away from the restart, for comparison.
        "elsewhere": {
            "uploads": len(elsewhere),
            "p50": percentile(elsewhere, 50),
            "p99": percentile(elsewhere, 99),
        },
        "down_seconds": round(done - begun, 2),
        **{name: figures(jobs) for name, jobs in groups.items()},
    }


def rss_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


async def run(args: argparse.Namespace, work: Path, procs: Processes) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELGRADER_")}
    env.update(
        KERNELGRADER_ENV="development",
        KERNELGRADER_DATA_DIR=str(work / "var"),
        KERNELGRADER_RUN_ON_GPU="false",
        KERNELGRADER_BROKER_POLLING_SECONDS="0.1",
        KERNELGRADER_SWEEP_SECONDS="2",
    )
    for item in args.env:
        key, _, value = item.partition("=")
        env[f"KERNELGRADER_{key.upper()}"] = value
    redis = postgres = None
    if args.setup == "scaled":
        redis = Redis(procs, work, persistence=args.redis_persistence)
        redis.start()
        env["KERNELGRADER_BROKER_URL"] = redis.url
        if args.postgres_url:
            env["KERNELGRADER_DATABASE_URL"] = args.postgres_url
        else:
            postgres = Postgres(work)
            postgres.start()
            env["KERNELGRADER_DATABASE_URL"] = postgres.url
    elif args.redis_url:
        env["KERNELGRADER_BROKER_URL"] = args.redis_url
    # This process seeds and audits through the app's own code: the same settings, no others.
    for key in [k for k in os.environ if k.startswith("KERNELGRADER_")]:
        del os.environ[key]
    os.environ.update({k: v for k, v in env.items() if k.startswith("KERNELGRADER_")})
    try:
        return await _run(args, env, procs, redis, postgres)
    finally:
        procs.stop_all()
        if postgres is not None:
            postgres.stop()


async def _run(
    args: argparse.Namespace,
    env: dict[str, str],
    procs: Processes,
    redis: Redis | None,
    postgres: Postgres | None,
) -> dict[str, Any]:
    tokens, ta_token = seed(args.students)
    from sqlalchemy import select

    from app.core.database import session_scope
    from app.users.models import User

    with session_scope() as session:
        student_ids = set(session.scalars(select(User.id).where(User.email.like("student%"))))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    py = sys.executable
    web = procs.start(
        "web", [py, "-m", "app.cli", "serve", "--port", str(port), "--no-local-worker"], env
    )
    workers = [
        procs.start(f"worker{n}", [py, "-m", "app.cli", "worker"], env) for n in range(args.workers)
    ]
    wait_for_port(port, timeout=60)
    results = Results()
    start, start_wall = time.monotonic(), time.time()
    stop_health = asyncio.Event()
    health = asyncio.create_task(watch_health(base, results, stop_health, start))
    load_seconds = args.uploads / args.rate

    async def faults() -> None:
        plan: list[tuple[float, str]] = []
        if args.kill_every > 0:
            t = args.kill_every
            while t < load_seconds + args.kill_after_load:
                plan.append((t, "kill worker"))
                t += args.kill_every
        if redis is not None and not args.no_broker_restart:
            at = load_seconds * 0.4 if args.broker_restart_at is None else args.broker_restart_at
            plan.append((at, "restart broker"))
        if postgres is not None and not args.no_db_restart:
            plan.append((load_seconds * 0.7, "restart database"))
        for at, what in sorted(plan):
            await asyncio.sleep(max(0.0, start + at - time.monotonic()))
            if what == "restart broker" and redis is not None and args.broker_restart_queued:
                # Only once that many messages wait, so that the restart loses some.
                until = time.monotonic() + load_seconds + 30
                while time.monotonic() < until:
                    if await asyncio.to_thread(redis.waiting) >= args.broker_restart_queued:
                        break
                    await asyncio.sleep(0.05)
            results.events.append((time.monotonic() - start, what))
            if what == "kill worker":
                victim = random.randrange(len(workers))
                Processes.stop(workers[victim], kill=True)
                workers[victim] = procs.start(
                    f"worker{victim}", [py, "-m", "app.cli", "worker"], env
                )
            elif what == "restart broker" and redis is not None:
                await asyncio.to_thread(redis.restart, args.broker_down)
            elif what == "restart database" and postgres is not None:
                await asyncio.to_thread(postgres.stop)
                await asyncio.sleep(args.db_down)
                await asyncio.to_thread(postgres.start)
            results.events.append((time.monotonic() - start, what + ": done"))

    fault_task = asyncio.create_task(faults())
    owners = await offer_uploads(args, base, tokens, results, start)
    load_done = time.monotonic() - start
    await fault_task
    acknowledged = set(owners)
    settle_deadline = time.monotonic() + args.settle_timeout
    final = 0
    while time.monotonic() < settle_deadline:
        final = await asyncio.to_thread(final_count, acknowledged)
        if final == len(acknowledged):
            break
        await asyncio.sleep(1)
    settled = time.monotonic() - start
    await read_back(base, owners, args.reads, args.read_concurrency, results)
    gradebook: dict[str, Any] = {}
    if args.gradebook:
        book_token = await asyncio.to_thread(
            seed_gradebook, args.gradebook_students, args.gradebook_labs
        )
        import httpx

        before = rss_kib(web.pid, "VmRSS")
        t0 = time.monotonic()
        async with httpx.AsyncClient(timeout=60) as client:
            r = await client.get(
                f"{base}/api/v1/courses/book/gradebook.csv",
                headers={"Authorization": f"Bearer {book_token}"},
            )
        gradebook = {
            "status": r.status_code,
            "seconds": time.monotonic() - t0,
            "bytes": len(r.content),
            "rows": r.text.count("\n"),
            "server_peak_rss_growth_mib": (rss_kib(web.pid, "VmHWM") - before) / 1024,
        }
    stop_health.set()
    await health
    report = audit(acknowledged, student_ids)
    statuses = _count(s for s, _, _ in results.uploads)
    accepted = [t for s, t, _ in results.uploads if s == 202]
    answered = [t for s, t, _ in results.uploads if s]
    # Answered means 200, or 503 while the database was away, within HEALTH_WAIT_SECONDS.
    bad_health = [
        (round(t, 1), status) for t, _, status in results.health if status not in (200, 503)
    ]
    slowest = sorted(results.timeline, key=lambda item: -item[1])[:5]
    reads_ok = [t for s, t in results.reads if s == 200]
    restart_at = next((t for t, what in results.events if what == "restart broker"), None)
    return {
        "setup": args.setup,
        "offered": {
            "uploads": args.uploads,
            "rate": args.rate,
            "concurrency": args.concurrency,
            "students": args.students,
            "workers": args.workers,
        },
        "load_seconds": round(load_done, 2),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "no_answer": len(results.errors),
        "no_answer_examples": results.errors[:3],
        "refusals_without_sentence": results.refusals_without_sentence,
        "5xx_other_than_503": sum(v for k, v in statuses.items() if k >= 500 and k != 503),
        "server_errors_5xx": sum(v for k, v in statuses.items() if k >= 500),
        "answer_seconds": {
            "p50": percentile(answered, 50),
            "p95": percentile(answered, 95),
            "p99": percentile(answered, 99),
            "max": max(answered, default=None),
        },
        "accepted_seconds": {
            "p50": percentile(accepted, 50),
            "p95": percentile(accepted, 95),
            "p99": percentile(accepted, 99),
        },
        "slowest_uploads": [
            {"sent_at_s": round(at, 1), "seconds": round(took, 2), "status": status}
            for at, took, status in slowest
        ],
        "health": {
            "503": sum(1 for _, _, status in results.health if status == 503),
            "asked": len(results.health),
            "bad": len(bad_health),
            "bad_examples": bad_health[:5],
            "over_a_second": sum(1 for _, took, _ in results.health if took > 1.0),
            "max_seconds": max((t for _, t, _ in results.health), default=None),
        },
        "events": [(round(t, 1), what) for t, what in results.events],
        "all_final_after_seconds": round(settled, 1) if final == len(acknowledged) else None,
        "final_after_broker_restart_seconds": (
            round(settled - restart_at, 1)
            if restart_at is not None and final == len(acknowledged)
            else None
        ),
        "reads": {
            "count": len(results.reads),
            "ok": len(reads_ok),
            "per_second": (
                len(results.reads) / results.reads_seconds if results.reads_seconds else None
            ),
            "concurrency": args.read_concurrency,
            "statuses": {str(k): v for k, v in sorted(_count(s for s, _ in results.reads).items())},
            "p50": percentile(reads_ok, 50),
            "p99": percentile(reads_ok, 99),
        },
        "sent_again_as_lost": sent_again_as_lost(procs.logs),
        "broker_restart": across_broker_restart(
            results, start_wall, procs.logs, before=1.0, after=args.restart_window
        ),
        "gradebook": gradebook,
        "audit": report,
    }


def verdict(result: dict[str, Any]) -> list[str]:
    """What the audit found wrong; empty when nothing was lost, stuck or doubled."""
    audit = result["audit"]
    problems = []
    if audit["lost"]:
        problems.append(f"{len(audit['lost'])} acknowledged uploads have no row")
    if audit["stored_not_acknowledged"]:
        problems.append(
            f"{audit['stored_not_acknowledged']} uploads were stored but not answered 202"
        )
    if audit["not_final"]:
        problems.append(f"{len(audit['not_final'])} submissions are not final")
    if audit["more_than_one_result"]:
        problems.append(f"{len(audit['more_than_one_result'])} submissions graded more than once")
    if result["5xx_other_than_503"]:
        problems.append(f"{result['5xx_other_than_503']} answers were 5xx other than 503")
    if result["no_answer"]:
        problems.append(f"{result['no_answer']} uploads got no answer")
    if result["refusals_without_sentence"]:
        problems.append(f"{result['refusals_without_sentence']} refusals lacked a sentence")
    if result["health"]["bad"]:
        problems.append(
            f"/health did not answer (200 or 503 within {HEALTH_WAIT_SECONDS:.0f} s) "
            f"{result['health']['bad']} times"
        )
    return problems


def show(result: dict[str, Any]) -> None:
    offered = result["offered"]
    answer, accepted, reads = result["answer_seconds"], result["accepted_seconds"], result["reads"]
    audit = result["audit"]
    lines = [
        f"setup: {result['setup']}; {offered['uploads']} uploads offered at {offered['rate']}/s, "
        f"<= {offered['concurrency']} in flight, {offered['students']} students, "
        f"{offered['workers']} worker(s); load took {result['load_seconds']} s",
        f"answers: {result['statuses']}; no answer: {result['no_answer']}; "
        f"5xx other than 503: {result['5xx_other_than_503']}",
        f"answer time (all): p50 {ms(answer['p50'])}, p95 {ms(answer['p95'])}, "
        f"p99 {ms(answer['p99'])}, max {ms(answer['max'])}",
        f"answer time (202): p50 {ms(accepted['p50'])}, p95 {ms(accepted['p95'])}, "
        f"p99 {ms(accepted['p99'])}",
        "slowest uploads (sent at s, seconds, status): "
        + ", ".join(str(tuple(u.values())) for u in result["slowest_uploads"]),
        f"health: asked {result['health']['asked']} times, 503 (database away) "
        f"{result['health']['503']}, no answer: {result['health']['bad']}, "
        f"over 1 s: {result['health']['over_a_second']}, "
        f"slowest {ms(result['health']['max_seconds'])}",
        f"faults: {result['events']}",
        f"all final {result['all_final_after_seconds']} s after the start; "
        f"after the broker restart: {result['final_after_broker_restart_seconds']} s",
        f"sent again as lost by the sweepers: {result['sent_again_as_lost']}",
        *restart_lines(result["broker_restart"]),
        f"reads: {reads['count']} at {reads['concurrency']} in flight {reads['statuses']}, "
        + (f"{reads['per_second']:.0f}/s" if reads["per_second"] else "-")
        + f", p50 {ms(reads['p50'])}, p99 {ms(reads['p99'])}",
        f"audit: acknowledged {audit['acknowledged']}, rows {audit['rows']}, "
        f"lost {len(audit['lost'])}, not final {len(audit['not_final'])}, "
        f"more than one result {len(audit['more_than_one_result'])}, "
        f"stored but not acknowledged {audit['stored_not_acknowledged']}; {audit['statuses']}",
    ]
    if result["gradebook"]:
        book = result["gradebook"]
        lines.append(
            f"gradebook: {book['rows'] - 1} students, {book['bytes']} bytes in "
            f"{book['seconds']:.2f} s (HTTP {book['status']}), server peak RSS "
            f"+{book['server_peak_rss_growth_mib']:.0f} MiB"
        )
    problems = verdict(result)
    lines.append(
        "verdict: "
        + (
            "; ".join(problems)
            if problems
            else "nothing lost, stuck or doubled; no 5xx but 503; /health answered throughout"
        )
    )
    print("\n".join(lines))


def restart_lines(restart: dict[str, Any]) -> list[str]:
    if not restart:
        return []
    lines = [
        f"across the broker restart (down {restart['down_seconds']} s; uploads "
        f"{restart['window']}): {restart['uploads']} uploads, p50 {ms(restart['p50'])}, "
        f"p99 {ms(restart['p99'])}, max {ms(restart['max'])}; the other "
        f"{restart['elsewhere']['uploads']}: p50 {ms(restart['elsewhere']['p50'])}, "
        f"p99 {ms(restart['elsewhere']['p99'])}"
    ]
    what = {
        "lost": "lost by the restart (uploaded before it)",
        "unsent": "whose send failed while it was down",
        "waited": "sent again only for waiting long (uploaded after it, or their worker killed)",
    }
    for name, words in what.items():
        f = restart[name]
        if not f["jobs"]:
            continue
        lines.append(
            f"  jobs {words}: {f['jobs']}, sent again {f['first_s']} to {f['last_s']} s after "
            f"the broker came back ({f['within_30_s']} within 30 s; "
            f"{f['out_of_upload_order']} before an earlier upload); "
            f"taken by a worker {f['taken_first_s']} to {f['taken_last_s']} s after "
            f"({f['not_taken']} not by the end)"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", choices=["embedded", "scaled"], default="embedded")
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--uploads", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="uploads offered per second")
    parser.add_argument("--concurrency", type=int, default=128, help="uploads in flight, at most")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--kill-every",
        type=float,
        default=4.0,
        help="SIGKILL a worker this often during the load (0: never)",
    )
    parser.add_argument(
        "--kill-after-load",
        type=float,
        default=5.0,
        help="keep killing workers this long after the last upload",
    )
    parser.add_argument("--no-broker-restart", action="store_true")
    parser.add_argument("--no-db-restart", action="store_true")
    parser.add_argument("--db-down", type=float, default=3.0, help="seconds PostgreSQL is down")
    parser.add_argument(
        "--broker-down", type=float, default=0.0, help="seconds Redis is down at its restart"
    )
    parser.add_argument(
        "--broker-restart-at",
        type=float,
        help="seconds after the start to restart Redis (default: 40%% of the load's time)",
    )
    parser.add_argument(
        "--broker-restart-queued",
        type=int,
        default=0,
        help="restart Redis no earlier than when this many messages wait on it",
    )
    parser.add_argument(
        "--redis-persistence",
        action="store_true",
        help="run the bench's Redis with appendonly (the recommended setup)",
    )
    parser.add_argument(
        "--restart-window",
        type=float,
        default=10.0,
        help="uploads sent up to this many seconds after the broker restart count as across it",
    )
    parser.add_argument("--redis-url", help="embedded database with this Redis as the broker")
    parser.add_argument(
        "--postgres-url",
        help="scaled: this database instead of our own cluster (then it is not restarted)",
    )
    parser.add_argument("--reads", type=int, default=3000, help="GET /submissions/{id} after")
    parser.add_argument("--read-concurrency", type=int, default=32)
    parser.add_argument("--gradebook", action="store_true", help="export a large gradebook")
    parser.add_argument("--gradebook-students", type=int, default=1000)
    parser.add_argument("--gradebook-labs", type=int, default=30)
    parser.add_argument("--settle-timeout", type=float, default=240.0)
    parser.add_argument("--request-timeout", type=float, default=30.0)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        help="KEY=VALUE: a KERNELGRADER_KEY setting for the server and workers",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kernelgrader-rush-"))
    work.chmod(0o755)
    procs = Processes(work)
    try:
        result = asyncio.run(run(args, work, procs))
    finally:
        procs.stop_all()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"logs in {work}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    show(result)
    return 1 if verdict(result) else 0


if __name__ == "__main__":
    sys.exit(main())
