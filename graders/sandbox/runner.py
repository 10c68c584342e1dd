"""Run one grading step in a child process that holds nothing worth stealing or breaking.

`run_sandboxed("graders.compile.compiler:compile_in_child", payload, limits=...)` hands the
payload to a `python -m graders.sandbox.child` (a fresh one, or one a pool started ahead of need:
`pool="run"`, see graders.sandbox.prestart) as JSON on a private pipe, and reads its JSON answer
from another private pipe. The child gets:

- its own session and process group; on the wall-clock limit the whole group gets SIGKILL;
- rlimits: CPU seconds (SIGXCPU, then SIGKILL one second later), open files, file size, no core
  dumps, and memory, set between fork and exec and lowered again by the child itself to the
  request's limits before the target runs. Memory is RLIMIT_AS for CPU-only work (the
  compiler). For `gpu=True` it is RLIMIT_DATA instead, because the CUDA driver reserves tens
  of GiB of virtual address space at start-up and would fail under RLIMIT_AS; RLIMIT_DATA
  counts only private writable memory, which the host side of grading really uses.
  RLIMIT_NPROC counts every process of the user, and root ignores it, so it is set only when
  the child does not run as root.
- a user with no privileges: where the worker is root, a CPU-only child (the compiler) drops
  to `nobody` (KERNELGRADER_SANDBOX_USER; empty turns it off) after its namespaces are made,
  so even a hole in the include policy could not read root-only files. Probed once: where that
  user cannot run this Python (an interpreter under /root, say) the child stays root and the
  log says "privilege drop unavailable: ...". GPU children keep the worker's user.
- an empty private working directory (mode 0700, removed afterwards) that is also its HOME
  and TMPDIR (a GPU child's holds its private copy of the worker's CuPy kernel cache);
- a scrubbed environment: PATH, HOME, TMPDIR, LANG, PYTHONPATH (so `graders` imports) and the
  library paths NVRTC needs; CUDA_VISIBLE_DEVICES and the other CUDA/NVIDIA variables only
  for `gpu=True`. Nothing else of the worker's environment (database URL, secret key, broker
  credentials) reaches it. BLAS and OpenMP get one thread (a few for `gpu=True`), so NumPy
  does not start a thread per core under the sandbox user's shared process limit.
- no network: as root, a new network namespace (`unshare(CLONE_NEWNET)`), in which even the
  loopback interface is down. Not as root, a new user namespace with a network namespace
  inside it where the kernel allows unprivileged user namespaces. Where neither works the
  child keeps the host's network and every outcome's `log` says "network isolation
  unavailable: ..."; student code is device code and has no host system calls, so this
  fallback loses defence in depth, not the first line of defence.

Its stdout is captured and capped at `stdout_limit_bytes`; the rest is read and dropped so a
`printf` flood cannot stall the child, and a child that prints more than `print_limit_bytes`
in all, or keeps printing for more than `print_limit_seconds`, is killed: reason "printing".
Whatever it prints is only text: the answer comes from the private pipe alone. Its stderr
(Python's warnings and tracebacks) goes to the outcome's `log`, for the worker's log, never to
a student. Progress records from the child reach `on_progress` as they come
(graders.sandbox.supervise says how they pause its clocks).

For callers (measured on an H200 host, CuPy 14.2, Python 3.12):
- Compiling (gpu=False, RLIMIT_AS): `import cupy` on a GPU host preloads cuTENSOR/cuBLASLt and
  fails under a 1 GiB address-space limit ("failed to map segment from shared object").
  Import `cupy_backends.cuda.libs.nvrtc` directly (it does not import `cupy`), or allow more.
- Running (gpu=True): give memory_mb >= 4096; at 1024 MiB of RLIMIT_DATA CuPy's own NVRTC
  compile of a reduction ran out of memory. The host thread spin-waits while a kernel runs, and
  CuPy uses several threads, so a spinning kernel burned 3 s of CPU in 1.2 s of wall time: set
  cpu_seconds to several times wall_seconds, or a hung kernel reads as a CPU-time verdict
  instead of a timeout.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from graders.sandbox import prestart
from graders.sandbox.isolation import network_isolation
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import SandboxProcess, SpawnError, spawn
from graders.sandbox.supervise import ANSWER_LIMIT_BYTES, ProgressCallback, supervise

__all__ = ["RAISED", "SandboxLimits", "SandboxOutcome", "network_isolation", "run_sandboxed"]

# How an outcome's log names the exception a child's target raised ("TypeError: ..." after it),
# for callers that tell the grader's own bugs from what a kernel caused (graders.run.stage).
RAISED = "child raised "


@dataclass
class SandboxOutcome:
    """How a sandboxed child ended, and its answer when it gave one."""

    ok: bool
    value: dict[str, Any] | None
    # "", "timeout", "printing", "crashed", "resource_limit", "bad_result", "internal"
    reason: str
    message: str  # a sentence a student may read; never a traceback
    exit_code: int | None
    signal: int | None
    timed_out: bool
    stdout: str
    stdout_truncated: bool
    seconds: float
    log: list[str] = field(default_factory=list)  # for staff and the worker log
    # The step whose own time limit killed the child ("" when none did).
    stopped_step: str = ""
    # Total bytes the child printed on stdout, the dropped part included.
    stdout_total: int = 0
    pid: int = 0


# --- outcome ---------------------------------------------------------------------------------


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _classify(
    *,
    limits: SandboxLimits,
    timed_out: bool,
    status: int | None,
    rusage: resource.struct_rusage | None,
    answer: bytes,
    answer_overflow: bool,
    stdout_text: str,
    log: list[str],
    warm_cpu_s: float = 0.0,
    printing: str = "",
    printed: int = 0,
    inherited_rss_kb: int = 0,
) -> tuple[bool, dict[str, Any] | None, str, str, int | None, int | None]:
    """(ok, value, reason, message, exit_code, signal) from how the child ended.

    `inherited_rss_kb` is the worker's peak memory when it forked the child: a child's
    ru_maxrss never reads below it, so only a figure above it is the child's own peak."""
    exit_code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    signum = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    cpu_used = (rusage.ru_utime + rusage.ru_stime if rusage else 0.0) - warm_cpu_s
    max_rss_mb = rusage.ru_maxrss / 1024 if rusage else 0.0
    own = rusage is not None and rusage.ru_maxrss > inherited_rss_kb
    log.append(
        f"child ended: exit code {exit_code}, signal "
        f"{_signal_name(signum) if signum else None}, cpu {cpu_used:.2f} s, "
        f"max rss {max_rss_mb:.0f} MiB"
        + ("" if own else f" (the {inherited_rss_kb / 1024:.0f} MiB the worker had at the fork)")
    )
    own_rss_mb = max_rss_mb if own else 0.0
    if printing:
        return (
            False,
            None,
            "printing",
            printing_message(limits, printing, printed),
            exit_code,
            signum,
        )
    if timed_out:
        return (
            False,
            None,
            "timeout",
            f"Killed after {limits.wall_seconds:g} s: it did not finish within the time limit.",
            exit_code,
            signum,
        )
    if answer or answer_overflow:
        return _classify_answer(limits, answer, answer_overflow, exit_code, signum, log)
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_used >= limits.cpu_seconds):
        return (False, None, "resource_limit", _cpu_message(limits), exit_code, signum)
    if signum == signal.SIGXFSZ:
        return (False, None, "resource_limit", _file_size_message(limits), exit_code, signum)
    out_of_memory = limits.memory_mb is not None and (
        own_rss_mb >= 0.9 * limits.memory_mb
        or "bad_alloc" in stdout_text
        or "out of memory" in stdout_text.lower()
    )
    if (signum is not None or exit_code) and out_of_memory:
        return (False, None, "resource_limit", _memory_message(limits), exit_code, signum)
    if signum is not None:
        name = _signal_name(signum)
        return (
            False,
            None,
            "crashed",
            f"The process crashed ({name}) before it reported a result.",
            exit_code,
            signum,
        )
    if exit_code:
        return (
            False,
            None,
            "crashed",
            f"The process exited with status {exit_code} before it reported a result.",
            exit_code,
            signum,
        )
    return (
        False,
        None,
        "bad_result",
        "The process ended without reporting a result; please resubmit, and tell the course "
        "staff if this happens again.",
        exit_code,
        signum,
    )


