"""How long a course's late-day policy change holds the database's write lock, before and after.

Seeds a course on a fresh SQLite file (STUDENTS students, LABS labs past their due dates, every
student with a late graded submission in every lab, so that every settle has work to do), then
changes the late-day budget twice:

- "one transaction": every student's late days settled in the change's own transaction, as
  `set_budget` did on main 756f36a (settle_course inside the request);
- "batches": the change commits at once and app.policy.recount settles the students a short
  batch at a time, each batch its own transaction (what the service does now).

Meanwhile a writer thread commits a small write every 20 ms (as an upload would) and records how
long each waited for the lock. Printed: the longest time the lock was held in one transaction,
the number of transactions, the total time, and the writer's longest wait and how many of its
writes failed with "database is locked" (the service's SQLite busy timeout is 5 s; a failed
write is an upload refused with a 503).

    python bench/latedays_recount.py                 # 300 students, 16 labs
    python bench/latedays_recount.py --students 100 --labs 4
    python bench/latedays_recount.py --json out.json

Touches nothing but its own temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _setup_env(folder: Path) -> None:
    os.environ.update(
        {
            "KERNELGRADER_ENV": "test",
            "KERNELGRADER_DATA_DIR": str(folder),
            "KERNELGRADER_DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite'}",
            "KERNELGRADER_BROKER_URL": f"sqla+sqlite:///{folder / 'broker.sqlite'}",
            "KERNELGRADER_SECRET_KEY": "bench-secret-key-not-for-production",
            "KERNELGRADER_GRADING_SECRET": "bench-grading-secret",
        }
    )


def seed(students: int, labs: int) -> int:
    """The course's id, with its labs, students and late graded submissions."""
    from datetime import timedelta

    from app.core.database import session_scope, utcnow
    from app.courses.models import Course, Enrollment, Lab, Role
    from app.submissions.models import Status, Submission
    from app.users.models import User

    now = utcnow()
    with session_scope() as session:
        course = Course(slug="bench", title="Late-day bench", late_days=3 * labs + 2)
        session.add(course)
        session.flush()
        lab_rows = [
            Lab(
                course_id=course.id,
                slug=f"lab-{i:02d}",
                title=f"Lab {i}",
                due_at=now - timedelta(days=30 - i),
                max_score=10.0,
                position=i,
            )
            for i in range(labs)
        ]
        session.add_all(lab_rows)
        users = [User(email=f"student{i:04d}@bench.edu", name=f"S {i}") for i in range(students)]
        session.add_all(users)
        session.flush()
        session.add_all(
            Enrollment(user_id=u.id, course_id=course.id, role=Role.student.value) for u in users
        )
        for u_index, user in enumerate(users):
            for lab in lab_rows:
                assert lab.due_at is not None
                at = lab.due_at + timedelta(hours=1 + 24 * ((u_index + lab.position) % 3))
                session.add(
                    Submission(
                        user_id=user.id,
                        lab_id=lab.id,
                        source_text="// bench\n",
                        sha256="0" * 64,
                        created_at=at,
                        late=True,
                        score=10.0,
                        max_score=10.0,
                        status=Status.graded.value,
                        compile_ok=True,
                        graded_at=at,
                    )
                )
        return course.id


class Writer(threading.Thread):
    """A small committed write every 20 ms, as an upload would make; its waits are kept."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.waits: list[float] = []
        self.failed = 0

    def run(self) -> None:
        from sqlalchemy import update
        from sqlalchemy.exc import OperationalError

        from app.core.database import session_scope
        from app.users.models import User

        while not self.stop.wait(0.02):
            started = time.monotonic()
            try:
                with session_scope() as session:
                    session.execute(update(User).where(User.id == 1).values(name=User.name))
            except OperationalError:
                self.failed += 1
            self.waits.append(time.monotonic() - started)


def one_transaction(course_id: int, days: int) -> list[float]:
    """Main's way: the budget and every settle in one transaction; its duration."""
    from app.core.database import session_scope, utcnow
    from app.courses.models import Course
    from app.courses.service import labs_of
    from app.policy.recount import recount

    started = time.monotonic()
    with session_scope() as session:
        course = session.get_one(Course, course_id)
        course.late_days = days
        session.flush()
        for lab in labs_of(session, course=course):
            recount(session, lab=lab, now=utcnow())
    return [time.monotonic() - started]


def batches(course_id: int, days: int) -> list[float]:
    """Now: the change commits alone, then the recount runs batch by batch; each duration."""
    from app.core.database import session_scope, utcnow
    from app.courses.models import Course
    from app.latedays.service import set_budget
    from app.policy import recount

    started = time.monotonic()
    with session_scope() as session:
        course = session.get_one(Course, course_id)
        set_budget(session, course=course, days=days, now=utcnow())
    held = [time.monotonic() - started]
    real = recount.recount_batch

    def timed(**kwargs: object) -> bool:
        began = time.monotonic()
        try:
            return real(**kwargs)  # type: ignore[arg-type]
        finally:
            held.append(time.monotonic() - began)

    recount.recount_batch = timed  # type: ignore[assignment]
    try:
        recount.recount_owed(course_id)
    finally:
        recount.recount_batch = real  # type: ignore[assignment]
    return held


def measure(name: str, run: object, course_id: int, days: int) -> dict[str, object]:
    writer = Writer()
    writer.start()
    time.sleep(0.2)
    started = time.monotonic()
    held = run(course_id, days)  # type: ignore[operator]
    total = time.monotonic() - started
    writer.stop.set()
    writer.join()
    return {
        "mode": name,
        "transactions": len(held),
        "longest_lock_s": round(max(held), 3),
        "median_lock_s": round(statistics.median(held), 3),
        "total_s": round(total, 3),
        "writer_longest_wait_s": round(max(writer.waits, default=0.0), 3),
        "writer_writes": len(writer.waits),
        "writer_refused": writer.failed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--labs", type=int, default=16)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kg-bench-latedays-") as tmp:
        _setup_env(Path(tmp))
        from app.cli.database import upgrade_database

        upgrade_database()
        course_id = seed(args.students, args.labs)
        # The charges made once, unmeasured: both runs below settle the same standing again.
        batches(course_id, 3 * args.labs + 1)
        print(f"{args.students} students, {args.labs} labs, every submission late and graded")
        results = [
            measure("one transaction (main)", one_transaction, course_id, 3 * args.labs - 1),
            measure("batches (now)", batches, course_id, 3 * args.labs - 2),
        ]
        for r in results:
            print(
                f"{r['mode']:>24}: lock held at most {r['longest_lock_s']:.3f} s "
                f"(median {r['median_lock_s']:.3f} s, {r['transactions']} transactions, "
                f"{r['total_s']:.1f} s in all); a writer waited at most "
                f"{r['writer_longest_wait_s']:.3f} s, {r['writer_refused']} of "
                f"{r['writer_writes']} writes refused"
            )
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
