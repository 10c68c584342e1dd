"""Run one grading step in a child process that holds nothing worth stealing or breaking.

`run_sandboxed("graders.compile_child:compile", payload, limits=...)` starts a fresh
`python -m graders.sandbox_child`, hands it the payload as JSON on a private pipe, and reads
its JSON answer from another private pipe. The child gets:

- its own session and process group; on the wall-clock limit the whole group gets SIGKILL;
- rlimits set between fork and exec: CPU seconds (SIGXCPU, then SIGKILL one second later),
  open files, file size, no core dumps, and memory. Memory is RLIMIT_AS for CPU-only work
  (the compiler). For `gpu=True` it is RLIMIT_DATA instead, because the CUDA driver reserves
  tens of GiB of virtual address space at start-up and would fail under RLIMIT_AS;
  RLIMIT_DATA counts only private writable memory, which the host side of grading really uses.
  RLIMIT_NPROC counts every process of the user, and root ignores it, so it is set only when
  the child does not run as root.
- a user with no privileges: where the worker is root, a CPU-only child (the compiler) drops
  to `nobody` (KERNELGRADER_SANDBOX_USER; empty turns it off) after its namespaces are made,
  so even a hole in the include policy could not read root-only files. Probed once: where that
  user cannot run this Python (an interpreter under /root, say) the child stays root and the
  log says "privilege drop unavailable: ...". GPU children keep the worker's user.
- an empty private working directory (mode 0700, removed afterwards) that is also its HOME
  and TMPDIR;
- a scrubbed environment: PATH, HOME, TMPDIR, LANG, PYTHONPATH (so `graders` imports) and the
  library paths NVRTC needs; CUDA_VISIBLE_DEVICES and the other CUDA/NVIDIA variables only
  for `gpu=True`. Nothing else of the worker's environment (database URL, secret key, broker
  credentials) reaches it.
- no network: as root, a new network namespace (`unshare(CLONE_NEWNET)`), in which even the
  loopback interface is down. Not as root, a new user namespace with a network namespace
  inside it where the kernel allows unprivileged user namespaces. Where neither works the
  child keeps the host's network and every outcome's `log` says "network isolation
  unavailable: ..."; student code is device code and has no host system calls, so this
  fallback loses defence in depth, not the first line of defence.

Its stdout and stderr are merged, captured and capped at `stdout_limit_bytes`; the rest is
read and dropped so a `printf` flood cannot stall the child. Whatever it prints is only text:
the answer comes from the private pipe alone.

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
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from graders.sandbox_isolation import (
    child_env,
    make_preexec,
    network_isolation,
    unprivileged_user,
)

__all__ = ["SandboxLimits", "SandboxOutcome", "network_isolation", "run_sandboxed"]

# The answer of a grading step is small JSON; anything bigger is a broken or hostile child.
_ANSWER_LIMIT_BYTES = 64 * 1024 * 1024
# After the child exits, how long we wait for its pipes to close before giving up on them.
_DRAIN_SECONDS = 1.0


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed child may use; sizes in MiB, times in seconds."""

    wall_seconds: float
    cpu_seconds: int
    memory_mb: int | None
    max_open_files: int = 64
    max_processes: int = 256  # threads count too; only enforced when not root
    max_file_size_mb: int = 16
    stdout_limit_bytes: int = 65536
    network: bool = False


