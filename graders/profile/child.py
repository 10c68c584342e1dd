"""The profiling stage's sandboxed child: ncu on each program, its report read into a summary.

`profile_in_child(payload)` runs, one after the other, the submission's kernels and then each
reference that has no kept profile yet, every one as `ncu ... python -m graders.profile.target`
in this child's private folder (graders.profile.tool says which launches ncu profiles). ncu
runs in its own session, dies with this child (PR_SET_PDEATHSIG; its program by the lifeline
this child hands down, graders.sandbox.lifeline) and is killed with its program when the time
is up; its output (a kernel's printf among it) is read up to a cap.
The report is read here, inside the sandbox, into a bounded summary
(graders.profile.extract); the submission's report file itself goes back too, for staff to
download, when it is small enough.

ncu talks to the program it profiles through a local port. The sandbox's network namespace
has its loopback interface down, so this child brings that interface up: it is the
namespace's own, and reaches nothing outside it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from graders.gpu import gpu_lock
from graders.profile import extract, tool
from graders.profile.tool import YIELDED, YIELDED_MESSAGE
from graders.sandbox import lifeline
from graders.sanitizer.target import die_with_parent
from graders.timing.lock import GpuLock

OUTPUT_CAP_BYTES = 256 * 1024
# The largest report file handed back for download (it travels base64 in the answer).
MAX_REPORT_BYTES = 24 << 20
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def loopback_up() -> str:
    """Bring this network namespace's loopback interface up; a note on what happened."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            request = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, request))[1]
            if flags & _IFF_UP:
                return "loopback already up"
            fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
            return "loopback brought up"
    except OSError as exc:
        return f"loopback left as it was ({exc})"


PROFILER_BUSY = (
    "Other profiles kept the GPU's profiler busy until the time for this one was up, so the "
    "kernel's profile is missing."
)


