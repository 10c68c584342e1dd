"""The sanitizer's sandboxed child: compute-sanitizer's tools started ahead of need.

`warm_up` (before any request; graders.sandbox.prestart) starts memcheck, racecheck and
synccheck, each on the native launcher (graders/sanitizer/launcher.c, this child's copy) or,
where none was built, on `python -m graders.sanitizer.target`; each program makes its context
(holding the GPU's lock shared, so their start never overlaps a timed section) and then waits
on a FIFO for its job. `run_in_child(payload)` reads the submission's cubin to decide which
tools it needs (graders.sanitizer.needs: racecheck only where a kernel uses shared memory,
synccheck only where it uses barriers or warp-synchronous instructions), writes each needed
tool its job (for the launcher, a case laid out afresh from the graded run's own plans:
graders.sanitizer.job) and lets the others go without one, then waits until the tools end or
their time is up, and parses the findings.

Two channels per tool, never mixed: each tool writes its report to a log file of its own
(`--log-file`), which only the tool writes, and the program's standard output (what the
student's kernel prints) goes to a pipe that is read, up to a cap, and dropped. A kernel that
prints a line shaped like a report ("========= ... barrier ...") is only text on the pipe; the
findings come from the log file alone. A kernel that prints more than `PRINT_KILL_BYTES` under
the tool is stopped there, with a ruling that names the printing.

Every allocation under the tools is followed by `TAIL_GUARD_BYTES` of padding that memcheck
watches (`--padding`), the same spacing as a graded run's guard bands (graders/run/layout.py).
Each tool runs in its own session and is killed with its program when its time is up. It dies
with this child: the tool by a parent-death signal, its program (which compute-sanitizer's
launcher, a subreaper in the tool's session, would otherwise keep) by the lifeline this child
hands down (graders.sandbox.lifeline).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from graders.run.layout import TAIL_GUARD_BYTES
from graders.run.output import PRINTF_FIFO_BYTES
from graders.sandbox import lifeline, progress
from graders.sanitizer import launcher
from graders.sanitizer.job import case_data, largest_block
from graders.sanitizer.needs import tools_needed
from graders.sanitizer.target import die_with_parent
from graders.sanitizer.tool import TOOLS, executable, parse_output, unavailable_reason

# What is read of one tool's report (its log file) and kept of the program's printed output.
OUTPUT_CAP_BYTES = 256 * 1024
# A kernel that prints more than this under a tool is stopped: printing under instrumentation
# is slow, and gigabytes of it would hold the GPU for minutes.
PRINT_KILL_BYTES = 8 << 20
READY_LIMIT_S = 180.0
# Where a CUDA error in the launcher is the kernel's doing (its module, its arrays, its launch),
# not the host's (no driver, no context).
KERNEL_STEPS = ("load", "alloc", "copy", "launch", "wait")


def _files(folder: Path, name: str) -> tuple[Path, Path, Path, Path, Path]:
    """A tool's job fifo, its program's ready flag, result and lock-held flag, and the tool's
    own report."""
    return (
        folder / f"job-{name}.fifo",
        folder / f"ready-{name}",
        folder / f"result-{name}.json",
        folder / f"held-{name}",
        folder / f"report-{name}.log",
    )


class _Tool:
    def __init__(
        self, name: str, proc: subprocess.Popen[bytes], folder: Path, native: bool = False
    ) -> None:
        self.name = name
        self.proc = proc
        self.native = native  # its program is the launcher, not the Python program
        self.fifo, self.ready, self.result, self.held, self.report = _files(folder, name)
        self.output = bytearray()  # the program's stdout: what the kernel printed
        self.total = 0
        self.status = "running"
        self.front_cpu_s = 0.0  # compute-sanitizer's own process, and what it waited for

    def report_text(self) -> str:
        """The tool's own report, from its log file (capped)."""
        try:
            with self.report.open("rb") as f:
                return f.read(OUTPUT_CAP_BYTES).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


_TOOLS: list[_Tool] = []


def _lock_files() -> list[str]:
    """The GPU's lock as the launcher takes it (graders.timing.lock): the gate and lock files,
    made here if need be, and the users folder."""
    from graders.gpu import gpu_lock

    lock = gpu_lock()
    for suffix in ("gate", "lock"):
        os.close(lock.open_file(suffix))
    with contextlib.suppress(OSError):
        lock.users_folder.mkdir(parents=True, exist_ok=True)
        os.chmod(lock.users_folder, 0o1777)
    return [str(lock.path("gate")), str(lock.path("lock")), str(lock.users_folder)]


