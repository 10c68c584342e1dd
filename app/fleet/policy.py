"""How many workers to borrow per GPU model, and which to let go: a pure function of the queue,
the borrowed workers, the labs' due dates and last term's upload curves.

Plain values in, a `Plan` out: no database, no clock, no scheduler. `app.fleet.inputs` reads
the values, `app.fleet.autoscale` carries the plan out (through Slurm), the pages and
`kernelgrader fleet status` show it, and /metrics exports what each model needs (the
Kubernetes manifests scale on that).

Per GPU model (routing key, "" for labs that name none):

- the queue: one worker for every `jobs_per_worker` jobs waiting or being graded;
- the rush: from `lead_seconds` before a lab's due date until it, the workers last term's
  upload curve calls for over the rest of that stretch (its busiest bin, scaled by the
  students enrolled then and now, times the seconds a grading took then: jobs in the system
  at once, by Little's law), or `rush_workers` where there was no last term;
- workers not borrowed (a GPU host someone runs) serve first; the floor and the ceiling bound
  what is borrowed.

More wanted than held: submit the difference. Fewer: cancel pending jobs (newest first), then
drain running workers idle for `idle_seconds` or more (the most idle first); a worker idle less
than that stays, so a queue that dips for a minute does not cost a node. Draining workers are
not counted: they finish their task and exit.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta


class Phase(enum.StrEnum):
    pending = "pending"
    starting = "starting"
    running = "running"
    draining = "draining"


@dataclass(frozen=True)
class Demand:
    """One GPU model's jobs."""

    to_compile: int = 0  # queued, not compiled yet: they need this model's GPU once compiled
    to_run: int = 0  # compiled, waiting for a GPU of this model
    in_progress: int = 0  # held by a worker now


@dataclass(frozen=True)
class Borrowed:
    """A worker the fleet asked a scheduler for, not ended."""

    key: str  # "slurm:1234"
    model: str
    phase: Phase
    submitted_at: datetime
    idle_seconds: float | None = None  # running: since its latest task ended (None: unknown)


@dataclass(frozen=True)
class UploadCurve:
    """Last term's uploads to the same lab before its due date."""

    students: int
    bin_seconds: float
    # Uploads per bin, the bin just before the due date first: counts[i] covers
    # [due - (i + 1) * bin_seconds, due - i * bin_seconds).
    counts: tuple[int, ...]
    grading_seconds: float | None = None  # a grading's mean seconds then


@dataclass(frozen=True)
class Deadline:
    course_id: int
    label: str  # "course/lab"
    model: str
    due_at: datetime
    students: int
    curve: UploadCurve | None = None


@dataclass(frozen=True)
class NoGpu:
    """The latest worker borrowed for a model came up unable to run kernels."""

    at: datetime
    note: str


@dataclass(frozen=True)
class PolicySettings:
    floor: int = 0
    ceiling: int = 4
    jobs_per_worker: int = 6
    lead_seconds: float = 7200.0
    idle_seconds: float = 600.0
    rush_workers: int = 1
    grading_seconds: float = 30.0
    no_gpu_retry_seconds: float = 1800.0


@dataclass(frozen=True)
class Reason:
    """A sentence of the plan; one that names a course's lab says it again without the names,
    for staff of other courses."""

    text: str
    course_id: int | None = None
    anonymous: str = ""

    def for_courses(self, course_ids: set[int] | None) -> str:
        if self.course_id is None or course_ids is None or self.course_id in course_ids:
            return self.text
        return self.anonymous


@dataclass
class ModelPlan:
    model: str
    needed: int  # workers the load calls for, whoever runs them (before floor and ceiling)
    wanted: int  # borrowed workers wanted: pending, starting or running
    held: int  # borrowed workers pending, starting or running now
    submit: int = 0
    cancel: list[str] = field(default_factory=list)  # keys of pending jobs to cancel
    drain: list[str] = field(default_factory=list)  # keys of idle workers to drain
    reasons: list[Reason] = field(default_factory=list)


@dataclass
class Plan:
    at: datetime
    models: list[ModelPlan]

    def of(self, model: str) -> ModelPlan | None:
        return next((m for m in self.models if m.model == model), None)


