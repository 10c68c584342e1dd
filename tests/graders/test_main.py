"""`python -m graders check`: lab check on a host with only NumPy and CuPy (no web service)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from graders.spec import builtin_labs_dir

ROOT = Path(__file__).resolve().parents[2]


def _check(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graders", "check", str(folder), "--no-gpu", "--arch", "sm_90"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip


def test_a_good_lab_passes_and_a_broken_one_fails_with_exit_status_1(tmp_path: Path) -> None:
    done = _check(builtin_labs_dir() / "histogram")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  ok    reference shared_atomics.cu: compiles for sm_90" in done.stdout
    assert done.stdout.strip().endswith("The lab histogram passed the checks that need no GPU.")
    folder = Path(shutil.copytree(builtin_labs_dir() / "histogram", tmp_path / "histogram"))
    (folder / "oracle.py").write_text("def expected(inputs, sizes, scalars):\n    return 1 / 0\n")
    done = _check(folder)
    assert done.returncode == 1, done.stdout
    assert "  fail  oracle.py: The lab's expected() failed on case" in done.stdout
    assert "ZeroDivisionError" in done.stdout
    assert _check(tmp_path / "missing").returncode == 2
