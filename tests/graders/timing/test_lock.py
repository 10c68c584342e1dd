"""The per-GPU reader-writer lock, with real processes taking it (no GPU needed).

Each holder is a separate Python process that writes what happens to a shared log; the tests
assert the order of those lines, never how long anything took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graders.timing.lock import GpuLock

ROOT = Path(__file__).resolve().parents[3]
HOLDER = r"""
import os, sys, time
from pathlib import Path
from graders.timing.lock import GpuLock

folder, mode, name, release_when = sys.argv[1:5]
log = Path(folder) / "log"

def note(text):
    with open(log, "a") as f:
        f.write(f"{name} {text}\n")

lock = GpuLock(folder, "test-gpu")
hold = lock.shared if mode == "shared" else lock.exclusive
with hold(on_wait=lambda: note("waiting"), on_held=lambda: note("held")):
    for _ in range(6000):  # at most a minute
        if (Path(folder) / release_when).exists():
            break
        time.sleep(0.01)
    note("releasing")
"""


def _start(folder: Path, mode: str, name: str, release_when: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), mode, name, release_when], env=env
    )


def _lines(folder: Path) -> list[str]:
    log = folder / "log"
    return log.read_text().splitlines() if log.exists() else []


def _wait_for(folder: Path, line: str) -> None:
    for _ in range(3000):
        if line in _lines(folder):
            return
        time.sleep(0.01)
    raise AssertionError(f"never saw {line!r}: {_lines(folder)}")


def _finish(folder: Path, *procs: subprocess.Popen[bytes]) -> None:
    (folder / "go").touch()
    for proc in procs:
        assert proc.wait(timeout=60) == 0


def test_shared_holders_hold_it_together(tmp_path: Path) -> None:
    first = _start(tmp_path, "shared", "A", "go")
    _wait_for(tmp_path, "A held")
    second = _start(tmp_path, "shared", "B", "go")
    _wait_for(tmp_path, "B held")  # while A still holds it
    assert "A releasing" not in _lines(tmp_path)
    assert "B waiting" not in _lines(tmp_path)
    _finish(tmp_path, first, second)


def test_an_exclusive_holder_waits_for_the_readers_and_then_holds_it_alone(
    tmp_path: Path,
) -> None:
    reader = _start(tmp_path, "shared", "R", "go-r")
    _wait_for(tmp_path, "R held")
    writer = _start(tmp_path, "exclusive", "W", "go-w")
    _wait_for(tmp_path, "W waiting")
    (tmp_path / "go-r").touch()
    _wait_for(tmp_path, "W held")
    lines = _lines(tmp_path)
    assert lines.index("R releasing") < lines.index("W held")
    late = _start(tmp_path, "shared", "L", "go")
    _wait_for(tmp_path, "L waiting")  # a reader waits while the writer holds it
    (tmp_path / "go-w").touch()
    _wait_for(tmp_path, "L held")
    lines = _lines(tmp_path)
    assert lines.index("W releasing") < lines.index("L held")
    _finish(tmp_path, reader, writer, late)


def test_a_waiting_writer_is_not_overtaken_by_later_readers(tmp_path: Path) -> None:
    first = _start(tmp_path, "shared", "R1", "go-1")
    _wait_for(tmp_path, "R1 held")
    writer = _start(tmp_path, "exclusive", "W", "go-w")
    _wait_for(tmp_path, "W waiting")
    later = _start(tmp_path, "shared", "R2", "go")
    _wait_for(tmp_path, "R2 waiting")  # not let in beside R1 while W waits
    (tmp_path / "go-1").touch()
    _wait_for(tmp_path, "W held")
    assert "R2 held" not in _lines(tmp_path)
    (tmp_path / "go-w").touch()
    _wait_for(tmp_path, "R2 held")
    _finish(tmp_path, first, writer, later)


def test_a_holder_that_is_killed_leaves_the_lock_free(tmp_path: Path) -> None:
    holder = _start(tmp_path, "exclusive", "K", "never")
    _wait_for(tmp_path, "K held")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=60)
    after = _start(tmp_path, "exclusive", "N", "go")
    _wait_for(tmp_path, "N held")
    _finish(tmp_path, after)


def test_two_threads_of_one_process_take_turns(tmp_path: Path) -> None:
    import threading

    lock = GpuLock(tmp_path, "threads")
    inside: list[int] = []
    overlap: list[bool] = []

    def work(i: int) -> None:
        for _ in range(20):
            with lock.exclusive():
                inside.append(i)
                overlap.append(len(inside) > 1)
                time.sleep(0.001)
                inside.remove(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(overlap) == 60 and not any(overlap)


def test_the_lock_key_cannot_leave_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b" / "locks"
    # A folder the key's first part would name, so a path through it would really resolve.
    (folder / "kernelgrader-gpu-x").mkdir(parents=True)
    lock = GpuLock(folder, "x/../../escaped")
    with lock.shared():
        pass
    # The gate, the lock, and this process's pid in the users' folder: all inside `folder`.
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert made == [
        "a/b/locks/kernelgrader-gpu-xescaped.gate",
        "a/b/locks/kernelgrader-gpu-xescaped.lock",
        f"a/b/locks/kernelgrader-gpu-xescaped.users/{os.getpid()}",
    ]


def test_lock_files_are_for_every_user_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        with GpuLock(tmp_path, "shared-by-users").exclusive():
            pass
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir() if p.is_file()}
    assert modes == {
        "kernelgrader-gpu-shared-by-users.gate": 0o666,
        "kernelgrader-gpu-shared-by-users.lock": 0o666,
    }


@pytest.mark.parametrize("mode", ["shared", "exclusive"])
def test_on_held_is_called_even_without_waiting(tmp_path: Path, mode: str) -> None:
    calls: list[str] = []
    lock = GpuLock(tmp_path, "calls")
    hold = lock.shared if mode == "shared" else lock.exclusive
    with hold(on_wait=lambda: calls.append("wait"), on_held=lambda: calls.append("held")) as w:
        assert w >= 0
    assert calls == ["held"]
