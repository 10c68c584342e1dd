"""`python -m graders warm-cache` builds the CuPy kernel cache once; a worker that starts
afterwards finds it built and starts grading at once, whatever its data folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

_WORKER_START = """
import json, time
from graders.run.kernel_cache import ensure_built
began = time.monotonic()
state = ensure_built()
print(json.dumps({"folder": str(state.folder), "built_now": state.built_now,
                  "seconds": round(time.monotonic() - began, 2)}))
"""


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.gpu
def test_warm_cache_builds_once_and_a_starting_worker_finds_it_built(tmp_path: Path) -> None:
    import json

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "KERNELGRADER_KERNEL_CACHE_DIR": str(tmp_path / "cache"),
    }
    first = _run(["-m", "graders", "warm-cache"], env)
    print(first.stdout, first.stderr[-2000:])
    assert first.returncode == 0 and "Built the CuPy kernel cache for sm_" in first.stdout
    built = [p for p in (tmp_path / "cache").iterdir() if (p / ".complete").exists()]
    assert built and len(list(built[0].iterdir())) > 10
    again = _run(["-m", "graders", "warm-cache"], env)
    assert again.returncode == 0 and "is built:" in again.stdout, again.stdout
    for data in ("course-a", "course-b"):
        started = _run(
            ["-c", _WORKER_START], {**env, "KERNELGRADER_DATA_DIR": str(tmp_path / data)}
        )
        assert started.returncode == 0, started.stderr[-2000:]
        state = json.loads(started.stdout.strip().splitlines()[-1])
        print(data, state)
        assert state["folder"] == str(built[0]) and state["built_now"] is False
