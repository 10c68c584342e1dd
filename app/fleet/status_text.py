"""`kernelgrader status`: the /admin/system page as plain text, for every course."""

from __future__ import annotations

from app.core.timefmt import when_text
from app.fleet.service import FleetSnapshot, describe_age, grading_sentence


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def render_status(fleet: FleetSnapshot, *, heartbeat_timeout: float) -> str:
    lines: list[str] = []
    sentence = grading_sentence(fleet.workers)
    lines.append("Grading: live workers compile and run kernels." if sentence == "ok" else sentence)
    lines.append("")
    lines.append(
        f"Workers: {len(fleet.alive)} alive of {len(fleet.workers)} heard from in the last day "
        f"(alive: heard within {heartbeat_timeout:g} s)."
    )
    rows = []
    for w in fleet.workers:
        job = "idle"
        if w.job is not None:
            job = (
                f"job {w.job.job_id} (submission {w.job.submission_id}, {w.job.course}/{w.job.lab})"
            )
        timing = ""
        if w.timed_at is not None:
            parts = []
            if w.timing_temperature_c is not None:
                parts.append(f"{w.timing_temperature_c} C")
            if w.timing_sm_clock_mhz is not None:
                parts.append(f"{w.timing_sm_clock_mhz} MHz")
            timing = ", ".join(parts)
        rows.append(
            [
                w.host,
                str(w.pid),
                w.gpu or "-",
                w.gpu_model or "-",
                w.arch,
                w.can or "nothing",
                w.state,
                f"{describe_age(w.seconds_since_heard)} ago",
                job,
                timing or "-",
            ]
        )
    if rows:
        lines += table(
            [
                "HOST",
                "PID",
                "GPU",
                "MODEL",
                "ARCH",
                "CAN",
                "STATE",
                "LAST HEARD",
                "JOB",
                "AT TIMING",
            ],
            rows,
        )
        notes = [f"  {w.host}:{w.pid}: {w.note}" for w in fleet.workers if w.note and w.alive]
        if notes:
            lines += ["", "Why some cannot run kernels:", *notes]
    else:
        lines.append("  none; start one with `kernelgrader worker` (`--gpus all` on a GPU host).")
    q = fleet.queue
    lines.append("")
    by_model = ", ".join(f"{m or 'any GPU'}: {n}" for m, n in sorted(q.waiting_by_model.items()))
    oldest = ""
    if q.oldest_queued_at is not None:
        waited = describe_age((fleet.now - q.oldest_queued_at).total_seconds())
        oldest = f"; the oldest has waited {waited} (submission {q.oldest_submission_id})"
    lines.append(
        f"Queue: {q.queued} queued, {q.started} being graded, {q.waiting_gpu} compiled and "
        f"waiting for a GPU{f' ({by_model})' if by_model else ''}{oldest}."
    )
    if fleet.jobs:
        lines += table(
            ["SUBMISSION", "COURSE/LAB", "STATE", "NEEDS GPU", "QUEUED", "ATTEMPT", "WORKER"],
            [
                [
                    str(j.submission_id),
                    f"{j.course}/{j.lab}",
                    j.state,
                    j.gpu_model or "any",
                    f"{describe_age((fleet.now - j.queued_at).total_seconds())} ago",
                    str(j.attempt),
                    j.worker or "-",
                ]
                for j in fleet.jobs
            ],
        )
    lines.append("")
    lines.append("Latest errors (failed on our side):" if fleet.errors else "Latest errors: none.")
    for e in fleet.errors:
        when = when_text(e.at, "-")
        lines.append(
            f"  {when}  submission {e.submission_id} ({e.course}/{e.lab}), job {e.job_id}"
            f"{f' on {e.worker}' if e.worker else ''}: {e.error}"
        )
    return "\n".join(lines) + "\n"