def _classify_answer(
    limits: SandboxLimits,
    answer: bytes,
    overflow: bool,
    exit_code: int | None,
    signum: int | None,
    log: list[str],
) -> tuple[bool, dict[str, Any] | None, str, str, int | None, int | None]:
    bad = (
        False,
        None,
        "bad_result",
        "The grading process reported a result that could not be read; please resubmit, "
        "and tell the course staff if this happens again.",
        exit_code,
        signum,
    )
    if overflow:
        log.append(f"answer larger than {ANSWER_LIMIT_BYTES} bytes")
        return bad
    try:
        envelope = json.loads(answer.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        log.append(f"answer is not JSON: {exc}")
        return bad
    if not isinstance(envelope, dict):
        log.append("answer is not a JSON object")
        return bad
    if envelope.get("status") == "ok" and isinstance(envelope.get("value"), dict):
        if signum is not None:
            log.append(f"child was killed by {_signal_name(signum)} after it answered")
        return True, envelope["value"], "", "", exit_code, signum
    if envelope.get("status") == "error":
        kind, detail = envelope.get("kind"), str(envelope.get("detail", ""))
        if kind == "resource_limit":
            message = _file_size_message(limits) if detail == "file_size" else None
            return (
                False,
                None,
                "resource_limit",
                message or _memory_message(limits),
                exit_code,
                signum,
            )
        log.append(RAISED + detail)
        if envelope.get("traceback"):
            log.append(str(envelope["traceback"]))
        return (
            False,
            None,
            "internal",
            "The grader failed while handling this submission. This is not your fault: "
            "please resubmit, and tell the course staff if it happens again.",
            exit_code,
            signum,
        )
    log.append("answer has neither status ok with a value nor status error")
    return bad


def printing_message(limits: SandboxLimits, which: str, printed: int) -> str:
    """Why a child was stopped for printing, in a sentence with the bytes."""
    if which == "bytes":
        return (
            f"Stopped for printing: {_size(printed)} of output, more than the limit of "
            f"{_size(limits.print_limit_bytes)}."
        )
    return (
        f"Stopped for printing: output kept coming for more than {limits.print_limit_seconds:g} "
        f"s ({_size(printed)} in all)."
    )


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.0f} KiB"
    return f"{n} bytes"


