"""Room on the GPU for a grading: gradings start only where they fit beside the others.

Every grading on a host takes a ticket before its children touch the GPU. A ticket reserves what
the grading will need (`need_bytes`: its largest case's arrays, guards and spacers, the oracle's
float64 copies, its timed section's arms, a CUDA context) in a ledger every worker of the host
shares, beside the GPU's lock files (graders.timing.lock). A grading is admitted while

    need <= min(free memory NVML reports, total - what the ledger has reserved) - reserve

(the reserve is the worker's setting): the first term sees everything on the GPU, other programs
and the contexts of idle children included; the second counts gradings admitted but not yet
allocated. A grading that could never fit beside others waits until it is the only one, and then
runs its cases alone. Waiting does not count against the submission's GPU time.

The ledger also caps how many gradings run on the GPU at once, across every worker of the host
(`jobs`: KERNELGRADER_GPU_JOBS, 3 by default, 0 for no cap). Six services of three jobs each on
one H100 ran 18 gradings at once and finished 70 files in 284 s; a grading's children then
waited tens of seconds for the lock and warmed up for 45 s. Waiters are admitted in the order
they came, whichever worker they belong to: a waiting grading is in the ledger too, and one
that came later never overtakes it.

Each ticket holds an flock on a file of its own while it lives, so a ticket whose worker died
(any PID namespace) is noticed, and dropped, by the next grading that looks at the ledger.

The child still meets an out-of-memory now and then (the estimate is an estimate, and other
programs allocate as they please): graders.run.stage runs such cases again alone before it rules.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.config import DEFAULT_GPU_JOBS, DEFAULT_RESERVE_MB
from graders.run.inputs import DTYPES
from graders.run.layout import MAX_SPACER_BYTES, TAIL_GUARD_BYTES
from graders.spec import LabSpec
from graders.timing.lock import file_key, flocked

MIB = 1 << 20


def jobs_cap(jobs: int | None = None) -> int:
    """The host's cap on gradings at once per GPU (the worker's setting: graders.config); 0
    means none."""
    return max(0, DEFAULT_GPU_JOBS if jobs is None else jobs)


def reserve_bytes(reserve_mb: int | None = None) -> int:
    """The GPU memory the worker leaves free (its setting: graders.config)."""
    return max(0, DEFAULT_RESERVE_MB if reserve_mb is None else reserve_mb) * MIB


# A CUDA context with CuPy and the grader's kernels loaded (nvidia-smi showed 596 to 756 MiB per
# run child on an H200), and CuPy's pool and the L2 flusher's buffer around a case.
CONTEXT_BYTES = 768 * MIB
# The oracle's float64 copies of the inputs and the answer, and a comparison's temporaries.
JUDGE_FACTOR = 5
POLL_S = 0.2


def _case_bytes(lab: LabSpec, names: dict[str, Any]) -> int:
    import numpy as np

    total = 0
    for p in lab.params:
        if not p.is_array:
            continue
        nbytes = math.prod(p.shape_for(names)) * np.dtype(DTYPES[p.dtype]).itemsize
        total += nbytes + TAIL_GUARD_BYTES + MAX_SPACER_BYTES // 2
    return total


def need_bytes(lab: LabSpec, *, timing: bool, global_bytes: int = 0, sanitizer: bool) -> int:
    """What one grading of this lab holds on the GPU at its peak, roughly (see the docstring)."""
    biggest = 0
    timed = 0
    for case in lab.cases:
        names = lab.sizes_for(case, {})
        size = _case_bytes(lab, names)
        biggest = max(biggest, size)
        if lab.timing is not None and case.name == lab.timing.case:
            timed = size
    need = CONTEXT_BYTES + global_bytes + biggest * (1 + JUDGE_FACTOR)
    if timing and lab.timing is not None:
        arms = 2 + len(lab.references)  # the submission, the witness, every reference
        need = max(need, CONTEXT_BYTES + global_bytes + timed * (arms + JUDGE_FACTOR))
    if sanitizer:
        need += 3 * CONTEXT_BYTES  # three tools' programs, each with a context of its own
    return need


@dataclass
class Ticket:
    """A grading's place in the GPU's memory; `alone` when it had to wait to be the only one."""

    key: str
    need: int
    alone: bool
    waited_s: float
    _fd: int
    _path: Path
    _ledger: Ledger

    def release(self) -> None:
        self._ledger.drop(self.key)
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
        with contextlib.suppress(OSError):
            self._path.unlink()


Memory = Callable[[], tuple[int, int] | None]  # -> (free, total) bytes, or None when unknown


def nvml_memory() -> tuple[int, int] | None:
    """(free, total) bytes of the worker's GPU from NVML; None without NVML."""
    from graders.nvml import visible_handle

    lib, handle = visible_handle()
    if lib is None:
        return None
    try:
        info = lib.nvmlDeviceGetMemoryInfo(handle)
        return int(info.free), int(info.total)
    except Exception:
        return None


