"""Sandbox folders of killed workers are removed at the next worker start; live ones stay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.grading.sandbox_cleanup import owner_pid, remove_orphaned_sandboxes
from graders.sandbox.runner import SandboxLimits, run_sandboxed


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_folders_whose_owner_is_gone_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folders = {
            "dead sandbox": tmp_path / f"kg-sandbox-{dead}-abc",
            "dead run": tmp_path / f"kernelgrader-run-{dead}-def",
            "live sandbox": tmp_path / f"kg-sandbox-{alive.pid}-ghi",
            "this process": tmp_path / f"kernelgrader-run-{os.getpid()}-jkl",
            "no owner in the name": tmp_path / "kg-sandbox-mno",
            "an older grader's, all digits": tmp_path / f"kg-sandbox-{dead}",
            "not ours": tmp_path / f"other-{dead}-pqr",
        }
        for folder in folders.values():
            folder.mkdir()
            (folder / "progress-0.jsonl").write_text("{}")
        removed = remove_orphaned_sandboxes(tmp_path)
    finally:
        alive.kill()
        alive.wait()
    assert sorted(removed) == sorted([folders["dead sandbox"], folders["dead run"]])
    assert {name for name, f in folders.items() if f.exists()} == {
        "live sandbox",
        "this process",
        "no owner in the name",
        "an older grader's, all digits",
        "not ours",
    }


def test_the_grader_names_its_sandbox_after_the_worker_process() -> None:
    limits = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_mb=512)
    outcome = run_sandboxed("graders.sandbox.selftest_targets:workdir_info", {}, limits=limits)
    assert outcome.ok, outcome.message
    assert owner_pid(Path(outcome.value["cwd"]).name) == os.getpid()
