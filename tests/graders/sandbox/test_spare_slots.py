"""The host's cap on GPU spares: slots taken before warming up, skipped once a request comes,
and given up by an idle pool when another worker's spare waits (graders.sandbox.spare_slots)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from graders.sandbox import child, prestart, spare_slots
from graders.timing.lock import GpuLock


def _lock(tmp_path: Path) -> GpuLock:
    return GpuLock(tmp_path, "GPU-test")


def test_a_spare_takes_a_free_slot_and_the_next_waits_until_one_is_free(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    first = spare_slots.take(lock, 2, skip=lambda: False)
    second = spare_slots.take(lock, 2, skip=lambda: False)
    assert first is not None and second is not None
    asked = []

    def skip() -> bool:
        asked.append(1)
        if len(asked) == 3:
            os.close(first)  # a spare at rest is handed its request: its slot is free
        return False

    third = spare_slots.take(lock, 2, skip=skip, poll_s=0.001)
    assert third is not None and len(asked) == 3
    # Held alone: a probe of that slot's file cannot take it.
    held = {p.name for p in tmp_path.glob("*.spare-[0-9]") if _flocked(p)}
    assert len(held) == 2
    for fd in (second, third):
        os.close(fd)


def _flocked(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_a_spare_handed_its_request_while_waiting_goes_on_without_a_slot(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    only = spare_slots.take(lock, 1, skip=lambda: False)
    read, write = os.pipe()
    try:
        calls = []

        def skip() -> bool:
            calls.append(1)
            if len(calls) == 2:
                os.write(write, b"{}")  # the pool hands this spare a request
            return spare_slots.request_waiting(read)()

        assert spare_slots.take(lock, 1, skip=skip, poll_s=0.001) is None
        assert len(calls) == 2
    finally:
        for fd in (read, write, only):
            os.close(fd)  # type: ignore[arg-type]


def test_no_cap_takes_no_slot(tmp_path: Path) -> None:
    assert spare_slots.take(_lock(tmp_path), 0, skip=lambda: False) is None
    assert not list(tmp_path.iterdir())


def test_a_waiting_spare_is_seen_by_other_workers_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = _lock(tmp_path)
    assert not spare_slots.wanted_by_others(lock, "111")
    held = spare_slots.take(lock, 1, skip=lambda: False)
    seen: list[tuple[bool, bool]] = []
    monkeypatch.setenv("KERNELGRADER_SPARE_OWNER", "111")

    def skip() -> bool:
        # While this spare of worker 111 waits: worker 222 sees it, worker 111 does not.
        seen.append(
            (spare_slots.wanted_by_others(lock, "111"), spare_slots.wanted_by_others(lock, "222"))
        )
        return True

    assert spare_slots.take(lock, 1, skip=skip) is None
    assert seen == [(False, True)]
    assert not spare_slots.wanted_by_others(lock, "222")  # it stopped waiting
    os.close(held)  # type: ignore[arg-type]


def test_the_child_takes_a_slot_only_where_it_has_a_gpu_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read, write = os.pipe()
    try:
        monkeypatch.delenv("KERNELGRADER_LOCK_DIR", raising=False)
        monkeypatch.delenv("KERNELGRADER_GPU_KEY", raising=False)
        assert child._take_spare_slot(read) is None  # a compile child
        monkeypatch.setenv("KERNELGRADER_LOCK_DIR", str(tmp_path))
        monkeypatch.setenv("KERNELGRADER_GPU_KEY", "GPU-test")
        monkeypatch.setenv("KERNELGRADER_GPU_SPARES", "1")
        slot = child._take_spare_slot(read)
        assert slot is not None
        # The one slot is held: the next spare goes on without one once its request is there.
        os.write(write, b"{}")
        assert child._take_spare_slot(read) is None
        os.close(slot)
    finally:
        os.close(read)
        os.close(write)


class _Spare:
    def __init__(self, pid: int, spawned_at: float) -> None:
        self.pid = pid
        self.spawned_at = spawned_at
        self.log: list[str] = []
        self.discarded = False

    def discard(self) -> None:
        self.discarded = True


def test_an_idle_pool_stops_its_oldest_idle_spare_only_for_another_workers_waiting_one() -> None:
    pool = prestart.Prestarter(prestart.PoolSpec(name="t", gpu=True, warm="x:y", spares=3))
    now = prestart.time.monotonic()
    old, older, young = _Spare(1, now - 40), _Spare(2, now - 90), _Spare(3, now - 5)
    pool._spares = [old, older, young]  # type: ignore[list-item]
    assert not pool.give_way(lambda: False, idle_s=30)  # nobody waits: nothing stops
    assert pool.give_way(lambda: True, idle_s=30)
    assert older.discarded and pool._spares == [old, young]
    assert pool.give_way(lambda: True, idle_s=30)
    assert old.discarded and pool._spares == [young]
    assert not pool.give_way(lambda: True, idle_s=30)  # 5 s old: not idle long enough
    assert not young.discarded


def test_each_worker_process_has_an_owner_name_of_its_own() -> None:
    from graders.sandbox.isolation import spare_owner

    mine = spare_owner()
    assert mine == spare_owner() and mine.isdigit() and mine.startswith(str(os.getpid()))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a forked worker (Celery's prefork pool)
        os.write(write, spare_owner().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    theirs = os.read(read, 64).decode()
    os.close(read)
    os.close(write)
    assert theirs != mine and theirs.startswith(str(pid))
