"""Once a hidden case has begun, nothing the process prints reaches the student; the grader's
own notes still do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = r"""
import ctypes
from graders.run import output
print("before", flush=True)
output.withhold_from_now()
print("after, from Python", flush=True)
libc = ctypes.CDLL(None)
libc.printf(b"after, from C\n")
libc.fflush(None)
output._note("[grader] a note of the grader's")
output.withhold_from_now()  # a second call changes nothing
output._note("[grader] another")
"""


def test_output_after_a_hidden_case_is_withheld_for_good() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines == ["before", "[grader] a note of the grader's", "[grader] another"]
