"""Compiled programs kept between the worker that compiles a job and the GPU worker that runs it.

A CPU worker (or a GPU worker of another model) compiles a job, records its verdict and leaves
it `waiting_gpu`; the GPU worker that takes it then would compile the same source again. The
program is kept instead, with its recipe: what the GPU worker would compile with. A recipe that
differs in anything (another architecture, another NVRTC, a lab edited since, other options)
means compiling again, so a kept program is exactly what the GPU worker would have made.
"""

from __future__ import annotations

import logging
from dataclasses import fields
from typing import TYPE_CHECKING

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.grading.models import KeptProgram
from app.submissions.models import GradingJob, JobState

if TYPE_CHECKING:
    from graders.results import CompileResult

log = logging.getLogger(__name__)

# A program larger than this is compiled again rather than kept (an initialised __device__
# array can make a cubin as large as the source allows).
MAX_KEPT_BYTES = 8 * 1024 * 1024


def recipe(*, arch: str, digest: str, filename: str) -> str:
    """What a compile of one submission depends on besides its source (which never changes)."""
    from graders.compile.pipeline import nvrtc_version

    version = nvrtc_version()
    nvrtc = f"{version[0]}.{version[1]}" if version else "unknown"
    # The worker always compiles with line info (the sanitizer names lines with it).
    return f"{arch} nvrtc-{nvrtc} lab-{digest} line-info {filename}"


def keep(session: Session, *, job_id: int, result: CompileResult, recipe: str) -> bool:
    """Keep a compiled program for the job's GPU worker; False where there is nothing to keep."""
    if not result.ok or not result.cubin or len(result.cubin) > MAX_KEPT_BYTES:
        return False
    forget(session, job_id=job_id)
    session.add(
        KeptProgram(job_id=job_id, recipe=recipe, result=result.to_dict(), cubin=result.cubin)
    )
    return True


def kept(session: Session, *, job_id: int, recipe: str) -> CompileResult | None:
    """The job's kept program, where it was compiled as this worker would compile it."""
    from graders.results import CompileResult

    row = session.get(KeptProgram, job_id)
    if row is None:
        return None
    if row.recipe != recipe:
        log.info(
            "job %s: kept program was made as %r, this worker needs %r", job_id, row.recipe, recipe
        )
        return None
    names = {f.name for f in fields(CompileResult)} - {"cubin"}
    if set(row.result) != names:
        return None  # kept by another version of the grader
    return CompileResult(**row.result, cubin=bytes(row.cubin))


def forget(session: Session, *, job_id: int) -> None:
    session.execute(delete(KeptProgram).where(KeptProgram.job_id == job_id))


def forget_finished(session: Session) -> None:
    """Programs of jobs that ended without their report (a regrade replaced a waiting job, say).
    Read first: a sweep runs every few seconds, and a delete that finds nothing would still take
    SQLite's write lock each time."""
    ended = list(
        session.scalars(
            select(KeptProgram.job_id)
            .join(GradingJob, GradingJob.id == KeptProgram.job_id)
            .where(GradingJob.state.in_([JobState.done.value, JobState.failed.value]))
        )
    )
    if ended:
        session.execute(
            delete(KeptProgram)
            .where(KeptProgram.job_id.in_(ended))
            .execution_options(synchronize_session=False)
        )