def _command(
    program: str, tool: str, native: str | None, files: tuple[Path, ...], lock: list[str]
) -> list[str]:
    fifo, ready, result, held, report = files
    cmd = [program, "--tool", tool, "--print-limit", "100" if tool == "racecheck" else "20"]
    # The report to a file only the tool writes; the program's output stays on stdout.
    cmd += ["--log-file", str(report), "--padding", str(TAIL_GUARD_BYTES)]
    if tool == "racecheck":
        # "hazard" lists each hazard with the reading and writing lines; the default
        # "analysis" report printed nothing for a missing tile-loop barrier on Hopper.
        cmd += ["--racecheck-report", "hazard"]
    flags = [str(fifo), str(ready), str(result), str(held)]
    if native:
        return cmd + [native, *flags, *lock]
    return cmd + [sys.executable, "-m", "graders.sanitizer.target", *flags]


def _start_tools(program: str, names: tuple[str, ...] = TOOLS) -> list[_Tool]:
    folder = Path.cwd()
    env = dict(os.environ)
    # The Python program is a fresh interpreter: it must find graders.
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    # compute-sanitizer's launcher outlives this child unless its program holds this.
    env[lifeline.ENV] = str(lifeline.hand_down(folder))
    native = launcher.in_child()
    lock = _lock_files() if native else []
    tools = []
    for name in names:
        files = _files(folder, name)
        os.mkfifo(files[0], 0o600)
        proc = subprocess.Popen(
            _command(program, name, native, files, lock),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
            env=env,
        )
        tools.append(_Tool(name, proc, folder, native is not None))
    return tools


def warm_up(names: tuple[str, ...] = TOOLS) -> None:
    """Start the tools and wait until their programs are ready (each takes the GPU's lock
    shared while it makes its context, so none of this overlaps a timed section). A spare
    starts all three: which ones a submission needs is known once its cubin comes."""
    program = executable()
    if program is None or _TOOLS:
        return
    _TOOLS.extend(_start_tools(program, names))
    end = time.monotonic() + READY_LIMIT_S
    while time.monotonic() < end:
        if all(t.ready.exists() or t.proc.poll() is not None for t in _TOOLS):
            break
        time.sleep(0.02)