def _run_ncu(
    cmd: list[str], cwd: Path, timeout_s: float, lock: GpuLock | None = None
) -> tuple[str, str, int | None]:
    """Run ncu; (status, output, exit code). Output capped; killed with its group at the limit,
    or, with `lock`, as soon as a timed section waits for it (status `yielded`): the profiled
    program holds the lock shared, and ncu's replays keep it for tens of seconds."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env[lifeline.ENV] = str(lifeline.hand_down(cwd))  # the program dies with this child
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=die_with_parent,
        env=env,
    )
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    output = bytearray()
    status = "done"
    end = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout.fileno(), selectors.EVENT_READ)
        open_ = True
        while open_:
            if time.monotonic() >= end:
                status = "timeout"
                break
            if lock is not None and lock.writer_waiting():
                status = YIELDED
                break
            for key, _ in sel.select(timeout=0.05):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    open_ = False
                    break
                room = OUTPUT_CAP_BYTES - len(output)
                if room > 0:
                    output.extend(chunk[:room])
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # whatever ncu or its program left behind
    code = proc.wait()
    proc.stdout.close()
    return status, output.decode("utf-8", errors="replace"), code


def _version(program: str) -> str:
    try:
        done = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return tool.version_of(done.stdout)


def _profile_one(
    program: str, item: dict[str, Any], common: dict[str, Any], deadline: float, reader: Any
) -> dict[str, Any]:
    """One program (the submission, or a reference) under ncu; its summary or why not."""
    began = time.monotonic()
    name = str(item["name"])
    folder = Path.cwd() / f"profile-{len(list(Path.cwd().glob('profile-*')))}"
    sources = folder / "src"
    sources.mkdir(parents=True)
    filename = str(item.get("filename") or "submission.cu")
    # ncu imports the source into the report from here (the cubin's line info names the file).
    (sources / filename).write_text(str(item.get("source", "")), encoding="utf-8")
    job = {**common, "cubin_b64": item["cubin_b64"], "declarations": item.get("declarations", {})}
    (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
    result_path = folder / "result.json"
    report = folder / "report"
    cmd = tool.command(
        program,
        report=str(report),
        kernels=list(common["kernels"]),
        launches=int(common["launches"]),
        source_folder=str(sources),
        target=[
            sys.executable,
            "-m",
            "graders.profile.target",
            str(folder / "job.json"),
            str(result_path),
        ],
    )
    remaining = deadline - time.monotonic()
    out: dict[str, Any] = {"name": name, "status": "", "message": ""}
    if remaining < 5:
        out.update(status="timeout", message="There was no time left to profile it.")
        return out
    gpu = gpu_lock(common.get("lock_dir") or None)
    lock = gpu if common.get("yield_to_timing") else None
    give_up = lock.writer_waiting if lock is not None else None
    with gpu.profiler(until=deadline - 5, give_up=give_up) as held:
        if held:
            status, output, code = _run_ncu(cmd, folder, deadline - time.monotonic(), lock)
        else:  # it gave up waiting for the profiler: for a timed section, or at its time
            status, output, code = (YIELDED if give_up and give_up() else "busy"), "", None
    out["seconds"] = round(time.monotonic() - began, 3)
    if status == "busy":
        out.update(status="timeout", message=PROFILER_BUSY)
        return out
    out["output_tail"] = output[-4000:]
    if status == YIELDED:
        out.update(status=YIELDED, message=YIELDED_MESSAGE)
        return out
    target: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        target = json.loads(result_path.read_text(encoding="utf-8"))
    if tool.counters_refused(output):
        out.update(status="counters_not_permitted", message=tool.COUNTERS_NOT_PERMITTED)
        return out
    if status == "timeout":
        out.update(
            status="timeout",
            message=f"Nsight Compute did not finish within {common['timeout_s']:g} s, so the "
            "kernel's profile is missing.",
        )
        return out
    if target.get("verdict") not in (None, "ok"):
        out.update(
            status="kernel_failed",
            message=f"The kernel failed while it was profiled: {target.get('message', '')}",
        )
        return out
    path = report.with_suffix(".ncu-rep")
    if not path.is_file():
        # No result file: the program ended before its launches (it crashed, or ncu stopped it).
        why = "it profiled no launch of the kernel" if target else "the program it ran ended early"
        out.update(status="no_report", message=f"Nsight Compute ended without a report ({why}).")
        out["exit_code"] = code
        return out
    if reader is None:
        out.update(status="no_reader", message=tool.NO_READER)
        return out
    try:
        summary = extract.summarize_report(path, filename=filename, reader=reader)
    except extract.ReportError as exc:
        out.update(status="unreadable", message=f"{exc}.")
        return out
    if not summary["launches"]:
        out.update(status="no_report", message="The report holds no launch of the kernel.")
        return out
    out.update(status="ok", summary=summary)
    size = path.stat().st_size
    out["report_bytes"] = size
    if item.get("keep_report") and size <= MAX_REPORT_BYTES:
        out["report_b64"] = base64.b64encode(path.read_bytes()).decode("ascii")
    return out


def profile_in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: every program in `payload["programs"]` profiled, in order."""
    program = str(payload.get("ncu") or tool.executable() or "")
    if not program or not os.access(program, os.X_OK):
        return {"runs": [], "note": tool.NOT_INSTALLED, "status": "unavailable"}
    began = time.monotonic()
    deadline = began + float(payload["timeout_s"])
    notes = [loopback_up()]
    reader = extract.load_reader(tool.reader_folders(program))
    common = {
        "lab_folder": payload["lab_folder"],
        "case": payload["case"],
        "seed": payload["seed"],
        "kernels": payload["kernels"],
        "launches": payload["launches"],
        "timeout_s": float(payload["timeout_s"]),
        "lock_dir": payload.get("lock_dir"),
        "yield_to_timing": bool(payload.get("yield_to_timing")),
    }
    runs = []
    for item in payload["programs"]:
        run = _profile_one(program, item, common, deadline, reader)
        runs.append(run)
        if run["status"] in ("counters_not_permitted", "timeout", "no_reader", YIELDED):
            break  # the rest would end the same way
    return {
        "runs": runs,
        "version": _version(program),
        "notes": notes,
        "seconds": round(time.monotonic() - began, 3),
    }
