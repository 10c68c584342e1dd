"""GPU memory admission: gradings start only where they fit beside the others."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from graders.config import DEFAULT_GPU_JOBS, DEFAULT_RESERVE_MB
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


def test_the_reserve_is_the_workers_or_the_default_never_the_environments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker passes its setting (graders.config.EngineSettings); the engine reads none.
    monkeypatch.setenv("KERNELGRADER_GPU_MEMORY_RESERVE_MB", "512")
    assert memory.reserve_bytes() == DEFAULT_RESERVE_MB << 20
    assert memory.reserve_bytes(100) == 100 << 20


class FakeTime:
    """A clock and a sleep for `admit`: each sleep moves the clock on and may run a hook."""

    def __init__(self, hook: object = None) -> None:
        self.now = 0.0
        self.hook = hook
        self.sleeps = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s
        self.sleeps += 1
        if callable(self.hook):
            self.hook(self)


def test_at_most_jobs_gradings_run_at_once_and_the_next_starts_when_one_ends(
    tmp_path: Path,
) -> None:
    roomy = 1000 * GIB
    first = ledger(tmp_path, free=roomy, total=roomy).admit(GIB, reserve=0, jobs=2)
    second = ledger(tmp_path, free=roomy, total=roomy).admit(GIB, reserve=0, jobs=2)
    assert ledger(tmp_path, free=roomy).running() == 2

    def end_first(t: FakeTime) -> None:
        if t.sleeps == 3:
            first.release()

    fake, told = FakeTime(end_first), []
    third = ledger(tmp_path, free=roomy, total=roomy).admit(
        GIB, reserve=0, jobs=2, on_wait=told.append, clock=fake.clock, sleep=fake.sleep
    )
    assert fake.sleeps == 3 and not third.alone  # admitted right after the first ended
    assert told == ["waiting for 2 gradings on the GPU already (at most 2)"]
    # No cap: a third and a fourth beside the two.
    fourth = ledger(tmp_path, free=roomy, total=roomy).admit(GIB, reserve=0, jobs=0)
    assert ledger(tmp_path, free=roomy).running() == 3
    for t in (second, third, fourth):
        t.release()
    assert ledger(tmp_path, free=roomy).running() == 0


def _waiting_entry(tmp_path: Path, key: str, at: float) -> int:
    """A grading of another worker that waits in the ledger: its ticket file held, its entry
    marked waiting. Returns the fd that keeps it alive."""
    lg = ledger(tmp_path, free=GIB)
    fd = os.open(lg._ticket_path(key), os.O_RDWR | os.O_CREAT, 0o666)
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_SH)
    with lg._locked() as state:
        state["entries"][key] = {"need": GIB, "at": at, "pid": 1, "waiting": True}
    return fd


def test_a_grading_never_overtakes_one_that_came_earlier(tmp_path: Path) -> None:
    fd = _waiting_entry(tmp_path, "older", time.time() - 5)
    fake, told = FakeTime(), []
    late = ledger(tmp_path, free=100 * GIB, total=100 * GIB).admit(
        GIB,
        reserve=0,
        jobs=3,
        wait_s=2.0,
        on_wait=told.append,
        clock=fake.clock,
        sleep=fake.sleep,
    )
    # Room and a free slot, but the older waiter goes first: this one waited until overdue.
    assert told == ["waiting for 1 gradings that came earlier"]
    assert late.alone and late.waited_s >= 2.0
    late.release()
    # The older waiter's worker dies: nobody holds its ticket, and it blocks nothing.
    os.close(fd)
    t = ledger(tmp_path, free=100 * GIB, total=100 * GIB).admit(GIB, reserve=0, jobs=3)
    assert not t.alone and t.waited_s < 1
    t.release()


def test_a_waiter_that_came_later_does_not_hold_up_an_earlier_one(tmp_path: Path) -> None:
    fd = _waiting_entry(tmp_path, "younger", time.time() + 60)
    t = ledger(tmp_path, free=100 * GIB, total=100 * GIB).admit(GIB, reserve=0, jobs=3)
    assert not t.alone and t.waited_s < 1
    t.release()
    os.close(fd)


def test_a_wait_cut_short_leaves_the_queue(tmp_path: Path) -> None:
    roomy = 100 * GIB
    first = ledger(tmp_path, free=roomy, total=roomy).admit(GIB, reserve=0, jobs=1)

    def stop(t: FakeTime) -> None:
        raise KeyboardInterrupt

    fake = FakeTime(stop)
    with pytest.raises(KeyboardInterrupt):
        ledger(tmp_path, free=roomy, total=roomy).admit(
            GIB, reserve=0, jobs=1, clock=fake.clock, sleep=fake.sleep
        )
    assert sorted(p.name.split(".ticket-")[0] for p in tmp_path.glob("*.ticket-*")) == [
        "kernelgrader-gpu-GPU-test"
    ]  # only the first's ticket file is left
    first.release()
    # Nothing waits in front of the next one.
    t = ledger(tmp_path, free=roomy, total=roomy).admit(GIB, reserve=0, jobs=1)
    assert t.waited_s < 1
    t.release()


def test_the_jobs_cap_is_the_workers_or_the_default_never_the_environments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNELGRADER_GPU_JOBS", "5")
    assert memory.jobs_cap() == DEFAULT_GPU_JOBS == 3
    assert memory.jobs_cap(0) == 0
    assert memory.jobs_cap(2) == 2


def test_a_cases_bytes_are_its_arrays_each_with_a_tail_guard_and_half_a_spacer() -> None:
    from graders.run.layout import MAX_SPACER_BYTES, TAIL_GUARD_BYTES

    lab = load_builtin_lab("vector-scale")  # src and dst, float32; n and factor are scalars
    per_array = TAIL_GUARD_BYTES + MAX_SPACER_BYTES // 2
    assert memory._case_bytes(lab, {"n": 1000}) == 2 * (1000 * 4 + per_array)
    assert memory._case_bytes(lab, {"n": 1}) == 2 * (4 + per_array)


def test_what_a_grading_needs_term_by_term() -> None:
    lab = load_builtin_lab("vector-scale")
    largest = memory._case_bytes(lab, {"n": 67108864})  # its largest case is the timed one
    judged = memory.CONTEXT_BYTES + largest * (1 + memory.JUDGE_FACTOR)
    assert memory.need_bytes(lab, timing=False, sanitizer=False) == judged
    arms = 2 + len(lab.references)  # the submission, the witness, each reference
    timed = memory.CONTEXT_BYTES + largest * (arms + memory.JUDGE_FACTOR)
    assert memory.need_bytes(lab, timing=True, sanitizer=False) == max(judged, timed)
    assert memory.need_bytes(lab, timing=True, sanitizer=True) == max(judged, timed) + (
        3 * memory.CONTEXT_BYTES
    )
    # A file-scope array the kernel declares counts once, timed or not.
    assert (
        memory.need_bytes(lab, timing=True, sanitizer=False, global_bytes=GIB)
        == max(judged, timed) + GIB
    )


def test_the_biggest_case_decides_where_the_timed_case_is_small() -> None:
    lab = load_builtin_lab("vector-scale")
    lab = dataclasses.replace(lab, timing=dataclasses.replace(lab.timing, case="n-1000"))
    largest = memory._case_bytes(lab, {"n": 67108864})
    small = memory._case_bytes(lab, {"n": 1000})
    judged = memory.CONTEXT_BYTES + largest * (1 + memory.JUDGE_FACTOR)
    timed = memory.CONTEXT_BYTES + small * (2 + len(lab.references) + memory.JUDGE_FACTOR)
    assert judged > timed
    assert memory.need_bytes(lab, timing=True, sanitizer=False) == judged


def test_the_describe_sentence_gives_gib_and_says_alone(tmp_path: Path) -> None:
    t = ledger(tmp_path, free=10 * GIB).admit(GIB + GIB // 2, reserve=0)
    assert memory.describe(t) == "admitted with 1.50 GiB of GPU memory"
    t.release()
    big = ledger(tmp_path, free=16 * GIB).admit(15 * GIB, reserve=2 * GIB)
    assert memory.describe(big) == (
        "admitted with 15.00 GiB of GPU memory (alone: it does not fit beside other gradings)"
    )
    big.release()


def test_a_memory_wait_says_how_much_is_needed_and_reserved(tmp_path: Path) -> None:
    first = ledger(tmp_path, free=14 * GIB).admit(3 * GIB, reserve=0)
    fake, told = FakeTime(), []
    late = ledger(tmp_path, free=14 * GIB).admit(
        14 * GIB, reserve=0, wait_s=0.4, on_wait=told.append, clock=fake.clock, sleep=fake.sleep
    )
    assert told == ["waiting for 14.0 GiB of GPU memory (3.0 GiB reserved by other gradings)"]
    assert late.alone  # overdue
    # Told once, however long it waits.
    assert fake.sleeps >= 2
    late.release()
    first.release()


def test_too_large_to_share_is_by_one_byte_on_either_side(tmp_path: Path) -> None:
    # total 16, reserve 2: a need of exactly 14 GiB can share the GPU once room frees;
    # one byte more never can, and runs alone once nothing else runs.
    exact = ledger(tmp_path, free=16 * GIB).admit(14 * GIB, reserve=2 * GIB)
    assert not exact.alone
    exact.release()
    over = ledger(tmp_path, free=16 * GIB).admit(14 * GIB + 1, reserve=2 * GIB)
    assert over.alone
    over.release()


def test_overdue_is_at_the_wait_exactly(tmp_path: Path) -> None:
    first = ledger(tmp_path, free=100 * GIB, total=100 * GIB).admit(GIB, reserve=0, jobs=1)
    fake = FakeTime()
    late = ledger(tmp_path, free=100 * GIB, total=100 * GIB).admit(
        GIB, reserve=0, jobs=1, wait_s=0.4, clock=fake.clock, sleep=fake.sleep
    )
    assert late.alone and fake.sleeps == 2  # 0.2 s each: overdue at exactly 0.4 s
    late.release()
    first.release()


def test_a_released_ticket_leaves_the_ledger_and_its_file(tmp_path: Path) -> None:
    keep = ledger(tmp_path, free=16 * GIB).admit(GIB, reserve=0)
    t = ledger(tmp_path, free=16 * GIB).admit(2 * GIB, reserve=0)
    files = {p.name for p in tmp_path.glob("*.ticket-*")}
    assert len(files) == 2
    t.release()
    assert ledger(tmp_path, free=16 * GIB).reserved() == GIB  # the other one stays
    assert {p.name for p in tmp_path.glob("*.ticket-*")} == files - {
        f"kernelgrader-gpu-GPU-test.ticket-{t.key}"
    }
    t.release()  # twice is harmless
    keep.release()


def test_an_admitted_ticket_is_recorded_with_its_time_and_pid(tmp_path: Path) -> None:
    import json

    before = time.time()
    t = ledger(tmp_path, free=16 * GIB).admit(GIB, reserve=0)
    entry = json.loads(ledger(tmp_path, free=GIB).path.read_text())[t.key]
    assert entry == {"need": GIB, "at": entry["at"], "pid": os.getpid()}
    assert before <= entry["at"] <= time.time()
    t.release()


def test_ledger_folders_are_made_with_their_parents(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    t = memory.Ledger(deep, "GPU-test", memory=lambda: (GIB, GIB)).admit(1, reserve=0)
    assert (deep / f"kernelgrader-gpu-GPU-test.ticket-{t.key}").exists()
    t.release()


def test_reserve_and_jobs_below_zero_are_none() -> None:
    assert memory.reserve_bytes(0) == 0
    assert memory.reserve_bytes(-5) == 0


def test_nvml_memory_reads_free_and_total_of_the_visible_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Info:
        free, total = 3 * GIB, 16 * GIB

    class Lib:
        def nvmlDeviceGetMemoryInfo(self, handle: object) -> Info:  # noqa: N802
            assert handle == "gpu2"
            return Info()

    monkeypatch.setattr("graders.nvml.visible_handle", lambda: (Lib(), "gpu2"))
    assert memory.nvml_memory() == (3 * GIB, 16 * GIB)
    monkeypatch.setattr("graders.nvml.visible_handle", lambda: (None, None))
    assert memory.nvml_memory() is None

    class Broken:
        def nvmlDeviceGetMemoryInfo(self, handle: object) -> Info:  # noqa: N802
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    monkeypatch.setattr("graders.nvml.visible_handle", lambda: (Broken(), "gpu2"))
    assert memory.nvml_memory() is None


def test_an_array_after_a_scalar_counts_too() -> None:
    from graders.run.layout import MAX_SPACER_BYTES, TAIL_GUARD_BYTES

    lab = load_builtin_lab("array-sum")  # src, partial, n (a scalar), then out
    per_array = TAIL_GUARD_BYTES + MAX_SPACER_BYTES // 2
    got = memory._case_bytes(lab, {"n": 1000, "nblocks": 4})
    assert got == (1000 * 4 + per_array) + (4 * 4 + per_array) + (1 * 4 + per_array)
    assert isinstance(got, int)  # bytes, never a float


def test_a_ticket_file_is_readable_and_writable_by_every_worker_the_umask_allows(
    tmp_path: Path,
) -> None:
    import stat

    mask = os.umask(0)
    os.umask(mask)
    t = ledger(tmp_path, free=16 * GIB).admit(GIB, reserve=0)
    mode = stat.S_IMODE((tmp_path / f"kernelgrader-gpu-GPU-test.ticket-{t.key}").stat().st_mode)
    assert mode == 0o666 & ~mask
    t.release()


def test_a_need_of_exactly_total_less_reserve_may_share_and_so_waits_its_turn(
    tmp_path: Path,
) -> None:
    # 14 GiB of 16, 2 reserved: it could share once the GPU's free memory allows, so it waits
    # (here until overdue) rather than being admitted alone at once; one byte more, at once.
    fake = FakeTime()
    exact = ledger(tmp_path, free=15 * GIB).admit(
        14 * GIB, reserve=2 * GIB, wait_s=0.4, clock=fake.clock, sleep=fake.sleep
    )
    assert exact.waited_s >= 0.4
    exact.release()
    over = ledger(tmp_path, free=15 * GIB).admit(
        14 * GIB + 1, reserve=2 * GIB, wait_s=0.4, clock=fake.clock, sleep=fake.sleep
    )
    assert over.alone and over.waited_s == 0.0
    over.release()
