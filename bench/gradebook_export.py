"""Time the gradebook export (`<course>/gradebook.csv`'s body) on several checkouts at once.

    python bench/gradebook_export.py --checkout /tmp/gb-15b17ba --checkout . [--students 1000]
        [--labs 30] [--runs 7]

Each checkout gets a process of its own, run with that checkout's `app` first on the path, and a
SQLite database of its own made from that checkout's models, filled with the same rows: a
course of `--students` students and `--labs` labs, each student with two graded submissions
per lab (a few KiB of source and a compile log each, which the export must not read). Then the
processes export the gradebook in turns, one run each at a time (the order reversed every
other round), so that the machine's load (shared, here) falls on every checkout alike; each
export writes the whole CSV into memory, as the API streams it. Printed per checkout: the
median and fastest of the runs, and the CSV's rows and bytes (the same rows for the same
data, whatever the checkout's columns).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
KERNEL = "__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }\n"


def seed(students: int, labs: int) -> int:
    """The course, in this process's checkout's database; its id."""
    from sqlalchemy import insert, select

    import app.models  # noqa: F401  (every table, for create_all)
    from app.core.database import Base, get_engine, session_scope, utcnow
    from app.courses.models import Course, Enrollment, Lab, Role
    from app.submissions.models import Submission
    from app.users.models import User

    Base.metadata.create_all(get_engine())
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
                    "builtin_id": "scale",
                    "max_score": 10.0,
                }
                for n in range(labs)
            ],
        )
        lab_ids = list(session.scalars(select(Lab.id).where(Lab.course_id == course.id)))
        session.execute(
            insert(User),
            [
                {"email": f"book{n:05d}@bench.example", "name": f"Student {n}"}
                for n in range(students)
            ],
        )
        user_ids = list(session.scalars(select(User.id).where(User.email.like("book%"))))
        session.execute(
            insert(Enrollment),
            [{"user_id": u, "course_id": course.id, "role": Role.student.value} for u in user_ids],
        )
        source = KERNEL * 40  # a few KiB, as real uploads have
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
        return int(course.id)


def export_once(course_id: int) -> tuple[float, int, int]:
    """Seconds, rows and bytes of one export, in a session of its own."""
    from app.core.database import session_scope
    from app.courses.models import Course
    from app.gradebook.service import write_gradebook_csv

    out = io.StringIO()
    started = time.perf_counter()
    with session_scope() as session:
        write_gradebook_csv(session, course=session.get_one(Course, course_id), out=out)
    seconds = time.perf_counter() - started
    text = out.getvalue()
    return seconds, text.count("\n"), len(text.encode())


def child(students: int, labs: int) -> None:
    """One checkout's process: seed, say ready, then export once per line read."""
    course_id = seed(students, labs)
    export_once(course_id)  # warm: imports, the engine, SQLite's page cache
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        seconds, rows, size = export_once(course_id)
        print(json.dumps({"seconds": seconds, "rows": rows, "bytes": size}), flush=True)


def start(checkout: Path, folder: Path, students: int, labs: int) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "KERNELGRADER_ENV": "test",
        "KERNELGRADER_DATA_DIR": str(folder),
        "KERNELGRADER_DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite'}",
        "KERNELGRADER_SECRET_KEY": "bench-secret-key-0123456789",
        "KERNELGRADER_GRADING_SECRET": "bench-grading-secret-0123456789",
    }
    args = [sys.executable, str(HERE), "--child", "--students", str(students)]
    return subprocess.Popen(
        [*args, "--labs", str(labs)],
        cwd=str(checkout),
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def answer(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"a checkout's process ended early (exit status {process.wait()})")
    result: dict[str, Any] = json.loads(line)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="Time the gradebook export on checkouts.")
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--labs", type=int, default=30)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.students, args.labs)
        return
    checkouts = [c.resolve() for c in (args.checkout or [HERE.parents[1]])]
    with tempfile.TemporaryDirectory(prefix="gradebook-bench-") as tmp:
        processes = []
        for n, checkout in enumerate(checkouts):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            processes.append(start(checkout, folder, args.students, args.labs))
        try:
            for process in processes:
                answer(process)  # seeded and warm
            runs: list[list[dict[str, Any]]] = [[] for _ in processes]
            for n in range(args.runs):
                # Each round in turn, the order reversed every other round, so that neither
                # checkout always runs first (on a machine whose load changes by the second).
                order = list(zip(processes, runs, strict=True))
                for process, kept in order if n % 2 == 0 else reversed(order):
                    assert process.stdin is not None
                    process.stdin.write("go\n")
                    process.stdin.flush()
                    kept.append(answer(process))
        finally:
            for process in processes:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(timeout=60)
    print(
        f"gradebook export, {args.students} students x {args.labs} labs, two graded "
        f"submissions per cell, {args.runs} runs each, taken in turns:"
    )
    for checkout, kept in zip(checkouts, runs, strict=True):
        seconds = [r["seconds"] for r in kept]
        head = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(
            f"  {checkout} ({head or 'no git'}): median {statistics.median(seconds):.3f} s, "
            f"fastest {min(seconds):.3f} s; {kept[0]['rows']} rows, {kept[0]['bytes']} bytes"
        )


if __name__ == "__main__":
    main()