def shown(model: str) -> str:
    return f"GPU model {model}" if model else "labs that name no GPU model"


def minutes(seconds: float) -> str:
    """'45 s', '12 min', '2 h 5 min': a span for the plan's sentences."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min"
    hours, rest = divmod(whole // 60, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def plan_fleet(
    *,
    now: datetime,
    demand: Mapping[str, Demand],
    borrowed: Sequence[Borrowed],
    deadlines: Sequence[Deadline],
    settings: PolicySettings,
    fixed: Mapping[str, int] | None = None,
    no_gpu: Mapping[str, NoGpu] | None = None,
    cannot_borrow: Mapping[str, str] | None = None,
) -> Plan:
    """The plan per GPU model in use: a model with jobs, with borrowed workers, or needed by a
    lab due in the future.

    `fixed`: live workers not borrowed that can run each model's jobs. `no_gpu`: models whose
    latest borrowed worker came up unable to run kernels. `cannot_borrow`: models the backend
    cannot place, and why (nothing is submitted for them).
    """
    fixed = fixed or {}
    no_gpu = no_gpu or {}
    cannot_borrow = cannot_borrow or {}
    models = {m for m, d in demand.items() if d.to_compile or d.to_run or d.in_progress}
    models |= {b.model for b in borrowed}
    models |= {d.model for d in deadlines if d.due_at > now}
    plans = [
        _plan_model(
            model,
            now=now,
            demand=demand.get(model, Demand()),
            borrowed=[b for b in borrowed if b.model == model],
            deadlines=[d for d in deadlines if d.model == model],
            settings=settings,
            fixed=fixed.get(model, 0),
            no_gpu=no_gpu.get(model),
            cannot_borrow=cannot_borrow.get(model),
        )
        for model in sorted(models)
    ]
    return Plan(at=now, models=plans)


def _plan_model(
    model: str,
    *,
    now: datetime,
    demand: Demand,
    borrowed: list[Borrowed],
    deadlines: list[Deadline],
    settings: PolicySettings,
    fixed: int,
    no_gpu: NoGpu | None,
    cannot_borrow: str | None,
) -> ModelPlan:
    reasons: list[Reason] = []
    queue_need = _queue_need(model, now, demand, settings, no_gpu, reasons)
    rush_need = sum(_rush_need(d, now, settings, reasons) for d in deadlines)
    needed = max(queue_need, rush_need)
    wanted = needed - fixed
    if fixed and needed:
        serve = "worker not borrowed serves" if fixed == 1 else "workers not borrowed serve"
        reasons.append(Reason(f"{fixed} {serve} {shown(model)} already."))
    in_use = any(d.due_at > now for d in deadlines)
    if wanted < settings.floor and in_use:
        reasons.append(
            Reason(f"The floor keeps {settings.floor} borrowed while a lab that needs it is due.")
        )
        wanted = settings.floor
    if wanted > settings.ceiling:
        reasons.append(Reason(f"Capped at the ceiling of {settings.ceiling} borrowed workers."))
        wanted = settings.ceiling
    wanted = max(0, wanted)
    active = [b for b in borrowed if b.phase != Phase.draining]
    plan = ModelPlan(model=model, needed=needed, wanted=wanted, held=len(active), reasons=reasons)
    if wanted > plan.held:
        if cannot_borrow:
            reasons.append(Reason(cannot_borrow))
        else:
            plan.submit = wanted - plan.held
    elif wanted < plan.held:
        _let_go(plan, active, settings)
    draining = len(borrowed) - len(active)
    if draining:
        reasons.append(Reason(f"{draining} draining: finishing a task, then exiting."))
    return plan


def _queue_need(
    model: str,
    now: datetime,
    demand: Demand,
    settings: PolicySettings,
    no_gpu: NoGpu | None,
    reasons: list[Reason],
) -> int:
    to_run = demand.to_run
    if no_gpu is not None and to_run:
        until = no_gpu.at + timedelta(seconds=settings.no_gpu_retry_seconds)
        if now < until:
            reasons.append(
                Reason(
                    f"The latest worker borrowed for {shown(model)} came up unable to run "
                    f"kernels ({no_gpu.note.rstrip('.')}): the {to_run} job{_s(to_run)} "
                    f"waiting for its GPU {'is' if to_run == 1 else 'are'} not counted for "
                    f"another {minutes((until - now).total_seconds())}; compiling still is."
                )
            )
            to_run = 0
    jobs = demand.to_compile + to_run + demand.in_progress
    if not jobs:
        return 0
    need = math.ceil(jobs / settings.jobs_per_worker)
    parts = [
        f"{n} {what}"
        for n, what in (
            (demand.to_compile, "to compile"),
            (to_run, "compiled, waiting for a GPU"),
            (demand.in_progress, "being graded"),
        )
        if n
    ]
    reasons.append(
        Reason(
            f"{jobs} job{_s(jobs)} ({', '.join(parts)}): one worker per "
            f"{settings.jobs_per_worker} makes {need}."
        )
    )
    return need


def _rush_need(
    deadline: Deadline, now: datetime, settings: PolicySettings, reasons: list[Reason]
) -> int:
    left = (deadline.due_at - now).total_seconds()
    if not 0 < left <= settings.lead_seconds:
        return 0
    due = f"is due in {minutes(left)}"
    curve = deadline.curve
    if curve is None or not curve.counts or curve.bin_seconds <= 0:
        need = settings.rush_workers
        text = (
            f"{{lab}} {due}, within the lead of {minutes(settings.lead_seconds)}, with no "
            f"earlier term to learn from: {need} worker{_s(need)}."
        )
        reasons.append(_named(text, deadline))
        return need
    # The bins from now until the due date; the one now falls in counts whole.
    last = min(len(curve.counts) - 1, int(left // curve.bin_seconds))
    peak = max(curve.counts[: last + 1])
    scale = deadline.students / curve.students if curve.students > 0 else 1.0
    rate = peak * scale / curve.bin_seconds
    seconds = curve.grading_seconds or settings.grading_seconds
    at_once = rate * seconds
    need = math.ceil(at_once / settings.jobs_per_worker) if peak else 0
    text = (
        f"{{lab}} {due}; last term ({curve.students} students, {deadline.students} now) "
        f"peaked at {peak} upload{_s(peak)} in {minutes(curve.bin_seconds)} over the same "
        f"stretch before its due date: about {at_once:.1f} jobs at once at {seconds:.0f} s a "
        f"grading, so {need} worker{_s(need)}."
    )
    reasons.append(_named(text, deadline))
    return need


def _let_go(plan: ModelPlan, active: list[Borrowed], settings: PolicySettings) -> None:
    excess = plan.held - plan.wanted
    pending = sorted(
        (b for b in active if b.phase == Phase.pending), key=lambda b: b.submitted_at, reverse=True
    )
    for b in pending[:excess]:
        plan.cancel.append(b.key)
    excess -= len(plan.cancel)
    if plan.cancel:
        plan.reasons.append(
            Reason(f"{len(plan.cancel)} pending job{_s(len(plan.cancel))} not needed: cancelled.")
        )
    if excess <= 0:
        return
    running = [b for b in active if b.phase == Phase.running]
    idle = [
        (b.idle_seconds, b.key)
        for b in running
        if b.idle_seconds is not None and b.idle_seconds >= settings.idle_seconds
    ]
    plan.drain = [key for _, key in sorted(idle, reverse=True)[:excess]]
    if plan.drain:
        plan.reasons.append(
            Reason(
                f"{len(plan.drain)} idle for {minutes(settings.idle_seconds)} or more and not "
                "needed: drained (each finishes its task, takes no new one, and exits)."
            )
        )
    kept = excess - len(plan.drain)
    if kept > 0:
        plan.reasons.append(
            Reason(
                f"{kept} more than needed, kept until idle for "
                f"{minutes(settings.idle_seconds)} (busy, starting, or idle for less)."
            )
        )


def _named(text: str, deadline: Deadline) -> Reason:
    return Reason(
        text.format(lab=deadline.label),
        course_id=deadline.course_id,
        anonymous=text.format(lab="A lab"),
    )


def _s(n: int) -> str:
    return "" if n == 1 else "s"
