"""The fleet's API: the health check, with what each worker can do."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel

from app import __version__
from app.api.errors import errors
from app.core.database import probe
from app.fleet.service import WorkerView, grading_sentence, recent_workers
from app.web.deps import in_health_thread

router = APIRouter(prefix="/api/v1")


class WorkerReport(BaseModel):
    """A worker heard from in the last day: what it can do and when it was last heard."""

    id: int
    gpu: str  # CUDA_VISIBLE_DEVICES of the worker process; "" for none in particular
    gpu_model: str
    arch: str
    compile: bool
    run: bool
    alive: bool
    stopped: bool
    last_heard_at: datetime
    note: str  # why it cannot run kernels, where it cannot


class Health(BaseModel):
    status: str
    version: str
    database: str
    # "ok", or a sentence saying what waits because no live worker can do it.
    grading: str = "ok"
    workers: list[WorkerReport] = []


@router.get("/health", tags=["meta"], responses=errors(503))
async def health() -> Health:
    # Its own threads and connection, outside the bound on requests in flight: it answers
    # within a second while every request thread is busy, the worker report included.
    workers: list[WorkerView] = await in_health_thread(lambda: probe(recent_workers))
    return Health(
        status="ok",
        version=__version__,
        database="ok",
        grading=grading_sentence(workers),
        # Host names stay on the staff page: this endpoint answers anyone.
        workers=[
            WorkerReport(
                id=w.id,
                gpu=w.gpu,
                gpu_model=w.gpu_model,
                arch=w.arch,
                compile=w.can_compile,
                run=w.can_run,
                alive=w.alive,
                stopped=w.stopped_at is not None,
                last_heard_at=w.heartbeat_at,
                note=w.note,
            )
            for w in workers
        ],
    )