def _send(tool: _Tool, job: bytes) -> None:
    """Hand the job to a waiting program; a tool that is gone gets none (and is noted)."""
    fd = -1
    for _ in range(500):  # the program says it is ready a moment before it opens the FIFO
        try:
            fd = os.open(tool.fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            if tool.proc.poll() is not None:
                break
            time.sleep(0.01)
    if fd < 0:
        tool.status = "not_started"
        return
    try:
        os.set_blocking(fd, True)
        view = memoryview(job)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        tool.status = "crashed"
    finally:
        os.close(fd)


def _waiting(tools: list[_Tool]) -> bool:
    """Whether a program still waits for the GPU's lock (neither holds it yet nor has ended)."""
    return any(not t.held.exists() and t.proc.poll() is None for t in tools)


def _collect(tools: list[_Tool], timeout_s: float) -> float:
    """Read every tool's output, capped, until all end or the time is up (then kill them).

    The time starts once every program holds the GPU's lock for its launch (or has ended): a
    timed section elsewhere that keeps them waiting is no time of the submission's, and the
    parent's clock stops meanwhile too. Returns the seconds they waited."""
    sel = selectors.DefaultSelector()
    for tool in tools:
        assert tool.proc.stdout is not None
        os.set_blocking(tool.proc.stdout.fileno(), False)
        sel.register(tool.proc.stdout.fileno(), selectors.EVENT_READ, tool)
    began = time.monotonic()
    waited = 0.0
    on_wait, on_held = progress.lock_callbacks("sanitizer")
    waiting = _waiting(tools)
    if waiting:
        on_wait()
    end = began + timeout_s
    while sel.get_map() and time.monotonic() < end:
        if waiting and not _waiting(tools):
            waiting = False
            waited = time.monotonic() - began
            end = time.monotonic() + timeout_s
            on_held()
        elif waiting:
            end = time.monotonic() + timeout_s
        for key, _ in sel.select(timeout=0.05):
            tool = key.data
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(key.fd)
                continue
            tool.total += len(chunk)
            room = OUTPUT_CAP_BYTES - len(tool.output)
            if room > 0:
                tool.output.extend(chunk[:room])
            if tool.total > PRINT_KILL_BYTES and tool.status == "running":
                tool.status = "printing"
                tool.kill()
    for key in list(sel.get_map().values()):
        key.data.status = "timeout"
        key.data.kill()
    sel.close()
    for tool in tools:
        tool.kill()  # whatever the tool left behind
        tool.front_cpu_s = _wait(tool.proc)
        if tool.proc.stdout is not None:
            tool.proc.stdout.close()
    if waiting:
        on_held()
        waited = time.monotonic() - began
    return waited


def _wait(proc: subprocess.Popen[bytes]) -> float:
    """Reap a tool's process; the CPU seconds it (and what it waited for) used."""
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        return 0.0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def _job(tool: _Tool, job: dict[str, Any], cubin: bytes, case: tuple[Any, Any] | None) -> bytes:
    """What `tool`'s program reads: the launcher's bytes (a layout of its own), or the Python
    program's JSON. `case`: the lab and the case's data, where a launcher needs them."""
    if not tool.native or case is None:
        return json.dumps(job).encode()
    from graders.sanitizer.job import encode

    lab, data = case
    timeout = float(job.get("timeout_s", 60))
    return encode(lab, data, cubin, timeout_s=timeout, printf_bytes=PRINTF_FIFO_BYTES)


def _as_verdict(target: dict[str, Any], timeout_s: float, block: tuple[int, int]) -> None:
    """The launcher's ending ("ok", "timeout", a CUDA error's name) as the Python program said
    it: a verdict and a sentence (graders.run.harness). Raises where the host, not the kernel,
    failed (no driver, no context, a job it could not read): that rules nothing."""
    from graders.run.harness import classify_cuda_error, hang_failure

    verdict = target.get("verdict")
    if verdict == "timeout":
        failure = hang_failure(timeout_s)
        target.update(verdict=failure.verdict, message=failure.message)
    elif verdict == "cuda_error" and target.get("where") in KERNEL_STEPS:
        error = RuntimeError(str(target.get("error")))
        failure = classify_cuda_error(error, threads=block[0], shared=block[1])
        target.update(verdict=failure.verdict, message=failure.message)
    elif verdict != "ok":
        raise RuntimeError(f"the sanitizer's launcher failed: {target}")


def _tool_cpu(tool: _Tool, target: dict[str, Any]) -> float:
    """A tool's CPU seconds: compute-sanitizer's process with what it waited for, its program
    among them (on an H200 its usage held the program's own: memcheck 1.09 CPU-s where the
    program said 0.32). A figure below the program's own left the program out (a launcher that
    stayed behind as a subreaper): then the program's is added."""
    program = float(target.get("cpu_s") or 0.0)
    front = tool.front_cpu_s
    return front if front >= program else front + program


def run_in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: the job under each tool it needs, at once; their findings and how each
    ended, and the tools it did not need, with why."""
    reason = unavailable_reason()
    if reason:
        return {"findings": [], "tools": {}, "note": reason}
    job = payload["job"]
    cubin = base64.b64decode(job["cubin_b64"])
    needed = tools_needed(cubin)
    if not _TOOLS:
        warm_up(tuple(needed))  # a cold child: only the tools it needs start, now
    timeout = float(payload["timeout_s"])
    filename = payload.get("filename", "submission.cu")
    began = time.monotonic()
    progress.step("sanitizer", timeout + 15)
    case = None
    if any(t.native and t.name in needed for t in _TOOLS):
        from graders.spec import load_lab

        lab = load_lab(job["lab_folder"])
        case = (lab, case_data(lab, job["case"], int(job["seed"]), job.get("declarations") or {}))
    for tool in _TOOLS:
        if tool.status != "running":
            continue
        if tool.name in needed:
            _send(tool, _job(tool, job, cubin, case))
        else:
            _send(tool, b"")  # let it go without a job
            tool.status = "not_needed"
    waited = _collect(_TOOLS, timeout)
    findings = []
    tools: dict[str, Any] = {}
    for tool in _TOOLS:
        if tool.status == "not_needed":
            tools[tool.name] = {"status": "not_needed", "cpu_s": round(tool.front_cpu_s, 3)}
            continue
        text = tool.report_text()
        findings += [f.to_dict() for f in parse_output(text, tool=tool.name, filename=filename)]
        target: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            target = json.loads(tool.result.read_text(encoding="utf-8"))
        if tool.native and target and case is not None:
            _as_verdict(target, float(job.get("timeout_s", 60)), largest_block(*case))
        if tool.status == "running":
            tool.status = "ok" if target else "crashed"
        if "Device not supported" in text:
            tool.status = "unsupported"
        tools[tool.name] = {
            "status": tool.status,
            "target": target,
            "output_bytes": tool.total,
            "native": tool.native,
            "cpu_s": round(_tool_cpu(tool, target), 3),
        }
        if payload.get("keep_output"):
            tools[tool.name]["output"] = text[-20000:]
            tools[tool.name]["printed"] = tool.output.decode("utf-8", errors="replace")[-20000:]
    seconds = time.monotonic() - began - waited
    own = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "findings": findings,
        "tools": tools,
        "needed": needed,
        "seconds": seconds,
        "waited_s": waited,
        "self_cpu_s": round(own.ru_utime + own.ru_stime, 3),
    }
