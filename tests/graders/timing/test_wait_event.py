"""wait_event tells a failed kernel from a running one (CPU test: the event query is scripted).

On a GPU, CuPy's `Event.done` reads False for a kernel that trapped as well as for one still
running; the GPU test for the real thing is tests/security (trap.cu, misaligned_read.cu, ...).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

cupy = pytest.importorskip("cupy")
from cupy.cuda import runtime  # noqa: E402

from graders.run.harness import classify_cuda_error  # noqa: E402
from graders.timing.repetitions import KernelHung, L2Flusher, wait_event  # noqa: E402


@dataclass
class FakeEvent:
    ptr: int = 1234


def scripted(monkeypatch: pytest.MonkeyPatch, statuses: list[int]) -> list[int]:
    """The event query answers `statuses` in turn (then the last again); returns the pointers
    it was asked about."""
    answers = iter(statuses)
    asked: list[int] = []

    def query(ptr: int) -> int:
        asked.append(ptr)
        return next(answers, statuses[-1])

    monkeypatch.setattr(runtime, "eventQuery", query)
    return asked


def test_a_finished_event_returns_once_its_query_says_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = scripted(monkeypatch, [600, 600, 0])  # not ready, not ready, done
    naps: list[float] = []
    monkeypatch.setattr(time, "sleep", naps.append)
    wait_event(FakeEvent(), time.monotonic() + 5)
    # It asked about this event until the query said done, and no longer; between two queries
    # it slept a fraction of a millisecond.
    assert asked == [1234, 1234, 1234]
    assert len(naps) == 2 and all(0 < nap <= 0.001 for nap in naps)


def test_at_the_deadline_itself_it_still_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = scripted(monkeypatch, [600, 0])
    monkeypatch.setattr(time, "monotonic", lambda: 100.0)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    wait_event(FakeEvent(), 100.0)  # not past it: the next query says done
    assert len(asked) == 2


def test_a_kernel_that_never_finishes_is_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, [600])
    with pytest.raises(KernelHung, match=r"^the kernel did not finish in time$"):
        wait_event(FakeEvent(), time.monotonic() + 0.05)


@pytest.mark.parametrize(
    ("status", "words"),
    [(719, "__trap()"), (700, "illegal address"), (716, "misaligned")],
)
def test_a_failed_kernel_is_an_error_at_once_not_a_hang(
    monkeypatch: pytest.MonkeyPatch, status: int, words: str
) -> None:
    # Even with the deadline already past, the error is what is reported, not a hang.
    scripted(monkeypatch, [status])
    with pytest.raises(runtime.CUDARuntimeError) as caught:
        wait_event(FakeEvent(), time.monotonic() - 1)
    failure = classify_cuda_error(caught.value)
    assert failure.verdict == "kernel_error" and failure.sticky
    assert words in failure.message


class FakeDevice:
    id = 2  # the current device, which the flusher asks about


@dataclass
class FakePointer:
    ptr: int


@dataclass
class FakeBuffer:
    nbytes: int
    data: FakePointer = field(default_factory=lambda: FakePointer(0xB0))


def fake_l2(monkeypatch: pytest.MonkeyPatch, props: dict[str, int]) -> list[tuple[int, ...]]:
    """CuPy's device calls as a GPU with these properties answers them; returns the memsets."""
    memsets: list[tuple[int, ...]] = []
    monkeypatch.setattr(cupy.cuda, "Device", FakeDevice)
    monkeypatch.setattr(
        runtime, "getDeviceProperties", lambda index: props if index == FakeDevice.id else {}
    )
    monkeypatch.setattr(cupy, "empty", lambda n, dtype: FakeBuffer(n) if dtype is cupy.uint8 else 0)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: FakePointer(0x57))
    monkeypatch.setattr(runtime, "memsetAsync", lambda *args: memsets.append(args))
    return memsets


