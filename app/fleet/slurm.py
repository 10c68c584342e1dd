"""Workers borrowed from Slurm: `sbatch` a job that runs `kernelgrader worker` on one GPU,
`scancel` one that must go, and `squeue` (then `sacct`) to learn what became of each.

The job script holds no secret: Slurm keeps a job's script and submitted environment in its
records. It is submitted with `--export=NONE` (the node gives the account's login environment)
and sources KERNELGRADER_SLURM_ENV_FILE for the database and broker URLs and the secrets; it
names itself to the worker through KERNELGRADER_FLEET_JOB, so the fleet can tell which
registered worker runs in which job. `exec` makes the worker the batch shell, so `--signal=B:`
reaches it: SIGTERM a few minutes before the time limit is Celery's warm shutdown (the task in
hand finishes, no new one is taken). `--no-requeue`: a preempted job ends, and the plan decides
whether another is needed.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.core.fleet_settings import FleetSettings
from app.fleet.policy import shown

log = logging.getLogger(__name__)

BACKEND = "slurm"
# Slurm's job states (squeue's %T, sacct's State), as the fleet reads them.
PENDING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "CONFIGURING"}
RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
ENDED = {
    "COMPLETED": "its worker exited",
    "CANCELLED": "it was cancelled",
    "FAILED": "its worker exited with an error",
    "TIMEOUT": "Slurm ended it at its time limit",
    "PREEMPTED": "Slurm preempted it for a job of higher priority",
    "NODE_FAIL": "its node failed",
    "BOOT_FAIL": "its node failed to boot",
    "OUT_OF_MEMORY": "it ran out of the memory it asked for",
    "DEADLINE": "it passed its deadline",
    "REVOKED": "Slurm revoked it",
    "SPECIAL_EXIT": "it ended in Slurm's special exit state",
}
TIMEOUT_S = 60.0


class SlurmError(Exception):
    """A Slurm command failed; the message says which, what it answered, and what to check."""


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: str  # Slurm's word: PENDING, RUNNING, TIMEOUT, ...
    reason: str = ""  # why it pends ("Priority", "Resources"), or "" for "None"
    node: str = ""

    @property
    def phase(self) -> str:
        """pending, running or ended."""
        if self.state in PENDING:
            return "pending"
        if self.state in RUNNING:
            return "running"
        return "ended"

    def ended_because(self) -> str:
        return ENDED.get(self.state, f"Slurm lists it as {self.state}")


def constraint_for(settings: FleetSettings, model: str) -> str | None:
    """The --constraint for a GPU model ("" : none), or None when no constraint is set for it."""
    return settings.slurm_constraints.get(model)


def cannot_place(settings: FleetSettings, model: str) -> str | None:
    """Why no job is submitted for this model, or None."""
    if constraint_for(settings, model) is not None:
        return None
    return (
        f"No Slurm constraint is set for {shown(model)}, so no worker is borrowed for it: add "
        f'"{model}" to KERNELGRADER_SLURM_CONSTRAINTS (the --constraint that picks nodes with '
        "that GPU)."
    )


def job_script(settings: FleetSettings, model: str) -> str:
    lines = [
        "#!/bin/bash",
        f"# A kernelgrader worker for {shown(model)}, borrowed by `kernelgrader fleet run`.",
        "set -eu",
        'export KERNELGRADER_FLEET_JOB="slurm:${SLURM_JOB_ID}"',
    ]
    if settings.slurm_env_file:
        # Exported to the worker: the database and broker URLs and the secrets.
        lines += ["set -a", f". {shlex.quote(settings.slurm_env_file)}", "set +a"]
    if settings.slurm_setup.strip():
        lines.append(settings.slurm_setup.strip())
    lines.append(f"exec {settings.slurm_worker_command}")
    return "\n".join(lines) + "\n"


def sbatch_args(settings: FleetSettings, model: str) -> list[str]:
    args = [
        "sbatch",
        "--parsable",
        f"--job-name={settings.slurm_job_name}",
        "--no-requeue",
        "--export=NONE",
        f"--cpus-per-task={settings.slurm_cpus}",
        f"--mem={settings.slurm_memory}",
        f"--time={settings.slurm_time_limit}",
        f"--output={settings.slurm_output}",
    ]
    if settings.slurm_gres:
        args.append(f"--gres={settings.slurm_gres}")
    for option, value in (
        ("partition", settings.slurm_partition),
        ("account", settings.slurm_account),
        ("qos", settings.slurm_qos),
        ("constraint", constraint_for(settings, model) or ""),
        ("chdir", settings.slurm_chdir),
    ):
        if value:
            args.append(f"--{option}={value}")
    if settings.slurm_signal_seconds:
        args.append(f"--signal=B:TERM@{settings.slurm_signal_seconds}")
    return args


def _run(args: Sequence[str], *, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(args), input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except FileNotFoundError:
        raise SlurmError(
            f"`{args[0]}` is not installed here: run the fleet on a host that can submit Slurm "
            "jobs (a login node), or put Slurm's commands on PATH."
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"`{args[0]}` did not answer within {TIMEOUT_S:.0f} s: slurmctld may be busy or "
            "down; the fleet tries again at its next pass."
        ) from None


def _said(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stderr or done.stdout or "").strip()
    return text.splitlines()[-1] if text else f"exit status {done.returncode}"


def submit(settings: FleetSettings, model: str) -> str:
    """Submit one worker's job; its Slurm job id."""
    done = _run(sbatch_args(settings, model), stdin=job_script(settings, model))
    if done.returncode != 0:
        raise SlurmError(
            f"sbatch refused the worker's job ({_said(done)}); check KERNELGRADER_SLURM_PARTITION, "
            "_ACCOUNT, _QOS, _GRES and _CONSTRAINTS against `sinfo` and `sacctmgr show assoc`."
        )
    # --parsable: "id" or "id;cluster".
    job_id = done.stdout.strip().split(";", 1)[0]
    if not job_id.isdigit():
        raise SlurmError(f"sbatch answered {done.stdout.strip()!r}, not a job id.")
    return job_id


