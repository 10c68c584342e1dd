"""The Celery application: the queue only says "grade job J of submission S"."""

from __future__ import annotations

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

from app.core.settings import get_settings

# The tasks, by name; each takes ids and opens its own sessions (app.grading.tasks,
# app.profiling.tasks, app.similarity.tasks).
GRADE_TASK = "grading.grade"
PROFILE_TASK = "profiling.profile"
SIMILARITY_TASK = "similarity.compute"
# Every worker takes jobs from the main queue; only workers with a GPU take the GPU queue,
# which holds compiled submissions that were waiting for one.
QUEUE = "grading"
GPU_QUEUE = "grading.gpu"


def make_celery() -> Celery:
    settings = get_settings()
    if settings.broker_url.startswith("sqla+sqlite"):
        settings.ensure_data_dir()
    transport_options: dict[str, object] = {}
    if settings.broker_url.startswith("sqla+"):
        # Our channel for kombu's SQLAlchemy transport: it deletes delivered messages (see
        # app.jobs.broker). kombu resolves a URL's "sqla+" prefix through this table.

        TRANSPORT_ALIASES["sqla"] = "app.jobs.broker:Transport"
        transport_options = {
            "polling_interval": settings.broker_polling_seconds,
            "forget_taken_after_seconds": settings.broker_forget_taken_after_seconds,
        }
    app = Celery(
        "kernelgrader",
        broker=settings.broker_url,
        include=["app.grading.tasks", "app.profiling.tasks", "app.similarity.tasks"],
    )
    app.conf.update(
        broker_transport_options=transport_options,
        task_default_queue=QUEUE,
        task_ignore_result=True,
        # A job is acknowledged only when done, so a worker that dies mid-job loses nothing;
        # the database makes the second delivery harmless.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
    )
    return app


celery_app = make_celery()