class Ledger:
    """The host's reservations for one GPU: a JSON file under an flock, beside the GPU's lock."""

    def __init__(self, folder: Path | str, gpu: str, *, memory: Memory = nvml_memory) -> None:
        self.folder = Path(folder)
        self.gpu = file_key(gpu)
        self.memory = memory
        self.path = self.folder / f"kernelgrader-gpu-{self.gpu}.memory.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                entries = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                entries = {}
            if not isinstance(entries, dict):
                entries = {}
            entries = {k: v for k, v in entries.items() if self._alive(k)}
            state = {"entries": entries}
            yield state
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state["entries"]), encoding="utf-8")
            os.replace(tmp, self.path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _ticket_path(self, key: str) -> Path:
        return self.folder / f"kernelgrader-gpu-{self.gpu}.ticket-{key}"

    def _alive(self, key: str) -> bool:
        """A ticket's holder keeps its file flocked; a file nobody holds is a dead worker's."""
        path = self._ticket_path(key)
        if flocked(path):
            return True
        with contextlib.suppress(OSError):
            path.unlink()
        return False

    def reserved(self) -> int:
        with self._locked() as state:
            return sum(int(v["need"]) for v in _admitted(state["entries"]).values())

    def running(self) -> int:
        """Gradings admitted and not yet done."""
        with self._locked() as state:
            return len(_admitted(state["entries"]))

    def drop(self, key: str) -> None:
        with self._locked() as state:
            state["entries"].pop(key, None)

    def admit(
        self,
        need: int,
        *,
        reserve: int,
        jobs: int | None = None,
        wait_s: float = 600.0,
        on_wait: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Ticket:
        """Wait for room and a turn (see the module docstring) and take them; past `wait_s`,
        take them alone. `jobs` caps the gradings at once (None: `jobs_cap()`; 0: no cap)."""
        cap = jobs_cap(jobs)
        key = uuid.uuid4().hex
        path = self._ticket_path(key)
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            return self._wait(key, need, reserve, cap, wait_s, fd, path, on_wait, clock, sleep)
        except BaseException:
            # Stopped while waiting (the worker shuts down): leave the queue, or every grading
            # after this one would wait for it until this process ends.
            with contextlib.suppress(OSError):
                self.drop(key)
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise

    def _wait(
        self,
        key: str,
        need: int,
        reserve: int,
        cap: int,
        wait_s: float,
        fd: int,
        path: Path,
        on_wait: Callable[[str], None] | None,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> Ticket:
        began = clock()
        came = time.time()
        told = False
        while True:
            with self._locked() as state:
                entries = state["entries"]
                admitted = _admitted(entries)
                reserved = sum(int(v["need"]) for v in admitted.values())
                ahead = [
                    k for k, v in entries.items() if k not in admitted and _before(k, v, key, came)
                ]
                known = self.memory()
                alone = False
                why = ""
                if cap and len(admitted) >= cap:
                    why = f"{len(admitted)} gradings on the GPU already (at most {cap})"
                elif known is not None:  # without NVML, nothing to go by: no memory admission
                    free, total = known
                    if need > min(free, total - reserved) - reserve:
                        why = (
                            f"{need / (1 << 30):.1f} GiB of GPU memory "
                            f"({reserved / (1 << 30):.1f} GiB reserved by other gradings)"
                        )
                        if not admitted and need > total - reserve:
                            why, alone = "", True  # never fits beside others: alone
                if not why and ahead:
                    why = f"{len(ahead)} gradings that came earlier"
                fits = not why
                overdue = clock() - began >= wait_s
                if fits or overdue:
                    entries[key] = {"need": need, "at": came, "pid": os.getpid()}
                    return Ticket(key, need, alone or overdue, clock() - began, fd, path, self)
                entries[key] = {"need": need, "at": came, "pid": os.getpid(), "waiting": True}
            if on_wait is not None and not told:
                told = True
                on_wait(f"waiting for {why}")
            sleep(POLL_S)


def _admitted(entries: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entries.items() if not v.get("waiting")}


def _before(key: str, entry: dict[str, Any], mine: str, came: float) -> bool:
    """Whether the waiting `entry` came before the grading `mine` that came at `came` (a tie
    goes by key, so two never wait for each other)."""
    return (float(entry.get("at", 0.0)), key) < (came, mine)


def describe(ticket: Ticket) -> str:
    alone = " (alone: it does not fit beside other gradings)" if ticket.alone else ""
    return f"admitted with {ticket.need / (1 << 30):.2f} GiB of GPU memory{alone}"
