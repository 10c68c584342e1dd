"""Settings from the environment (prefix KERNELGRADER_) and an optional `.env` file."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from graders.config import (
    DEFAULT_GPU_JOBS,
    DEFAULT_RESERVE_MB,
    DEV_GRADING_SECRET,
    FALLBACK_ARCH,
    EngineSettings,
)

# The public development defaults of earlier versions: refused outside development, and never
# used to sign anything (a development install signs with a key of its own, below).
DEV_SECRET_KEY = "dev-insecure-secret-change-me"
MIN_SECRET_LENGTH = 16
# Where a development install without KERNELGRADER_SECRET_KEY keeps the key it made.
SECRET_KEY_FILE = "secret_key"


def checkout_root() -> Path | None:
    """The source checkout this package runs from (an editable install, as
    `scripts/setup.sh` makes), or None for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "reference_kernels").is_dir():
        return root
    return None


def default_data_dir() -> Path:
    """Where the data lives when KERNELGRADER_DATA_DIR is not set, whatever the working
    directory: `var/` in the checkout (where `scripts/serve.sh` puts it), else the user's data
    folder ($XDG_DATA_HOME/kernelgrader, ~/.local/share/kernelgrader)."""
    root = checkout_root()
    if root is not None:
        return root / "var"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kernelgrader"


