"""What a kernel prints: handed on for visible cases, withheld at the source for hidden ones.

A kernel's printf reaches the child's stdout through the driver and C's stdio; the parent keeps
a capped part of it as text for the student (graders.sandbox.supervise).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator

from graders.results import HIDDEN_OUTPUT_NOTE
from graders.spec import CaseSpec

# Bytes the device buffers for printf per launch (cudaLimitPrintfFifoSize): what a launch
# prints past this is dropped by the driver, so a flood costs bounded memory.
PRINTF_FIFO_BYTES = 1 << 20


def limit_printf() -> None:
    """Bound the device's printf buffer; must happen before the first kernel that prints."""
    import cupy as cp

    rt = cp.cuda.runtime
    with contextlib.suppress(Exception):  # an older runtime without the limit: the cap still holds
        rt.deviceSetLimit(rt.cudaLimitPrintfFifoSize, PRINTF_FIFO_BYTES)


def flush_all_output(*, device: bool) -> None:
    """Python's buffers, the device's printf buffer, then C's stdio buffers (the driver writes
    a kernel's printf through C's `stdout`), so every byte so far reaches the current fd 1.
    `device=False` after a failure: a hung kernel would make the synchronize wait forever."""
    sys.stdout.flush()
    sys.stderr.flush()
    if device:
        try:
            import cupy as cp

            cp.cuda.Device().synchronize()  # a synchronize hands the printf buffer over
        except Exception:  # a dead context: whatever it printed is gone with it
            pass
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


# The real standard output once `withhold_from_now` pointed fd 1 elsewhere (-1 before).
_real_stdout = -1


def withhold_from_now() -> None:
    """From now on, nothing this process prints reaches the student: a hidden case has begun,
    and what a kernel learned there may surface in any later launch. The grader's own notes
    still go out (`_note`)."""
    global _real_stdout
    if _real_stdout >= 0:
        return
    flush_all_output(device=True)
    _real_stdout = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def _note(text: str) -> None:
    """A line of the grader's own for the student's output, past any withholding."""
    if _real_stdout >= 0:
        with contextlib.suppress(OSError):
            os.write(_real_stdout, (text + "\n").encode())
    else:
        print(text, flush=True)


@contextlib.contextmanager
def withheld_output(case: CaseSpec) -> Iterator[None]:
    """A hidden case's printf output goes nowhere: students see only pass or fail for it, and
    the stdout of a grading is shown to them at once (a kernel could print a hidden case's
    sizes and data). Standard output is pointed at /dev/null while the case runs (and stays
    there once `withhold_from_now` was called)."""
    if not case.hidden:
        yield
        return
    if _real_stdout >= 0:  # already withheld for the rest of the process
        try:
            yield
        finally:
            _note(HIDDEN_OUTPUT_NOTE.format(name=case.name))
        return
    flush_all_output(device=True)
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        flush_all_output(device=not failed)
        os.dup2(saved, 1)
        os.close(saved)
        print(HIDDEN_OUTPUT_NOTE.format(name=case.name), flush=True)
