"""`kernelgrader fleet status`: the /admin/fleet page as plain text, for every course."""

from __future__ import annotations

from app.core.timefmt import when_text
from app.fleet.policy import minutes
from app.fleet.status_text import table
from app.fleet.view import BorrowedView, FleetView, loop_sentence, settings_sentence


def model_name(model: str) -> str:
    return model or "any GPU"


def scheduler_said(b: BorrowedView) -> str:
    return " ".join(part for part in (b.scheduler_state, b.scheduler_reason) if part) or "-"


def render_fleet(view: FleetView) -> str:
    lines = [
        f"Fleet: {settings_sentence(view.settings)}.",
        loop_sentence(view),
        "",
    ]
    if view.plan.models:
        lines.append("Plan (borrowed workers per GPU model):")
        lines += table(
            ["MODEL", "NEEDED", "WANTED", "HELD", "SUBMIT", "CANCEL", "DRAIN"],
            [
                [
                    model_name(m.model),
                    str(m.needed),
                    str(m.wanted),
                    str(m.held),
                    str(m.submit or "-"),
                    ", ".join(m.cancel) or "-",
                    ", ".join(m.drain) or "-",
                ]
                for m in view.plan.models
            ],
        )
        for m in view.plan.models:
            lines.append(f"  {model_name(m.model)}:")
            said = [f"    {r.text}" for r in m.reasons]
            lines += said or ["    Nothing waits and no lab is due."]
    else:
        lines.append("Plan: nothing waits, no lab is due, and nothing is borrowed.")
    lines.append("")
    if view.borrowed:
        lines.append("Borrowed workers:")
        lines += table(
            ["JOB", "MODEL", "STATE", "SCHEDULER", "NODE", "WORKER", "IDLE", "SUBMITTED"],
            [
                [
                    b.key,
                    model_name(b.model),
                    b.state,
                    scheduler_said(b),
                    b.node or "-",
                    b.worker or "-",
                    "-" if b.idle_seconds is None else minutes(b.idle_seconds),
                    f"{minutes((view.now - b.submitted_at).total_seconds())} ago",
                ]
                for b in view.borrowed
            ],
        )
        for b in view.borrowed:
            why = b.end_reason if b.state == "draining" else b.reason
            lines.append(f"  {b.key}: {why or '-'}")
            if b.can_run is False:
                lines.append(f"    its worker cannot run kernels: {b.worker_note}")
    else:
        lines.append("Borrowed workers: none.")
    if view.ended:
        lines.append("")
        lines.append("Ended in the last day:")
        for b in view.ended:
            when = when_text(b.ended_at, "-")
            lines.append(f"  {b.key} ({model_name(b.model)}), {when}: {b.end_reason or '-'}")
    return "\n".join(lines) + "\n"
