"""GPU memory admission: gradings start only where they fit beside the others."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from graders.run import memory
from graders.spec import load_builtin_lab

GIB = 1 << 30


def ledger(tmp_path: Path, free: int, total: int = 16 * GIB) -> memory.Ledger:
    return memory.Ledger(tmp_path, "GPU-test", memory=lambda: (free, total))


def test_a_grading_that_fits_is_admitted_at_once(tmp_path: Path) -> None:
    t = ledger(tmp_path, free=10 * GIB).admit(4 * GIB, reserve=2 * GIB)
    assert not t.alone and t.waited_s < 1
    assert ledger(tmp_path, free=10 * GIB).reserved() == 4 * GIB
    t.release()
    assert ledger(tmp_path, free=10 * GIB).reserved() == 0


def test_the_second_grading_waits_while_the_first_holds_the_room(tmp_path: Path) -> None:
    first = ledger(tmp_path, free=14 * GIB).admit(8 * GIB, reserve=2 * GIB)
    clock = [0.0]
    told: list[str] = []

    def sleep(s: float) -> None:
        clock[0] += s
        if clock[0] > 1.0:
            first.release()  # the first grading ends a second later

    # NVML still says 14 GiB free (the first has allocated nothing yet): the ledger decides.
    second = ledger(tmp_path, free=14 * GIB).admit(
        8 * GIB, reserve=2 * GIB, on_wait=told.append, clock=lambda: clock[0], sleep=sleep
    )
    assert second.waited_s > 1.0 and not second.alone
    assert told and "8.0 GiB" in told[0]
    second.release()


def test_exactly_at_the_reserve_fits_and_one_byte_more_does_not(tmp_path: Path) -> None:
    t = ledger(tmp_path, free=10 * GIB).admit(8 * GIB, reserve=2 * GIB)
    t.release()
    clock = [0.0]
    late = ledger(tmp_path, free=10 * GIB).admit(
        8 * GIB + 1,
        reserve=2 * GIB,
        wait_s=5.0,
        clock=lambda: clock[0],
        sleep=lambda s: clock.__setitem__(0, clock[0] + s),
    )
    assert late.alone and late.waited_s >= 5.0  # overdue: admitted alone
    late.release()


def test_a_grading_too_large_to_share_runs_alone_once_it_is_the_only_one(tmp_path: Path) -> None:
    t = ledger(tmp_path, free=16 * GIB).admit(15 * GIB, reserve=2 * GIB)
    assert t.alone
    t.release()


def _hold_a_ticket(folder: str, ready: multiprocessing.synchronize.Event) -> None:
    memory.Ledger(folder, "GPU-test", memory=lambda: (16 * GIB, 16 * GIB)).admit(
        10 * GIB, reserve=0
    )
    ready.set()
    time.sleep(600)


def test_a_ticket_whose_worker_died_is_dropped(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold_a_ticket, args=(str(tmp_path), ready))
    proc.start()
    try:
        assert ready.wait(30)
        assert ledger(tmp_path, free=16 * GIB).reserved() == 10 * GIB
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
    assert ledger(tmp_path, free=16 * GIB).reserved() == 0


def test_without_nvml_nothing_waits(tmp_path: Path) -> None:
    t = memory.Ledger(tmp_path, "GPU-x", memory=lambda: None).admit(1 << 60, reserve=0)
    assert not t.alone
    t.release()


def test_a_lab_needs_more_than_its_largest_case_and_timing_adds_arms() -> None:
    lab = load_builtin_lab("vector-scale")
    plain = memory.need_bytes(lab, timing=False, sanitizer=False)
    timed = memory.need_bytes(lab, timing=True, sanitizer=False)
    checked = memory.need_bytes(lab, timing=True, sanitizer=True)
    assert memory.CONTEXT_BYTES < plain < timed < checked
    assert memory.need_bytes(lab, timing=False, sanitizer=False, global_bytes=GIB) == plain + GIB


def test_the_reserve_comes_from_the_environment_where_the_worker_gives_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNELGRADER_GPU_MEMORY_RESERVE_MB", "512")
    assert memory.reserve_bytes() == 512 << 20
    assert memory.reserve_bytes(100) == 100 << 20
    monkeypatch.delenv("KERNELGRADER_GPU_MEMORY_RESERVE_MB")
    assert memory.reserve_bytes() == memory.DEFAULT_RESERVE_MB << 20