def cancel(job_id: str) -> None:
    done = _run(["scancel", job_id])
    if done.returncode != 0:
        raise SlurmError(f"scancel {job_id} failed ({_said(done)}).")


def parse_squeue(text: str) -> list[JobStatus]:
    """Lines of `squeue --format=%i|%T|%r|%N`."""
    found = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4 or not parts[0]:
            continue
        job_id, state, reason, node = parts
        found.append(JobStatus(job_id, state, "" if reason == "None" else reason, node))
    return found


def parse_sacct(text: str) -> list[JobStatus]:
    """Lines of `sacct --parsable2 --format=JobID,State,NodeList`; "CANCELLED by 0" is
    CANCELLED."""
    found = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[0].isdigit():
            continue  # a step ("123.batch"), or not a row
        job_id, state, node = parts
        words = state.split()
        found.append(JobStatus(job_id, words[0] if words else "", "", node))
    return found


def observe(job_ids: Iterable[str]) -> dict[str, JobStatus]:
    """What Slurm says of these jobs; a job it no longer knows is missing from the answer."""
    ids = sorted(set(job_ids), key=lambda job_id: (len(job_id), job_id))
    if not ids:
        return {}
    listed = _run(
        ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}", "--format=%i|%T|%r|%N"]
    )
    seen: dict[str, JobStatus] = {}
    if listed.returncode == 0:
        seen = {s.job_id: s for s in parse_squeue(listed.stdout)}
    elif "Invalid job id" not in listed.stderr:  # none of them is known any more
        raise SlurmError(f"squeue failed ({_said(listed)}); is slurmctld up?")
    gone = [job_id for job_id in ids if job_id not in seen]
    if gone:
        # Jobs squeue forgot (MinJobAge after they ended): accounting may still know them.
        past = _run(
            [
                "sacct",
                "--noheader",
                "--parsable2",
                "--allocations",
                f"--jobs={','.join(gone)}",
                "--format=JobID,State,NodeList",
            ]
        )
        if past.returncode == 0:
            seen |= {s.job_id: s for s in parse_sacct(past.stdout) if s.job_id in gone}
        else:
            log.info("sacct could not say what became of jobs %s: %s", gone, _said(past))
    return seen