def test_the_flush_buffer_is_twice_the_l2_and_at_least_8_mib(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_l2(monkeypatch, {"l2CacheSize": 50 << 20})
    assert L2Flusher().nbytes == 100 << 20  # another device's properties would be empty
    assert L2Flusher().buffer.nbytes == 100 << 20
    fake_l2(monkeypatch, {"l2CacheSize": 1 << 20})
    assert L2Flusher().nbytes == 8 << 20
    fake_l2(monkeypatch, {})
    assert L2Flusher().nbytes == 8 << 20


def test_each_flush_writes_the_whole_buffer_with_a_new_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memsets = fake_l2(monkeypatch, {"l2CacheSize": 50 << 20})
    flusher = L2Flusher()
    for _ in range(252):
        flusher.flush()
    assert all(args[0] == 0xB0 and args[2:] == (100 << 20, 0x57) for args in memsets)
    values = [args[1] for args in memsets]
    assert values[:3] == [1, 2, 3] and values[249:] == [250, 0, 1]


# --- the launch gate (graders.timing.repetitions.LaunchGate): what the host does, with CuPy's
# calls recorded; tests/graders/gpu/test_timing_gpu.py shows it keeps a slow host out of the
# events on a GPU.


class FakePinnedPointer(bytearray):
    """Eight bytes standing for mapped pinned memory: NumPy reads and writes them in place."""

    ptr = 0xF1A6


class FakeGateKernel:
    """The gate's kernel: records each launch and the flag's value when it was launched."""

    def __init__(self, flag: list[FakePinnedPointer]) -> None:
        self.flag = flag
        self.launches: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int]] = []

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple) -> None:
        value = int.from_bytes(bytes(self.flag[0][:4]), "little", signed=True)
        self.launches.append((grid, block, tuple(int(a) for a in args), value))


def fake_gate(monkeypatch: pytest.MonkeyPatch, *, broken: bool = False) -> dict:
    """CuPy's pinned memory and RawModule as the gate uses them; returns what they saw."""
    seen: dict = {"flags": [], "pinned": [], "code": [], "function": []}
    kernel = FakeGateKernel(seen["flags"])
    seen["kernel"] = kernel

    def pinned(size: int, flags: int) -> tuple[int, int]:
        if broken:
            raise runtime.CUDARuntimeError(100)  # cudaErrorNoDevice
        seen["pinned"].append((size, flags))
        return (size, flags)

    def pointer(memory: tuple[int, int], offset: int) -> FakePinnedPointer:
        assert offset == 0
        flag = FakePinnedPointer(memory[0])
        flag[:4] = (7).to_bytes(4, "little")  # whatever the memory held before
        seen["flags"].append(flag)
        return flag

    class FakeModule:
        def __init__(self, code: str) -> None:
            seen["code"].append(code)

        def get_function(self, name: str) -> FakeGateKernel:
            seen["function"].append(name)
            return kernel

    monkeypatch.setattr(cupy.cuda, "PinnedMemory", pinned)
    monkeypatch.setattr(cupy.cuda, "PinnedMemoryPointer", pointer)
    monkeypatch.setattr(cupy, "RawModule", FakeModule)
    return seen


def _flag(seen: dict) -> int:
    return int.from_bytes(bytes(seen["flags"][0][:4]), "little", signed=True)


def test_the_gate_spins_on_a_mapped_flag_that_is_clear_at_launch_and_set_by_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graders.timing.repetitions import GATE_MAX_CYCLES, LaunchGate

    seen = fake_gate(monkeypatch)
    gate = LaunchGate()
    assert seen["pinned"] == [(8, runtime.hostAllocMapped)]  # the device reads it in place
    assert seen["function"] == ["kg_launch_gate"] and "clock64()" in seen["code"][0]
    gate.close()
    # One thread, handed the flag's address and the most cycles it may spin; the flag was
    # cleared before the launch, so the spin holds the stream.
    assert seen["kernel"].launches == [((1,), (1,), (0xF1A6, GATE_MAX_CYCLES), 0)]
    assert _flag(seen) == 0
    gate.open()
    assert _flag(seen) == 1
    gate.close()  # every repetition closes it again
    assert seen["kernel"].launches[-1][3] == 0 and len(seen["kernel"].launches) == 2


def test_a_flusher_has_a_gate_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    from graders.timing.repetitions import LaunchGate

    fake_l2(monkeypatch, {"l2CacheSize": 50 << 20})
    fake_gate(monkeypatch)
    flusher = L2Flusher()
    assert isinstance(flusher.gate, LaunchGate) and flusher.gate_problem == ""
    bare = L2Flusher(gate=False)
    assert bare.gate is None and bare.gate_problem == ""


def test_a_flusher_whose_gate_cannot_be_made_times_without_it_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_l2(monkeypatch, {"l2CacheSize": 50 << 20})
    fake_gate(monkeypatch, broken=True)
    flusher = L2Flusher()
    assert flusher.gate is None
    assert flusher.gate_problem.startswith("no launch gate (CUDARuntimeError: ")
    assert flusher.nbytes == 100 << 20  # the flush itself is as before
