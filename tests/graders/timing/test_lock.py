"""The per-GPU reader-writer lock, with real processes taking it (no GPU needed).

Each holder is a separate Python process that writes what happens to a shared log; the tests
assert the order of those lines, never how long anything took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
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
if mode == "profiler":
    with lock.profiler(until=time.monotonic() + 60) as held:
        note("held" if held else "not held")
        for _ in range(6000):
            if (Path(folder) / release_when).exists():
                break
            time.sleep(0.01)
        note("releasing")
    sys.exit(0)
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


def test_a_waiting_writer_is_seen_by_a_reader_that_can_let_go(tmp_path: Path) -> None:
    lock = GpuLock(tmp_path, "test-gpu")
    assert not lock.writer_waiting()  # nobody at all
    reader = _start(tmp_path, "shared", "R", "go-r")
    _wait_for(tmp_path, "R held")
    assert not lock.writer_waiting()  # a reader alone
    writer = _start(tmp_path, "exclusive", "W", "go-w")
    _wait_for(tmp_path, "W waiting")
    assert lock.writer_waiting()
    assert lock.writer_waiting()  # asking does not take it away
    (tmp_path / "go-r").touch()
    _wait_for(tmp_path, "W held")
    assert not lock.writer_waiting()  # holding is not waiting: no reader is left to let go
    (tmp_path / "go-w").touch()
    _finish(tmp_path, reader, writer)
    assert not lock.writer_waiting()


def test_a_writer_killed_while_waiting_is_not_seen_waiting(tmp_path: Path) -> None:
    lock = GpuLock(tmp_path, "test-gpu")
    reader = _start(tmp_path, "shared", "R", "go")
    _wait_for(tmp_path, "R held")
    writer = _start(tmp_path, "exclusive", "W", "never")
    _wait_for(tmp_path, "W waiting")
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=60)
    assert not lock.writer_waiting()
    _finish(tmp_path, reader)


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
        "kernelgrader-gpu-shared-by-users.wanted": 0o666,
    }


@pytest.mark.parametrize(
    ("key", "kept"),
    [("GPU-8f2c_1", "GPU-8f2c_1"), ("a b/c.d", "abcd"), ("../..", "gpu"), ("", "gpu")],
)
def test_a_key_keeps_letters_digits_dashes_and_underscores(key: str, kept: str) -> None:
    assert GpuLock("/nonexistent", key).key == kept


def test_the_users_folder_is_made_in_a_new_folder_for_every_user(tmp_path: Path) -> None:
    # Workers of several users and containers leave their pids there: sticky, writable by all.
    lock = GpuLock(tmp_path / "a" / "b", "gpu0")
    old = os.umask(0o077)
    try:
        with lock.exclusive():
            pass
    finally:
        os.umask(old)
    assert lock.users_folder.stat().st_mode & 0o7777 == 0o1777
    assert lock.users() == {os.getpid()}


def test_a_users_folder_made_by_another_process_is_used(tmp_path: Path) -> None:
    lock = GpuLock(tmp_path, "made-before")
    lock.users_folder.mkdir()
    with lock.shared():
        pass
    assert lock.users() == {os.getpid()}


def test_a_users_folder_that_cannot_be_made_does_not_stop_the_lock(tmp_path: Path) -> None:
    lock = GpuLock(tmp_path, "blocked")
    lock.users_folder.write_text("a file where the folder would be")
    with lock.exclusive() as waited:
        assert waited >= 0
    assert lock.users() == set()


def test_a_process_registers_once_per_folder(tmp_path: Path) -> None:
    lock = GpuLock(tmp_path, "once")
    with lock.shared():
        pass
    mark = lock.users_folder / str(os.getpid())
    mark.unlink()  # as a sweep of ended pids would
    with lock.shared():
        pass
    assert not mark.exists()


@pytest.mark.parametrize("mode", ["shared", "exclusive"])
def test_on_wait_is_called_once_however_many_files_it_waits_for(tmp_path: Path, mode: str) -> None:
    # A reader holds the lock; a writer takes the gate and waits for the reader. The third
    # holder then waits at the gate and, once the writer holds the lock, at the lock itself:
    # two waits, one call.
    lock = GpuLock(tmp_path, "waits")
    writer_waiting, writer_held, let_go = threading.Event(), threading.Event(), threading.Event()
    calls: list[str] = []

    def writer() -> None:
        with lock.exclusive(on_wait=writer_waiting.set, on_held=writer_held.set):
            let_go.wait(timeout=30)

    def third() -> None:
        hold = lock.shared if mode == "shared" else lock.exclusive
        with hold(on_wait=lambda: calls.append("wait"), on_held=lambda: calls.append("held")):
            pass

    with lock.shared():
        first = threading.Thread(target=writer)
        first.start()
        assert writer_waiting.wait(timeout=30)
        second = threading.Thread(target=third)
        second.start()
        for _ in range(3000):  # the third holder reaches the gate
            if calls:
                break
            time.sleep(0.01)
        assert calls == ["wait"]
    assert writer_held.wait(timeout=30)
    time.sleep(0.2)  # the third holder passes the gate and waits at the lock
    let_go.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert calls == ["wait", "held"]


@pytest.mark.parametrize("mode", ["shared", "exclusive"])
def test_on_held_is_called_even_without_waiting(tmp_path: Path, mode: str) -> None:
    calls: list[str] = []
    lock = GpuLock(tmp_path, "calls")
    hold = lock.shared if mode == "shared" else lock.exclusive
    with hold(on_wait=lambda: calls.append("wait"), on_held=lambda: calls.append("held")) as w:
        assert w >= 0
    assert calls == ["held"]


class ScriptedOpen:
    """os.open as another user's files and processes would make it answer: for paths ending
    in `suffix`, the first calls raise the scripted errors (None: the real call)."""

    def __init__(self, suffix: str, errors: list[type[OSError] | None]) -> None:
        self.real = os.open
        self.suffix = suffix
        self.errors = errors
        self.calls: list[int] = []

    def __call__(self, path: Path | str, flags: int, mode: int = 0o777) -> int:
        if not str(path).endswith(self.suffix):
            return self.real(path, flags, mode)
        self.calls.append(flags)
        error = self.errors.pop(0) if self.errors else None
        if error is FileExistsError:  # another process makes it first
            os.close(self.real(path, os.O_RDWR | os.O_CREAT, 0o666))
        if error is not None:
            raise error(f"scripted for {path}")
        return self.real(path, flags, mode)


def test_a_lock_file_this_user_may_only_read_still_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = GpuLock(tmp_path, "read-only")
    with lock.exclusive():  # made by "another user"
        pass
    scripted = ScriptedOpen(".lock", [PermissionError])
    monkeypatch.setattr(os, "open", scripted)
    with lock.exclusive():
        pass
    assert scripted.calls == [os.O_RDWR, os.O_RDONLY]


def test_a_lock_file_this_user_may_not_open_is_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = GpuLock(tmp_path, "closed")
    with lock.shared():
        pass
    monkeypatch.setattr(os, "open", ScriptedOpen(".gate", [PermissionError, PermissionError]))
    with pytest.raises(PermissionError) as refused, lock.shared():
        pass
    assert str(refused.value) == f"cannot open the GPU lock file {lock.path('gate')}"


def test_a_lock_file_another_process_made_just_now_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not there when looked for; there when this process went to make it; then opened.
    lock = GpuLock(tmp_path, "race")
    scripted = ScriptedOpen(".lock", [FileNotFoundError, FileExistsError])
    monkeypatch.setattr(os, "open", scripted)
    with lock.exclusive():
        pass
    excl = os.O_RDWR | os.O_CREAT | os.O_EXCL
    assert scripted.calls == [os.O_RDWR, excl, os.O_RDWR]


def test_a_lock_file_that_keeps_coming_and_going_is_given_up_after_three_tries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = GpuLock(tmp_path, "flicker")
    scripted = ScriptedOpen(".gate", [FileNotFoundError, FileExistsError] * 3)
    monkeypatch.setattr(os, "open", scripted)
    with pytest.raises(FileExistsError) as gave_up, lock.shared():
        pass
    assert str(gave_up.value) == f"the GPU lock file {lock.path('gate')} keeps coming and going"
    assert len(scripted.calls) == 6


def test_a_users_folder_another_user_made_still_takes_this_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its chmod is refused (not this user's folder); the pid goes in all the same.
    def refused(path: Path | str, mode: int) -> None:
        raise PermissionError(f"not the owner of {path}")

    monkeypatch.setattr(os, "chmod", refused)
    lock = GpuLock(tmp_path, "theirs")
    with lock.shared():
        pass
    assert lock.users() == {os.getpid()}


def test_one_profiler_session_at_a_time_and_a_wait_that_ends(tmp_path: Path) -> None:
    holder = _start(tmp_path, "profiler", "A", "go")
    _wait_for(tmp_path, "A held")
    lock = GpuLock(tmp_path, "test-gpu")
    with lock.profiler(until=time.monotonic() + 0.3) as held:
        assert not held  # the time was up while A held it
    asked = []
    with lock.profiler(
        until=time.monotonic() + 60, give_up=lambda: asked.append(1) or True
    ) as held:
        assert not held and asked  # the caller stopped waiting (a timed section wants the GPU)
    with lock.shared():  # the profiler is apart from the timing lock
        pass
    _finish(tmp_path, holder)
    with lock.profiler(until=time.monotonic()) as held:
        assert held  # free at once: no wait needed


def test_a_killed_profiler_session_leaves_the_profiler_free(tmp_path: Path) -> None:
    holder = _start(tmp_path, "profiler", "A", "never")
    _wait_for(tmp_path, "A held")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with GpuLock(tmp_path, "test-gpu").profiler(until=time.monotonic() + 10) as held:
        assert held