def env_files() -> tuple[Path, ...]:
    # The checkout's .env, then the working directory's (which wins where both set a value).
    root = checkout_root()
    return (root / ".env", Path(".env")) if root is not None else (Path(".env"),)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="KERNELGRADER_", env_file=env_files(), env_file_encoding="utf-8", extra="ignore"
    )

    env: Literal["development", "production", "test"] = "development"
    data_dir: Path = Field(default_factory=default_data_dir)
    # Empty means "a file under data_dir"; filled in by the validator below.
    database_url: str = ""
    broker_url: str = ""
    # Signs login cookies. Empty in development: a random key made once and kept in the data
    # folder (session_secret()), so no install signs with a key anybody can read.
    secret_key: str = ""
    # Mixed into the seeds of hidden cases so students cannot reproduce them offline.
    grading_secret: str = DEV_GRADING_SECRET
    max_upload_bytes: int = 256 * 1024
    default_arch: str = FALLBACK_ARCH
    # A worker beats every heartbeat_seconds; a job silent for heartbeat_timeout_seconds is lost.
    heartbeat_seconds: float = 5.0
    heartbeat_timeout_seconds: float = 30.0
    # A submission still queued this long after it was committed, never sent, is sent again.
    resend_after_seconds: float = 10.0
    # A job sent this long ago and not yet started is sent again once the broker shows it lost
    # it: its queue is empty, or a job sent after it has started. A second copy is harmless,
    # since the worker that claims a job first holds it.
    resend_unstarted_after_seconds: float = 20.0
    # A job sent this long ago and still not started is sent again whatever the broker shows.
    resend_sent_after_seconds: float = 300.0
    sweep_seconds: float = 5.0
    max_attempts: int = 3
    # How often the SQLite broker is polled for new messages: a few cheap queries a second,
    # and a new upload waits half of this on average before a worker sees it.
    broker_polling_seconds: float = 0.1
    # A message of the SQLite broker taken this long ago and never acknowledged belonged to a
    # worker that died; it is deleted (the sweeper has sent its job again long before).
    broker_forget_taken_after_seconds: float = 3600.0
    # Requests of a web process: database work runs in up to `web_threads` threads, one hop
    # per request; past `max_requests_in_flight` a request is refused at once with 503. Few
    # threads: they share one interpreter lock, and with 32 a rush on two cores answered its
    # slowest uploads after 8-10 s where 8 threads answered all within 1.5 s.
    web_threads: int = 8
    max_requests_in_flight: int = 100
    # A request that waits this long for a request thread is answered 503, so that every
    # request is answered within a few seconds whatever the load.
    max_request_wait_seconds: float = 3.0
    # The database connection pool of each process (pool_size kept open, max_overflow more on
    # demand, pool_timeout seconds to wait for one); it must hold web_threads + 3.
    db_pool_size: int = 10
    db_max_overflow: int = 10
    db_pool_timeout_seconds: float = 10.0
    # How long a SQLite statement waits for another writer before the request is answered 503.
    sqlite_busy_timeout_seconds: float = 5.0
    # Retry-After sent with a 503 (overload, or the database away).
    retry_after_seconds: int = 5
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
    # GPU memory a worker leaves free when it admits gradings (graders.run.memory).
    gpu_memory_reserve_mb: int = Field(default=DEFAULT_RESERVE_MB, ge=0)
    # Gradings at once on one GPU, across every worker and service of the host (0: no cap);
    # waiters go in the order they came (graders.run.memory).
    gpu_jobs: int = Field(default=DEFAULT_GPU_JOBS, ge=0, le=64)
    # Gradings whose timed section other work overlapped are timed again at most this often.
    contended_retimes: int = Field(default=3, ge=0, le=20)
    # Profile every fully correct grading with Nsight Compute afterwards (at a lower priority
    # than any grading), where a GPU worker has ncu; staff can ask for any submission anyway.
    profile_after_grading: bool = True
    # How long one profiling (ncu over the submission's launches, and the references not yet
    # kept) may take before it is stopped.
    profile_timeout_seconds: float = Field(default=180.0, gt=0, le=600)
    # Profiles on the broker or running at once, fleet-wide; each holds a GPU's lock shared,
    # and lets go of it (to run again later) as soon as a timed section waits.
    profile_in_flight: int = Field(default=1, ge=1, le=64)
    # .ncu-rep files kept per student and lab (the newest); older profiles keep their findings.
    profile_reports_kept: int = Field(default=3, ge=0)
    session_max_age_seconds: int = 14 * 24 * 3600
    # Submissions one student may make to one lab per window (0: no limit); staff are exempt.
    submission_rate_limit: int = 30
    submission_rate_window_seconds: int = 3600
    # Failed logins for one account from one address within the window before that pair must
    # wait (the account's owner elsewhere does not); an address gets five times as many, for
    # all accounts together, since a classroom may share one.
    login_max_failures: int = 5
    login_window_seconds: int = 900
    # Where people reach this server; invite links printed by the CLI start with it.
    public_url: str = "http://localhost:8000"
    # The bearer token Prometheus sends to /metrics; empty turns /metrics off.
    metrics_token: str = ""
    # Outgoing mail (reset links, invite links) through this SMTP server; an empty host turns
    # mail off, and the pages then tell people to ask the staff for a link.
    smtp_host: str = ""
    smtp_port: int = Field(default=587, ge=1, le=65535)
    # starttls (upgrade a plain connection, usually port 587), ssl (TLS from the start, usually
    # 465) or none (a relay on the same host or network only).
    smtp_security: Literal["starttls", "ssl", "none"] = "starttls"
    smtp_username: str = ""
    smtp_password: str = ""
    smtp_from: str = ""
    smtp_timeout_seconds: float = Field(default=10.0, gt=0)
    # How long a "forgot password" link works.
    password_reset_minutes: int = Field(default=60, ge=5, le=7 * 24 * 60)
    # How long a refused sign-in or launch is kept for the staff to read (app.auth.problems).
    sign_in_problem_days: int = Field(default=30, ge=1, le=3650)

    @model_validator(mode="after")
    def _fill_defaults_and_refuse_dev_secrets(self) -> Settings:
        data_dir = self.data_dir.resolve()
        if not self.database_url:
            self.database_url = f"sqlite:///{data_dir / 'kernelgrader.sqlite'}"
        if not self.broker_url:
            self.broker_url = f"sqla+sqlite:///{data_dir / 'broker.sqlite'}"
        if self.web_threads < 1 or self.max_requests_in_flight < 1:
            raise ValueError(
                "KERNELGRADER_WEB_THREADS and KERNELGRADER_MAX_REQUESTS_IN_FLIGHT must be at "
                "least 1."
            )
        pool = self.db_pool_size + self.db_max_overflow
        if pool < self.web_threads + 3:
            # Each request thread holds at most one connection; the token-use writer, the job
            # sender (noting sends the broker refused) and the health probe's spare need the
            # other three. Fewer, and threads wait on the pool.
            raise ValueError(
                f"KERNELGRADER_DB_POOL_SIZE + KERNELGRADER_DB_MAX_OVERFLOW "
                f"({self.db_pool_size} + {self.db_max_overflow}) must be at least "
                f"KERNELGRADER_WEB_THREADS + 3 ({self.web_threads + 3}); raise the pool or "
                "lower the threads."
            )
        if pool < 2 * self.worker_concurrency + 2:
            # A worker's job threads each hold one, and so do their heartbeats; the sweep and
            # the registry's beat need the other two. Fewer, and a job waits on the pool.
            raise ValueError(
                f"KERNELGRADER_DB_POOL_SIZE + KERNELGRADER_DB_MAX_OVERFLOW "
                f"({self.db_pool_size} + {self.db_max_overflow}) must be at least "
                f"2 x KERNELGRADER_WORKER_CONCURRENCY + 2 ({2 * self.worker_concurrency + 2}); "
                "raise the pool or lower the concurrency."
            )
        if self.smtp_host and "@" not in self.smtp_from:
            raise ValueError(
                "KERNELGRADER_SMTP_FROM must be the address mail is sent from (for example "
                "'kernelgrader <grader@uni.edu>') when KERNELGRADER_SMTP_HOST is set."
            )
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

    def engine(self) -> EngineSettings:
        """What a worker tells the grading engine (graders.config): the engine reads none of
        these itself."""
        return EngineSettings(
            grading_secret=self.grading_secret,
            default_arch=self.default_arch,
            gpu_memory_reserve_mb=self.gpu_memory_reserve_mb,
            gpu_jobs=self.gpu_jobs,
        )

    @property
    def mail_enabled(self) -> bool:
        return bool(self.smtp_host)

    def session_secret(self) -> str:
        """The key that signs login cookies: KERNELGRADER_SECRET_KEY, or in development where
        it is unset (or the public default) the data folder's own random key."""
        if self.env != "development" or (self.secret_key and self.secret_key != DEV_SECRET_KEY):
            return self.secret_key
        return kept_secret(self.data_dir.resolve() / SECRET_KEY_FILE)

    def weak_secrets(self) -> list[str]:
        """The secrets that anyone could know or guess (unset, short or a public default):
        fine on loopback in development, never where others reach the server."""
        weak = []
        session = self.session_secret()
        if len(session) < MIN_SECRET_LENGTH or session == DEV_SECRET_KEY:
            weak.append("KERNELGRADER_SECRET_KEY")
        grading = self.grading_secret
        if len(grading) < MIN_SECRET_LENGTH or grading == DEV_GRADING_SECRET:
            weak.append("KERNELGRADER_GRADING_SECRET")
        return weak

    def sqlite_file(self) -> Path | None:
        """The SQLite database file, where the database is one (the default)."""
        prefix = "sqlite:///"
        if not self.database_url.startswith(prefix):
            return None
        name = self.database_url.removeprefix(prefix).split("?", 1)[0]
        return Path(name) if name and name != ":memory:" else None

    def ensure_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)


def kept_secret(path: Path) -> str:
    """A random key kept in `path` (made once, readable by its owner only); every process of
    the install (the web server, its local worker, a second web process) reads the same."""
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    made = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        # A link is made whole or not at all: of two processes starting at once, one key wins
        # and both read it.
        with contextlib.suppress(FileExistsError):
            os.link(made, path)
    finally:
        made.unlink(missing_ok=True)
    return _read_secret(path)


def _read_secret(path: Path) -> str:
    key = path.read_text(encoding="ascii").strip()
    if len(key) < MIN_SECRET_LENGTH:
        raise ValueError(
            f"{path} holds no usable key (shorter than {MIN_SECRET_LENGTH} characters); delete "
            "it to have a new one made, or set KERNELGRADER_SECRET_KEY."
        )
    return key


@functools.cache
def get_settings() -> Settings:
    return Settings()