def _cpu_message(limits: SandboxLimits) -> str:
    return f"Stopped after using {limits.cpu_seconds} s of CPU time, the limit for this step."


def _file_size_message(limits: SandboxLimits) -> str:
    return f"Stopped for writing a file larger than {limits.max_file_size_mb} MiB, the limit."


def _memory_message(limits: SandboxLimits) -> str:
    return f"Stopped for using more than {limits.memory_mb} MiB of memory, the limit."


# --- running ---------------------------------------------------------------------------------


def _could_not_start(log: list[str], start: float, why: str) -> SandboxOutcome:
    log.append(why)
    return SandboxOutcome(
        ok=False,
        value=None,
        reason="internal",
        message="The grader could not start a worker process. This is not your fault: "
        "please resubmit, and tell the course staff if it happens again.",
        exit_code=None,
        signal=None,
        timed_out=False,
        stdout="",
        stdout_truncated=False,
        seconds=time.monotonic() - start,
        log=log,
    )


def run_sandboxed(
    target: str,
    payload: dict[str, Any],
    *,
    limits: SandboxLimits,
    gpu: bool = False,
    pool: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> SandboxOutcome:
    """Run `target(payload)` ("package.module:function") in a sandboxed child process.

    `pool` names a prestart pool (graders.sandbox.prestart) to take a warm child from; where
    that pool is not configured, or its kind does not match, a fresh child is started.
    """
    start = time.monotonic()
    configured = prestart.pool(pool) if pool else None
    child: SandboxProcess
    try:
        if configured is not None and configured.spec.gpu == gpu and not limits.network:
            child = configured.take()
        else:
            child = spawn(limits=limits, gpu=gpu)
    except (SpawnError, OSError) as exc:
        return _could_not_start([], start, str(exc))
    child.role = target.partition(":")[0]
    request = json.dumps(
        {
            "target": target,
            "payload": payload,
            "limits": limits.for_request(gpu=gpu, nproc=child.nproc_limited),
        }
    ).encode()
    try:
        done = supervise(child, request, limits, on_progress)
    finally:
        shutil.rmtree(child.workdir, ignore_errors=True)
    log = done.log
    if done.stderr.strip():
        log.append("child stderr:\n" + done.stderr.strip())
    stdout_text = done.stdout.decode("utf-8", errors="replace")
    truncated = done.stdout_total > len(done.stdout)
    if truncated:
        log.append(f"stdout truncated: kept {len(done.stdout)} of {done.stdout_total} bytes")
    if done.never_ready:
        return _could_not_start(log, start, "the child never got ready for its request")
    ok, value, reason, message, exit_code, signum = _classify(
        limits=limits,
        timed_out=done.timed_out,
        status=done.status,
        rusage=done.rusage,
        answer=done.answer,
        answer_overflow=done.answer_overflow,
        stdout_text=stdout_text + "\n" + done.stderr,
        log=log,
        warm_cpu_s=done.warm_cpu_s,
        printing=done.stopped_printing,
        printed=done.stdout_total,
        inherited_rss_kb=child.inherited_rss_kb,
    )
    return SandboxOutcome(
        ok=ok,
        value=value,
        reason=reason,
        message=message,
        exit_code=exit_code,
        signal=signum,
        timed_out=done.timed_out,
        stdout=stdout_text,
        stdout_truncated=truncated,
        seconds=done.seconds,
        log=log,
        stopped_step=done.stopped_step,
        stdout_total=done.stdout_total,
        pid=child.pid,
    )
