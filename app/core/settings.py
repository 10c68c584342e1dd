"""Settings from the environment (prefix KERNELGRADER_) and an optional `.env` file."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_SECRET_KEY = "dev-insecure-secret-change-me"
DEV_GRADING_SECRET = "dev-grading-secret"
MIN_SECRET_LENGTH = 16


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="KERNELGRADER_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    env: Literal["development", "production", "test"] = "development"
    data_dir: Path = Path("./var")
    # Empty means "a file under data_dir"; filled in by the validator below.
    database_url: str = ""
    broker_url: str = ""
    secret_key: str = DEV_SECRET_KEY
    # Mixed into the seeds of hidden cases so students cannot reproduce them offline.
    grading_secret: str = DEV_GRADING_SECRET
    max_upload_bytes: int = 256 * 1024
    default_arch: str = "sm_90"
    # A worker beats every heartbeat_seconds; a job silent for heartbeat_timeout_seconds is lost.
    heartbeat_seconds: float = 5.0
    heartbeat_timeout_seconds: float = 60.0
    # A submission still queued this long after it was committed, never sent, is sent again.
    resend_after_seconds: float = 10.0
    # A job sent this long ago and still not taken is sent once more, in case the broker lost
    # it; a second copy is harmless, since the worker that takes a job first holds it.
    resend_sent_after_seconds: float = 900.0
    sweep_seconds: float = 5.0
    max_attempts: int = 3
    # How often the SQLite broker is polled for new messages: a few cheap queries a second,
    # and a new upload waits half of this on average before a worker sees it.
    broker_polling_seconds: float = 0.1
    # false: workers only compile, even where a GPU is present (CI, web-only hosts).
    run_on_gpu: bool = True
    # Jobs one worker process grades at once (threads). On a GPU worker their correctness runs
    # share the GPU; timed sections still take it alone (the per-GPU lock).
    worker_concurrency: int = Field(default=3, ge=1, le=32)
    # Keep sandboxed children started ahead of need (CuPy imported, context made, kernels
    # loaded), so a submission never waits for a process to start.
    prestart: bool = True
    # A kept reference timing older than this is measured again (seconds; 0: always measure).
    reference_timing_max_age_seconds: float = Field(default=7 * 24 * 3600, ge=0)
    session_max_age_seconds: int = 14 * 24 * 3600
    # Submissions one student may make to one lab per window (0: no limit); staff are exempt.
    submission_rate_limit: int = 30
    submission_rate_window_seconds: int = 3600
    # Failed logins for one account within the window before it must wait; an address gets
    # five times as many, since a classroom may share one.
    login_max_failures: int = 5
    login_window_seconds: int = 900
    # Where people reach this server; invite links printed by the CLI start with it.
    public_url: str = "http://localhost:8000"
    # The bearer token Prometheus sends to /metrics; empty turns /metrics off.
    metrics_token: str = ""

    @model_validator(mode="after")
    def _fill_defaults_and_refuse_dev_secrets(self) -> Settings:
        data_dir = self.data_dir.resolve()
        if not self.database_url:
            self.database_url = f"sqlite:///{data_dir / 'kernelgrader.sqlite'}"
        if not self.broker_url:
            self.broker_url = f"sqla+sqlite:///{data_dir / 'broker.sqlite'}"
        if self.env != "development":
            # An empty or short key is as guessable as the default: anyone could sign a login
            # cookie for any user, or work out the hidden cases' seeds.
            for name, value in (
                ("KERNELGRADER_SECRET_KEY", self.secret_key),
                ("KERNELGRADER_GRADING_SECRET", self.grading_secret),
            ):
                if len(value) < MIN_SECRET_LENGTH:
                    raise ValueError(
                        f"{name} is shorter than {MIN_SECRET_LENGTH} characters; set it to a long "
                        "random string (e.g. `openssl rand -hex 32`)."
                    )
            if self.metrics_token and len(self.metrics_token) < MIN_SECRET_LENGTH:
                raise ValueError(
                    f"KERNELGRADER_METRICS_TOKEN is shorter than {MIN_SECRET_LENGTH} characters; "
                    "set it to a long random string (e.g. `openssl rand -hex 32`), or leave it "
                    "empty to turn /metrics off."
                )
            if self.secret_key == DEV_SECRET_KEY:
                raise ValueError(
                    "KERNELGRADER_SECRET_KEY is still the development default; set it to a long "
                    "random string, or run with KERNELGRADER_ENV=development."
                )
            if self.grading_secret == DEV_GRADING_SECRET:
                raise ValueError(
                    "KERNELGRADER_GRADING_SECRET is still the development default; set it to a "
                    "long random string, or run with KERNELGRADER_ENV=development."
                )
        return self

    def ensure_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)


@functools.cache
def get_settings() -> Settings:
    return Settings()