@dataclass
class SandboxOutcome:
    """How a sandboxed child ended, and its answer when it gave one."""

    ok: bool
    value: dict[str, Any] | None
    # "", "timeout", "crashed", "resource_limit", "bad_result", "internal"
    reason: str
    message: str  # a sentence a student may read; never a traceback
    exit_code: int | None
    signal: int | None
    timed_out: bool
    stdout: str
    stdout_truncated: bool
    seconds: float
    log: list[str] = field(default_factory=list)  # for staff and the worker log


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
    status: int,
    rusage: resource.struct_rusage | None,
    answer: bytes,
    answer_overflow: bool,
    stdout_text: str,
    log: list[str],
) -> tuple[bool, dict[str, Any] | None, str, str, int | None, int | None]:
    """(ok, value, reason, message, exit_code, signal) from how the child ended."""
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    cpu_used = rusage.ru_utime + rusage.ru_stime if rusage else 0.0
    max_rss_mb = rusage.ru_maxrss / 1024 if rusage else 0.0
    log.append(
        f"child ended: exit code {exit_code}, signal "
        f"{_signal_name(signum) if signum else None}, cpu {cpu_used:.2f} s, "
        f"max rss {max_rss_mb:.0f} MiB"
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
        max_rss_mb >= 0.9 * limits.memory_mb
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
        log.append(f"answer larger than {_ANSWER_LIMIT_BYTES} bytes")
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
        log.append(f"child raised {detail}")
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


def _cpu_message(limits: SandboxLimits) -> str:
    return f"Stopped after using {limits.cpu_seconds} s of CPU time, the limit for this step."


def _file_size_message(limits: SandboxLimits) -> str:
    return f"Stopped for writing a file larger than {limits.max_file_size_mb} MiB, the limit."


def _memory_message(limits: SandboxLimits) -> str:
    return f"Stopped for using more than {limits.memory_mb} MiB of memory, the limit."


# --- running ---------------------------------------------------------------------------------


def _kill_group(pid: int, log: list[str], why: str) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
        log.append(f"killed process group {pid}: {why}")
    except (ProcessLookupError, PermissionError):
        pass


def _child_has_exited(pid: int) -> bool:
    """True once the child is a zombie; it is not reaped, so its pid (= group id) stays ours."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def run_sandboxed(
    target: str, payload: dict[str, Any], *, limits: SandboxLimits, gpu: bool = False
) -> SandboxOutcome:
    """Run `target(payload)` ("package.module:function") in a fresh sandboxed child process."""
    start = time.monotonic()
    log: list[str] = []
    unshare_flags = 0
    if not limits.network:
        unshare_flags, note = network_isolation()
        log.append(note)
    # A GPU child stays the worker's user: the driver's device files and the run stage's
    # progress files are the worker's. The compiler needs neither.
    creds = None
    if not gpu:
        creds, note = unprivileged_user()
        log.append(note)
    request = json.dumps({"target": target, "payload": payload}).encode()
    # The worker's pid in the name: its next start removes folders whose owner was killed.
    workdir = tempfile.mkdtemp(prefix=f"kg-sandbox-{os.getpid()}-")
    if creds is not None:
        os.chown(workdir, creds.uid, creds.gid)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "graders.sandbox_child", str(in_r), str(out_w)],
                cwd=workdir,
                env=child_env(workdir, gpu),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(in_r, out_w),
                start_new_session=True,
                preexec_fn=make_preexec(limits, gpu, unshare_flags, creds),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in (in_w, out_r):
                os.close(fd)
            log.append(f"could not start the sandboxed child: {exc}")
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
        finally:
            os.close(in_r)
            os.close(out_w)
        return _supervise(proc, request, in_w, out_r, limits, start, log)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _supervise(
    proc: subprocess.Popen[bytes],
    request: bytes,
    in_w: int,
    out_r: int,
    limits: SandboxLimits,
    start: float,
    log: list[str],
) -> SandboxOutcome:
    assert proc.stdout is not None
    stdout_fd = proc.stdout.fileno()
    for fd in (in_w, out_r, stdout_fd):
        os.set_blocking(fd, False)
    sel = selectors.DefaultSelector()
    sel.register(in_w, selectors.EVENT_WRITE)
    sel.register(out_r, selectors.EVENT_READ)
    sel.register(stdout_fd, selectors.EVENT_READ)
    pending = memoryview(request)
    answer = bytearray()
    answer_overflow = False
    stdout_buf = bytearray()
    stdout_total = 0
    deadline = start + limits.wall_seconds
    drain_deadline: float | None = None
    timed_out = False
    try:
        while sel.get_map():
            now = time.monotonic()
            if drain_deadline is None and now >= deadline:
                timed_out = True
                _kill_group(proc.pid, log, f"wall-clock limit of {limits.wall_seconds:g} s")
                drain_deadline = now + _DRAIN_SECONDS
            elif drain_deadline is None and _child_has_exited(proc.pid):
                # Whatever it left behind in its group goes too, so the pipes reach EOF.
                _kill_group(proc.pid, log, "the child exited; this ends anything it left behind")
                drain_deadline = now + _DRAIN_SECONDS
            if drain_deadline is not None and now >= drain_deadline:
                log.append("pipes still open after the child ended; stopped reading them")
                break
            for key, _ in sel.select(timeout=0.05):
                fd = key.fd
                if fd == in_w:
                    try:
                        written = os.write(in_w, pending[:65536])
                        pending = pending[written:]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    continue
                if fd == out_r:
                    if len(answer) + len(chunk) > _ANSWER_LIMIT_BYTES:
                        answer_overflow = True
                    else:
                        answer.extend(chunk)
                else:
                    stdout_total += len(chunk)
                    room = limits.stdout_limit_bytes - len(stdout_buf)
                    if room > 0:
                        stdout_buf.extend(chunk[:room])
    finally:
        sel.close()
        if in_w >= 0:
            os.close(in_w)
        os.close(out_r)
        # The child is gone or was sent SIGKILL; either way this returns promptly.
        _kill_group(proc.pid, [], "cleanup")
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        proc.stdout.close()
    stdout_text = stdout_buf.decode("utf-8", errors="replace")
    truncated = stdout_total > len(stdout_buf)
    if truncated:
        log.append(f"stdout truncated: kept {len(stdout_buf)} of {stdout_total} bytes")
    ok, value, reason, message, exit_code, signum = _classify(
        limits=limits,
        timed_out=timed_out,
        status=status,
        rusage=rusage,
        answer=bytes(answer),
        answer_overflow=answer_overflow,
        stdout_text=stdout_text,
        log=log,
    )
    return SandboxOutcome(
        ok=ok,
        value=value,
        reason=reason,
        message=message,
        exit_code=exit_code,
        signal=signum,
        timed_out=timed_out,
        stdout=stdout_text,
        stdout_truncated=truncated,
        seconds=time.monotonic() - start,
        log=log,
    )
