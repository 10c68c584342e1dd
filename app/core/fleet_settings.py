"""The fleet's settings: the policy's thresholds (KERNELGRADER_FLEET_*) and how workers are
borrowed from Slurm (KERNELGRADER_SLURM_*). Read by the fleet's loop and its pages, and by the
sentence an upload gets when no worker is up (app.jobs.workers), so they live here, apart from
the service's own settings; the same environment and `.env` files."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.errors import DomainError
from app.core.settings import env_files


class FleetSettingsInvalid(DomainError):
    """The fleet's settings do not hold; the message says which and how (a server's fault)."""

    status_code = 500


class FleetSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="KERNELGRADER_", env_file=env_files(), env_file_encoding="utf-8", extra="ignore"
    )

    # "" : no scheduler; the plan is shown (and /metrics carries it) but nothing is borrowed.
    fleet_backend: Literal["", "slurm"] = ""
    # Borrowed workers kept per GPU model in use (a model some lab due in the future needs),
    # and never more than the ceiling per model.
    fleet_floor: int = Field(default=0, ge=0)
    fleet_ceiling: int = Field(default=4, ge=0)
    # One worker for every this many jobs waiting or being graded.
    fleet_jobs_per_worker: int = Field(default=6, ge=1)
    # Scale up this long before a lab's due date, from last term's upload curve where there is
    # one, else to fleet_rush_workers.
    fleet_lead_seconds: float = Field(default=7200.0, ge=0)
    fleet_rush_workers: int = Field(default=1, ge=0)
    # A grading's seconds where last term measured none (the rush's estimate).
    fleet_grading_seconds: float = Field(default=30.0, gt=0)
    # A borrowed worker idle this long drains (finishes its task, takes no new one, exits)
    # unless the plan still wants it.
    fleet_idle_seconds: float = Field(default=600.0, ge=0)
    # After a worker borrowed for a GPU model came up unable to run kernels, jobs waiting for
    # that model's GPU are not counted for this long (compiling still is).
    fleet_no_gpu_retry_seconds: float = Field(default=1800.0, ge=0)
    # A job running this long whose worker never registered, or a draining worker still
    # running this long after it was asked to drain, is cancelled.
    fleet_start_seconds: float = Field(default=900.0, gt=0)
    fleet_drain_seconds: float = Field(default=900.0, gt=0)
    # How often `kernelgrader fleet run` looks at the queue and the scheduler.
    fleet_tick_seconds: float = Field(default=30.0, gt=0)

    slurm_partition: str = ""
    slurm_account: str = ""
    slurm_qos: str = ""
    slurm_time_limit: str = "04:00:00"
    slurm_gres: str = "gpu:1"
    slurm_cpus: int = Field(default=8, ge=1)
    slurm_memory: str = "32G"
    # GPU model (routing key, e.g. "h100"; "" : labs that name none) -> --constraint, as JSON:
    # {"": "gpu", "h100": "h100|h100_nvl"}. A model missing here is not borrowed for.
    slurm_constraints: dict[str, str] = Field(default_factory=lambda: {"": ""})
    # Shell lines the job script runs before the worker (`module load ...`, a venv's activate).
    slurm_setup: str = ""
    slurm_worker_command: str = "kernelgrader worker"
    # A file the job script sources (set -a): the database and broker URLs, the secrets. Kept
    # out of Slurm's job records, which hold the script and the submitted environment.
    slurm_env_file: str = ""
    slurm_chdir: str = ""
    slurm_output: str = "kernelgrader-worker-%j.log"
    slurm_job_name: str = "kernelgrader-worker"
    # SIGTERM reaches the worker this long before the time limit: it finishes its task and
    # exits instead of being killed in the middle of one.
    slurm_signal_seconds: int = Field(default=300, ge=0)

    @model_validator(mode="after")
    def _floor_under_ceiling(self) -> FleetSettings:
        if self.fleet_floor > self.fleet_ceiling:
            raise ValueError(
                f"KERNELGRADER_FLEET_FLOOR ({self.fleet_floor}) is above "
                f"KERNELGRADER_FLEET_CEILING ({self.fleet_ceiling}); lower the floor or raise "
                "the ceiling."
            )
        return self


def fleet_settings() -> FleetSettings:
    """Read afresh each time: a loop's pass is seconds apart, and tests change them."""
    try:
        return FleetSettings()
    except ValidationError as exc:
        said = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            said.append(f"KERNELGRADER_{where.upper()}: {message}" if where else message)
        raise FleetSettingsInvalid("The fleet's settings do not hold: " + " ".join(said)) from None
