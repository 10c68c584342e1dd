"""`kernelgrader serve`, `worker` and `status`: the processes that run the service (the app in
__init__.py registers these three commands)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Annotated

import typer
from sqlalchemy.exc import SQLAlchemyError

from app.cli.common import fail
from app.cli.database import upgrade_database


def database_trouble(exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        f"The database could not be read ({first}); check KERNELGRADER_DATABASE_URL, and run "
        "`kernelgrader db upgrade` if this release's schema is newer than the database's."
    )


def status() -> None:
    """The workers (host, GPU, last heartbeat, the job each holds), the queue, the last errors."""
    from app.core.database import session_scope
    from app.core.settings import get_settings
    from app.fleet.service import fleet_snapshot
    from app.fleet.status_text import render_status

    try:
        with session_scope() as session:
            snapshot = fleet_snapshot(session)
    except SQLAlchemyError as exc:
        raise fail(database_trouble(exc)) from None
    timeout = get_settings().heartbeat_timeout_seconds
    typer.echo(render_status(snapshot, heartbeat_timeout=timeout), nl=False)


def worker(
    gpus: Annotated[
        str | None,
        typer.Option(
            help="one worker process per GPU, supervised and restarted: 'all', or indices "
            "such as 0,1"
        ),
    ] = None,
    parent_pid: Annotated[int | None, typer.Option(hidden=True)] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level")] = "INFO",
) -> None:
    """Run a grading worker: compiles, and runs kernels where a GPU is (--gpus: one per GPU)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if gpus is not None:
        from app.fleet.supervisor import SupervisorError, supervise

        try:
            raise typer.Exit(code=supervise(gpus, loglevel=loglevel))
        except SupervisorError as exc:
            raise fail(str(exc)) from None
    from app.jobs.gpu_probe import (
        cannot_compile_sentence,
        compile_unavailable_reason,
        run_unavailable_reason,
        worker_arch,
        worker_gpu_model,
    )

    if parent_pid is not None:
        from app.fleet.parent import watch_parent

        # The local worker of `serve`, or one of `worker --gpus`, stops when that process is
        # gone, even if it was killed.
        watch_parent(parent_pid)
    missing = compile_unavailable_reason()
    if missing is not None:
        raise fail(cannot_compile_sentence(missing))
    from app.core.settings import get_settings
    from app.grading.engine import prepare_engine
    from app.grading.privileges import as_root_sentence, leave_out_celerys_root_warning
    from app.grading.sandbox_cleanup import reap_orphaned_sandboxes
    from app.grading.sweeper import SweeperThread
    from app.jobs.celery_app import QUEUE, celery_app
    from app.jobs.presence import FLEET_JOB_VARIABLE, Activity, Presence, announce
    from app.jobs.routing import gpu_queues
    from app.jobs.workers import worker_id
    from app.lti.sync import LtiSyncThread

    settings = get_settings()
    # Before this worker starts children of its own: what killed workers left, processes
    # (which may hold the GPU) and then their folders.
    reaped = reap_orphaned_sandboxes()
    if reaped.killed:
        typer.echo(
            f"Stopped {len(reaped.killed)} processes that workers which were killed left "
            "running (the log names them)."
        )
    if reaped.removed:
        typer.echo(
            f"Removed {len(reaped.removed)} sandbox folders left by workers that were killed."
        )
    reason = run_unavailable_reason()
    model = worker_gpu_model()
    queues = [QUEUE] if reason else [QUEUE, *gpu_queues(model)]
    if reason:
        typer.echo(f"This worker compiles only: {reason}")
    else:
        where = os.environ.get("CUDA_VISIBLE_DEVICES")
        typer.echo(
            f"This worker compiles and runs kernels on {model or 'the GPU'}"
            + (f" (CUDA_VISIBLE_DEVICES={where})." if where else ".")
        )
    borrowed = os.environ.get(FLEET_JOB_VARIABLE, "")
    if borrowed:
        typer.echo(
            f"Borrowed by the fleet ({borrowed}): it drains and exits when the fleet no longer "
            "needs it."
        )
    as_root = as_root_sentence()
    if as_root:
        typer.secho(as_root, fg=typer.colors.YELLOW)
        leave_out_celerys_root_warning()
    presence: Presence | None = None
    activity = Activity()
    activity.connect()

    def drain() -> None:
        # Celery's warm shutdown: the task in hand finishes and no new one is taken.
        os.kill(os.getpid(), signal.SIGTERM)

    def stop_on_signal(signum: int, _frame: object) -> None:
        # Until Celery installs its own handler, SIGTERM (a supervisor stopping, `docker
        # stop`) ends a worker that is still starting, and the registry hears that it stopped.
        # Not by raising SystemExit here: landing in an import's clean-up callback (the
        # startup imports a lot), it is printed and ignored, and the worker starts anyway.
        def stop() -> None:
            if presence is not None:
                presence.close()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(128 + signum)

        threading.Thread(target=stop, name="kernelgrader-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, stop_on_signal)
    try:
        try:
            presence = announce(
                name=worker_id(),
                gpu_model=model,
                arch=worker_arch(),
                can_run=reason is None,
                note=reason or "",
                queues=queues,
                activity=activity,
                on_drain=drain,
            )
        except SQLAlchemyError as exc:
            raise fail(database_trouble(exc)) from None
        prepare_engine(settings, gpu=reason is None)
        SweeperThread(has_gpu=reason is None, gpu_model=model).start()
        LtiSyncThread().start()  # rosters and scores for the LMSs
        celery_app.worker_main(
            [
                "worker",
                # Threads: jobs share this process's warm children and caches; their
                # correctness runs share the GPU, and the per-GPU lock keeps each timed
                # section alone.
                "--pool=threads",
                f"--concurrency={settings.worker_concurrency}",
                f"--loglevel={loglevel}",
                f"--queues={','.join(queues)}",
                f"--hostname=kernelgrader-{os.getpid()}@%h",
                "--without-gossip",
                "--without-mingle",
            ]
        )
    finally:
        if presence is not None:
            presence.close()


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    local_worker: Annotated[bool, typer.Option(help="start a worker beside the server")] = True,
) -> None:
    """Serve the web pages and API, with a local worker, on the configured database."""
    import uvicorn

    from app.bootstrap import bootstrap_if_empty
    from app.core.database import session_scope
    from app.core.settings import get_settings

    settings = get_settings()  # checked by the callback in app/cli/__init__.py
    settings.ensure_data_dir()
    try:
        weak = [] if is_loopback(host) else settings.weak_secrets()
    except (OSError, ValueError) as exc:
        raise fail(f"The login cookies' key could not be read or made: {exc}") from None
    if weak:
        names = " and ".join(weak)
        raise fail(
            f"{names} {'is' if len(weak) == 1 else 'are'} unset, short or a public default, and "
            f"--host {host} lets others reach this server: anyone could sign a login cookie for "
            "any account, or work out the hidden cases. Set each to a long random string (e.g. "
            "`openssl rand -hex 32`), or serve on 127.0.0.1."
        )
    upgrade_database()
    with session_scope() as session:
        first = bootstrap_if_empty(session)
    if first is not None:
        _print_first_run(first, host, port)
    child = None
    if local_worker:
        from app.jobs.gpu_probe import CUDA_EXTRA, compile_unavailable_reason

        missing = compile_unavailable_reason()
        if missing is not None:
            typer.secho(
                f"No local worker was started, since it could not compile kernels ({missing}): "
                "the web side runs alone and submissions wait in the queue until a worker "
                f"starts; {CUDA_EXTRA}, then restart serve or start `kernelgrader worker`.",
                fg=typer.colors.YELLOW,
            )
        else:
            # A separate process: the worker may load CUDA, which must stay out of the web
            # server.
            child = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "worker", "--parent-pid", str(os.getpid())]
            )
    try:
        uvicorn.run("app.main:create_app", factory=True, host=host, port=port)
    finally:
        if child is not None:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


def is_loopback(host: str) -> bool:
    """Whether only this machine reaches a server bound to `host`."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any address


def _print_first_run(first: object, host: str, port: int) -> None:
    from app.bootstrap import FirstRun

    assert isinstance(first, FirstRun)
    shown = "localhost" if host in ("0.0.0.0", "127.0.0.1", "::") else host
    lines = [
        "",
        "First run: created the course 'demo' with the built-in labs: "
        + (", ".join(first.labs) or "none found"),
        *[f"  skipped {s}" for s in first.skipped],
        f"Open http://{shown}:{port}/ and log in as {first.email} with password {first.password}",
        f"{first.email} is also the site administrator (LMS registrations on /admin/lti; "
        "`kernelgrader admin grant EMAIL` makes others).",
        "An API token for that account (shown once):",
        f"  {first.token}",
        "",
    ]
    typer.secho("\n".join(lines), fg=typer.colors.GREEN)
