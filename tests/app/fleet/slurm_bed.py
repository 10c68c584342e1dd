"""A real single-node Slurm for the fleet's tests, as `scripts/ci-slurm.sh` starts it and
names it (KERNELGRADER_TEST_SLURM_CONF, _PARTITION, _CONSTRAINT; `.ci/run` exports them).

Without them the tests skip and say how to run them, except under CI, where they fail. The
workers the tests borrow run on this machine as Slurm jobs, read a database and a broker file
of the test's own (through the job script's env file, as on a cluster), find no GPU and so
compile only, as a local worker without a GPU does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from tests.ci import skip_unless_ci

CONF_VAR = "KERNELGRADER_TEST_SLURM_CONF"
PARTITION_VAR = "KERNELGRADER_TEST_SLURM_PARTITION"
CONSTRAINT_VAR = "KERNELGRADER_TEST_SLURM_CONSTRAINT"
HOW_TO_RUN = (
    "run scripts/ci-slurm.sh as root (it installs Debian's slurm-wlm and munge, starts a "
    "single-node Slurm on this host and prints three lines), export those lines, then run "
    "the test again; `scripts/ci-slurm.sh stop` stops the daemons it started"
)

T = TypeVar("T")


@dataclass(frozen=True)
class Slurm:
    conf: str
    partition: str
    constraint: str

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": self.conf}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), env=self.env(), capture_output=True, text=True, timeout=60
        )


def slurm_or_skip() -> Slurm:
    conf = os.environ.get(CONF_VAR, "").strip()
    if not conf:
        skip_unless_ci(f"{CONF_VAR} is not set: {HOW_TO_RUN}")
    if shutil.which("sbatch") is None:
        skip_unless_ci(f"sbatch is not installed: {HOW_TO_RUN}")
    slurm = Slurm(
        conf=conf,
        partition=os.environ.get(PARTITION_VAR, "").strip(),
        constraint=os.environ.get(CONSTRAINT_VAR, "").strip(),
    )
    answered = slurm.run("sinfo", "--noheader", "--format=%T")
    if answered.returncode != 0 or not answered.stdout.strip():
        skip_unless_ci(
            f"Slurm does not answer with {conf} ({(answered.stderr or '').strip()}): {HOW_TO_RUN}"
        )
    return slurm


def worker_command() -> str:
    # Jobs start with the account's login environment (--export=NONE), so the virtualenv's
    # program is named by its path, as the README tells a cluster's administrator to do.
    exe = Path(sys.executable).parent / "kernelgrader"
    return f"{exe} worker --loglevel INFO"


def write_env_file(path: Path, **variables: str) -> Path:
    path.write_text("".join(f"KERNELGRADER_{k.upper()}={v}\n" for k, v in variables.items()))
    path.chmod(0o600)
    return path


@contextmanager
def environment(**variables: str) -> Iterator[None]:
    """The block runs with these variables set (names as given), then the earlier ones back."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in variables.items():
            patch.setenv(key, value)
        yield


def wait_for(
    what: str,
    check: Callable[[], T | None],
    *,
    timeout: float,
    every: float = 0.3,
    between: Callable[[], object] | None = None,
    logs: Callable[[], str] | None = None,
) -> T:
    """Poll `check` until it returns something other than None or False; fail after `timeout`
    with `what` and the logs. `between` runs before each poll (a fleet pass, say)."""
    deadline = time.monotonic() + timeout
    while True:
        if between is not None:
            between()
        found = check()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:g} s.\n{logs() if logs else ''}")
        time.sleep(every)


def job_logs(folder: Path, limit: int = 4000) -> str:
    parts = []
    for log in sorted(folder.glob("kernelgrader-worker-*.log")):
        text = log.read_text(errors="replace")
        parts.append(f"--- {log.name} ---\n{text[-limit:]}")
    return "\n".join(parts) or "(no job logs)"
