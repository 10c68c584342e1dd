"""Grading latency and throughput through the real service: the web app and its local worker.

Starts `kernelgrader serve` (SQLite and the local worker, the embedded default) on a fresh data
folder, then, per lab, uploads the lab's scoring-target reference over the REST API: N times one
after another (polled every 0.05 s), then M at once (polled every 0.3 s). Printed per lab:
upload -> first verdict and upload -> graded (p50, p95), seconds per status (from the
submission's own history) and per engine stage, graded per GPU-minute for the burst, the
host's busy CPU time per graded submission over it and its runnable threads, that CPU time by
kind of process (the run child, the sanitizer's child and each of its tools, the compiler,
the web process, the worker and its zygotes: from the worker's `sandbox cpu:` lines and the
long-lived processes' own counters; the rest is the bench's pollers and the host), the spread
(max/min) of the timed case's median over every grading of the same file, and the GPU's name;
and, read from the worker's log (graders.run.child), the timed sections' seconds and their
waits for the GPU's lock, the cases' waits and the prestarted children's warm-ups (p50, max).

    python bench/throughput.py [--labs matmul-tiled,vector-scale] [--sequential 5] [--burst 30]
                               [--json OUT.json] [--log serve.log]

A shared GPU (`--contend N`): after the sequential gradings (the GPU to itself: the reference
figures measured then are the "alone" figures), N more services start, each on a data folder of
its own, and each grades a burst of `--contend-burst` uploads of the lab's target reference while
this service grades its submission `--contend-reps` times at once. Printed: the ratio of the
submission to the reference it copies (`--submit baseline`: a student's copy of the lab's slowest
reference) in every grading, the spread of its timed medians, how far every reference figure a
grading used lies from the one measured alone, and how many gradings held their performance
points back because other work overlapped their timing.

    python bench/throughput.py --labs matmul-naive --submit baseline --sequential 3 --burst 0 \
        --contend 2 --contend-burst 30 --contend-reps 10

`--source FILE` uploads that file instead of a reference (a hostile file, to see how long it
holds a worker: printed as upload -> graded).

Needs a GPU host with the web stack installed. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
FINAL = ("graded", "compile_error", "error")
POLL_S = 0.05
# A burst's uploads are polled as a page would poll them (the method, every 0.3 s):
# 30 pollers every 0.05 s put 600 requests a second on the web process, whose CPU the
# grading then shares.
BURST_POLL_S = 0.3
RUN_QUEUE_POLL_S = 0.1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_running: list[Service] = []


def stop_services_on_sigterm() -> None:
    """A bench stopped from outside (`timeout`) stops every service it started, by process
    group, and ends at once: threads still polling a burst would otherwise keep it (and the
    services) alive past the timeout, grading on a GPU the next command expects to itself."""

    def stop(*_: object) -> None:
        for service in _running:
            service.stop(patience=5.0)
        os._exit(143)

    signal.signal(signal.SIGTERM, stop)


class Service:
    """`kernelgrader serve` in a child process, its output kept in a log file."""

    def __init__(self, data_dir: Path, log_path: Path, env: dict[str, str]) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.lines: list[str] = []
        full_env = {**os.environ, **env, "KERNELGRADER_DATA_DIR": str(data_dir)}
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        # Its own process group: stopping the bench stops serve and its worker with it.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)],
            cwd=str(data_dir),
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        _running.append(self)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with self.log_path.open("w", encoding="utf-8") as log:
            for line in self.proc.stdout:
                self.lines.append(line)
                log.write(line)
                log.flush()

    def token(self, timeout: float = 120.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in list(self.lines):
                m = re.match(r"\s*(kg_\S+)\s*$", line)
                if m:
                    return m.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("serve printed no API token; see " + str(self.log_path))

    def wait_healthy(self, client: httpx.Client, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if client.get("/api/v1/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the service did not answer its health check")

    def stop(self, patience: float = 20.0) -> None:
        """SIGTERM to serve's process group, SIGKILL if serve is still there after `patience`
        seconds; then SIGKILL to what is left of the group (a worker finishing its job)."""
        for sig, wait in ((signal.SIGTERM, patience), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def _when(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def get_json(client: httpx.Client, url: str, *, tries: int = 5) -> Any:
    """GET `url`'s JSON, again (up to `tries` times, a second apart) after a connection error:
    a web process that many polling threads overload resets a connection now and then, and
    one reset must not end a bench of hundreds of gradings."""
    for attempt in range(tries):
        try:
            return client.get(url).json()
        except httpx.TransportError:
            if attempt + 1 == tries:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


def grade_once(
    client: httpx.Client, lab: str, source: bytes, timeout: float, *, poll_s: float = POLL_S
) -> dict[str, Any]:
    """Upload, then poll (every `poll_s`) until graded; the times of the first verdict and of
    the last."""
    began = time.time()
    r = client.post(
        f"/api/v1/courses/demo/labs/{lab}/submissions",
        files={"file": ("bench.cu", source, "text/plain")},
    )
    r.raise_for_status()
    sid = r.json()["id"]
    first = None
    seen: list[str] = []
    detail: dict[str, Any] = {}
    while time.time() - began < timeout:
        detail = get_json(client, f"/api/v1/submissions/{sid}")
        now = time.time()
        if not seen or seen[-1] != detail["status"]:
            seen.append(detail["status"])
        if first is None and detail["cases"] and all(c.get("verdict") for c in detail["cases"]):
            first = now
        if detail["status"] in FINAL:
            break
        time.sleep(poll_s)
    done = time.time()
    history = detail.get("history", [])
    per_status: dict[str, float] = {}
    for a, b in zip(history, history[1:], strict=False):
        per_status[a["status"]] = per_status.get(a["status"], 0.0) + _when(b["at"]) - _when(a["at"])
    timed = [c for c in detail.get("cases", []) if (c.get("timings") or {}).get("kernel")]
    references = (timed[0]["timings"].get("references") or {}) if timed else {}
    return {
        "references_ms": {k: v["median_ms"] for k, v in references.items()},
        "performance_pending": "pending" in (detail.get("summary") or ""),
        "id": sid,
        "status": detail.get("status"),
        "statuses_seen": seen,
        "uploaded": began,
        "first_verdict_s": (first or done) - began,
        "graded_s": done - began,
        "finished_at": done,
        "per_status_s": per_status,
        "stage_seconds": detail.get("stage_seconds", {}),
        "timed_median_ms": timed[0]["timings"]["kernel"]["median_ms"] if timed else None,
        "timed_reps": timed[0]["timings"]["kernel"]["reps"] if timed else None,
        "failed_cases": [c["name"] for c in detail.get("cases", []) if not c["passed"]],
        "score": detail.get("score"),
        "gpu": (detail.get("gpu") or {}).get("name"),
        "summary": detail.get("summary", "") or detail.get("status_message", ""),
        "compile_message": detail.get("compile_message", ""),
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _means(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    keys = sorted({k for r in rows for k in r[key]})
    return {k: statistics.fmean(r[key].get(k, 0.0) for r in rows) for k in keys}


def _reference_figures(detail_rows: list[dict[str, Any]]) -> list[dict[str, float]]:
    return [r.get("references_ms") or {} for r in detail_rows]


def contend(
    client: httpx.Client,
    lab: str,
    source: bytes,
    *,
    others: list[tuple[Service, httpx.Client]],
    other_source: bytes,
    other_burst: int,
    reps: int,
    timeout: float,
    alone: dict[str, float],
    copied: str,
) -> dict[str, Any]:
    """The submission graded `reps` times at once while every other service grades a burst."""
    stop = threading.Event()
    background: list[dict[str, Any]] = []

    def keep_busy(other: httpx.Client) -> None:
        with ThreadPoolExecutor(max_workers=other_burst) as pool:
            rows = pool.map(
                lambda _: grade_once(other, lab, other_source, timeout), range(other_burst)
            )
            background.extend(rows)
        stop.set()

    threads = [threading.Thread(target=keep_busy, args=(c,), daemon=True) for _, c in others]
    for t in threads:
        t.start()
    time.sleep(2.0)  # the others' uploads are compiling and running by now
    with ThreadPoolExecutor(max_workers=reps) as pool:
        rows = list(pool.map(lambda _: grade_once(client, lab, source, timeout), range(reps)))
    for t in threads:
        t.join(timeout)
    ratios = [
        r["timed_median_ms"] / r["references_ms"][copied]
        for r in rows
        if r["timed_median_ms"] and copied in (r.get("references_ms") or {})
    ]
    medians = [r["timed_median_ms"] for r in rows if r["timed_median_ms"]]
    off = [
        abs(ms / alone[name] - 1.0)
        for figures in _reference_figures(rows)
        for name, ms in figures.items()
        if name in alone
    ]
    return {
        "reps": len(rows),
        "ratios": ratios,
        "timed_medians": medians,
        "median_max_over_min": max(medians) / min(medians) if medians else None,
        "reference_off_max": max(off) if off else None,
        "held_back": sum(1 for r in rows if r.get("performance_pending")),
        "others_graded": sum(1 for r in background if r["status"] == "graded"),
        "rows": rows,
    }


def bench_lab(
    client: httpx.Client,
    lab: str,
    source: bytes,
    sequential: int,
    burst: int,
    timeout: float,
    service: Service | None = None,
) -> dict[str, Any]:
    seq = [grade_once(client, lab, source, timeout) for _ in range(sequential)]
    burst_rows: list[dict[str, Any]] = []
    rate = None
    cpu_per_graded = None
    run_queue = None
    by_kind = None
    if burst:
        began, cpu_before = time.time(), host_cpu_busy_s()
        kinds = CpuByKind(service) if service is not None else None
        with RunQueue() as runnable, ThreadPoolExecutor(max_workers=burst) as pool:
            burst_rows = list(
                pool.map(
                    lambda _: grade_once(client, lab, source, timeout, poll_s=BURST_POLL_S),
                    range(burst),
                )
            )
        span = max(r["finished_at"] for r in burst_rows) - began
        graded = sum(r["status"] == "graded" for r in burst_rows)
        rate = 60.0 * graded / span
        if cpu_before is not None and graded:
            cpu_per_graded = (host_cpu_busy_s() or cpu_before) - cpu_before
            cpu_per_graded /= graded
            if kinds is not None:
                by_kind = kinds.per_graded(graded, cpu_per_graded)
        run_queue = runnable.figures(os.cpu_count() or 1)
    every = seq + burst_rows
    medians = [r["timed_median_ms"] for r in every if r["timed_median_ms"]]
    return {
        "lab": lab,
        "sequential": {
            "n": len(seq),
            "first_verdict_p50": _pct([r["first_verdict_s"] for r in seq], 0.5),
            "first_verdict_p95": _pct([r["first_verdict_s"] for r in seq], 0.95),
            "graded_p50": _pct([r["graded_s"] for r in seq], 0.5),
            "graded_p95": _pct([r["graded_s"] for r in seq], 0.95),
            "per_status_mean_s": _means(seq, "per_status_s"),
            "stage_mean_s": _means(seq, "stage_seconds"),
        },
        "burst": {
            "n": len(burst_rows),
            "graded_per_gpu_minute": rate,
            "first_verdict_p50": _pct([r["first_verdict_s"] for r in burst_rows], 0.5),
            "graded_p50": _pct([r["graded_s"] for r in burst_rows], 0.5),
            "graded_p95": _pct([r["graded_s"] for r in burst_rows], 0.95),
            # The whole host's busy CPU time over the burst (the service, its children, the
            # bench's own pollers), per graded submission, and the host's cores.
            "host_cpu_s_per_graded": cpu_per_graded,
            "cpu_s_per_graded_by_kind": by_kind,
            "host_cores": os.cpu_count(),
            "runnable_threads": run_queue,
        },
        "timed_median_ms": medians,
        "timed_median_max_over_min": max(medians) / min(medians) if medians else None,
        "not_graded": [r for r in every if r["status"] != "graded" or r["failed_cases"]][:3],
        "statuses_seen": seq[0]["statuses_seen"] if seq else [],
        "gpu": next((r["gpu"] for r in every if r["gpu"]), None),
        "rows": every,
    }


_CPU_NOTE = re.compile(r"sandbox cpu: role=(\S+) cpu_s=([0-9.]+)")
# A role in the worker's `sandbox cpu:` lines (graders.sandbox.process.note_cpu) -> its kind.
# "graders.sanitizer.child" is the sanitizer's child with its tools' processes: its parts come
# as "sanitizer.child" (its own) and one line per tool.
_KINDS = {
    "graders.run.child": "run child",
    "sanitizer.child": "sanitizer child",
    "sanitizer.memcheck": "memcheck",
    "sanitizer.racecheck": "racecheck",
    "sanitizer.synccheck": "synccheck",
    "unused": "spares never used",
}


def _kind(role: str) -> str | None:
    if role == "graders.sanitizer.child":
        return None  # counted by its parts
    if role.startswith("graders.compile"):
        return "compile"
    return _KINDS.get(role, "other children")


def _process_cpu_s(pid: int) -> float:
    """A process's own CPU seconds (utime + stime; not its children's)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                found.append((int(entry.name), (entry / "cmdline").read_bytes().decode()))
        except (OSError, IndexError, ValueError):
            continue
    return found


class CpuByKind:
    """CPU seconds by kind of process over a block of the bench: the children's from the
    worker's `sandbox cpu:` lines logged meanwhile, the long-lived processes' (web, worker,
    zygotes) from their own counters; "other" is the host's busy time less all of them (the
    bench's own pollers, the kernel, anything else on the host)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.first_line = len(service.lines)
        self.before = self._long_lived()

    def _long_lived(self) -> dict[str, float]:
        web = self.service.proc.pid
        figures = {"web": _process_cpu_s(web)}
        for pid, cmdline in _children(web):
            if "worker" in cmdline:
                figures["worker"] = figures.get("worker", 0.0) + _process_cpu_s(pid)
                for zpid, zcmd in _children(pid):
                    if "graders.sandbox.zygote" in zcmd:
                        figures["zygotes"] = figures.get("zygotes", 0.0) + _process_cpu_s(zpid)
        return figures

    def per_graded(self, graded: int, host_per_graded: float | None) -> dict[str, float]:
        time.sleep(2.0)  # the last children's ends are logged once reaped
        sums: dict[str, float] = {}
        for line in self.service.lines[self.first_line :]:
            m = _CPU_NOTE.search(line)
            kind = _kind(m.group(1)) if m else None
            if m and kind:
                sums[kind] = sums.get(kind, 0.0) + float(m.group(2))
        after = self._long_lived()
        for name, value in after.items():
            sums[name] = value - self.before.get(name, 0.0)
        out = {k: v / graded for k, v in sorted(sums.items(), key=lambda kv: -kv[1])}
        if host_per_graded is not None:
            out["other (bench, host)"] = host_per_graded - sum(out.values())
        return out


class RunQueue:
    """The host's runnable threads (/proc/stat `procs_running`), sampled every
    `RUN_QUEUE_POLL_S` while the block runs: more of them than cores means the CPU, not the
    GPU, held gradings up then."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(RUN_QUEUE_POLL_S):
            try:
                with open("/proc/stat", encoding="ascii") as f:
                    line = next(x for x in f if x.startswith("procs_running "))
            except (OSError, StopIteration):
                return
            self.samples.append(int(line.split()[1]) - 1)  # less this sampler

    def __enter__(self) -> RunQueue:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def figures(self, cores: int) -> dict[str, Any] | None:
        if not self.samples:
            return None
        return {
            "p50": _pct([float(x) for x in self.samples], 0.5),
            "p95": _pct([float(x) for x in self.samples], 0.95),
            "over_cores": sum(x > cores for x in self.samples) / len(self.samples),
        }


def host_cpu_busy_s() -> float | None:
    """Seconds of CPU time the host's cores have spent busy since boot (/proc/stat: every
    state but idle and iowait); None where that file is missing."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


_SECTION = re.compile(r"timing: section ([0-9.]+) s, ([0-9.]+) s waiting for the lock")
_CASE = re.compile(r"^case [^:]+: ([0-9.]+) s, ([0-9.]+) s waiting for the lock")
_WARM = re.compile(r"warm-up took ([0-9.]+) s")


def worker_figures(lines: list[str]) -> dict[str, Any]:
    """From the worker's log (graders.run.child): the timed sections' seconds and their waits
    for the GPU's lock, the cases' waits, and the prestarted children's warm-ups."""

    def spread(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        return {"n": len(values), "p50": statistics.median(values), "max": max(values)}

    sections = [m.groups() for line in lines if (m := _SECTION.search(line))]
    cases = [m.groups() for line in lines if (m := _CASE.search(line))]
    return {
        "section_s": spread([float(a) for a, _ in sections]),
        "section_lock_wait_s": spread([float(b) for _, b in sections]),
        "case_lock_wait_s": spread([float(b) for _, b in cases]),
        "warm_up_s": spread([float(m.group(1)) for line in lines if (m := _WARM.search(line))]),
    }


def _print_worker(figures: dict[str, Any]) -> None:
    shown = [
        f"{label} p50 {f['p50']:.3f} s max {f['max']:.2f} s (n={f['n']})"
        for label, f in (
            ("timed section", figures["section_s"]),
            ("its lock wait", figures["section_lock_wait_s"]),
            ("a case's lock wait", figures["case_lock_wait_s"]),
            ("spare warm-up", figures["warm_up_s"]),
        )
        if f
    ]
    if shown:
        print("   worker log: " + "; ".join(shown))


def _print(result: dict[str, Any]) -> None:
    s, b = result["sequential"], result["burst"]
    print(f"\n== {result['lab']} on {result['gpu']}")
    print(f"   statuses seen: {' -> '.join(result['statuses_seen'])}")
    print(
        f"   sequential x{s['n']}: upload->first verdict p50 {s['first_verdict_p50']:.2f} s "
        f"p95 {s['first_verdict_p95']:.2f} s; upload->graded p50 {s['graded_p50']:.2f} s "
        f"p95 {s['graded_p95']:.2f} s"
    )
    for label, key in (("per status", "per_status_mean_s"), ("engine stages", "stage_mean_s")):
        print(f"   {label} (mean s): " + ", ".join(f"{k} {v:.2f}" for k, v in s[key].items()))
    if b["n"]:
        print(
            f"   burst x{b['n']}: {b['graded_per_gpu_minute']:.1f} graded per GPU-minute; "
            f"first verdict p50 {b['first_verdict_p50']:.2f} s; graded p50 {b['graded_p50']:.2f} s "
            f"p95 {b['graded_p95']:.2f} s"
        )
        if b.get("host_cpu_s_per_graded"):
            per, cores = b["host_cpu_s_per_graded"], b["host_cores"] or 1
            print(
                f"   host CPU over the burst: {per:.1f} core-s busy per graded submission; "
                f"{cores} cores at that cost grade at most {60 * cores / per:.0f} per minute"
            )
        if b.get("cpu_s_per_graded_by_kind"):
            parts = ", ".join(f"{k} {v:.2f}" for k, v in b["cpu_s_per_graded_by_kind"].items())
            print(f"   CPU core-s per graded submission by process: {parts}")
        if b.get("runnable_threads"):
            q = b["runnable_threads"]
            print(
                f"   runnable threads over the burst: p50 {q['p50']:.0f}, p95 {q['p95']:.0f}; "
                f"more than the cores in {100 * q['over_cores']:.0f} % of samples"
            )
    m = result["timed_median_ms"]
    if m:
        print(
            f"   timed case median over {len(m)} gradings: {statistics.median(m):.4f} ms, "
            f"max/min {result['timed_median_max_over_min']:.4f}"
        )
    for bad in result["not_graded"]:
        print(
            f"   NOT GRADED CLEANLY: #{bad['id']} {bad['status']} {bad['failed_cases']} "
            f"{bad['summary'][:300]} {bad['compile_message'][:300]}"
        )


others_started: list[Service] = []


def _contend_services(
    args: argparse.Namespace,
    env: dict[str, str],
    client: httpx.Client,
    lab: str,
    source: bytes,
    other_source: bytes,
    alone: dict[str, float],
    copied: str,
) -> dict[str, Any]:
    """Start the other services (once), each on a data folder of its own, and contend."""
    pairs: list[tuple[Service, httpx.Client]] = []
    for i in range(args.contend):
        if len(others_started) <= i:
            folder = Path(tempfile.mkdtemp(prefix=f"kernelgrader-bench-other{i}-"))
            others_started.append(Service(folder, folder / "serve.log", env))
        other = others_started[i]
        c = httpx.Client(
            base_url=other.base,
            headers={"Authorization": f"Bearer {other.token()}"},
            timeout=60.0,
        )
        other.wait_healthy(c)
        pairs.append((other, c))
    try:
        return contend(
            client,
            lab,
            source,
            others=pairs,
            other_source=other_source,
            other_burst=args.contend_burst,
            reps=args.contend_reps,
            timeout=args.timeout,
            alone=alone,
            copied=copied,
        )
    finally:
        for _, c in pairs:
            c.close()


def _print_contended(c: dict[str, Any], alone: dict[str, float]) -> None:
    ratios = c["ratios"]
    print(f"   shared GPU: {c['reps']} gradings beside {c['others_graded']} of the other services'")
    if ratios:
        print(
            f"   ratio to the copied reference: p50 {statistics.median(ratios):.4f}, "
            f"min {min(ratios):.4f}, max {max(ratios):.4f}"
        )
    if c["median_max_over_min"]:
        print(f"   timed medians max/min {c['median_max_over_min']:.4f}")
    if c["reference_off_max"] is not None:
        print(
            f"   reference figures used, furthest from alone: {100 * c['reference_off_max']:.2f} % "
            f"(alone: {', '.join(f'{k} {v:.4g} ms' for k, v in alone.items())})"
        )
    print(f"   gradings that held their performance points back: {c['held_back']}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--labs", default="matmul-tiled,vector-scale")
    parser.add_argument("--sequential", type=int, default=5)
    parser.add_argument("--burst", type=int, default=30)
    parser.add_argument("--burst-labs", default="", help="labs that get the burst (default: all)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per grading")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--log", type=Path, default=None, help="where serve's output goes")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for serve")
    parser.add_argument(
        "--submit",
        choices=("target", "baseline"),
        default="target",
        help="which reference to upload as the submission",
    )
    parser.add_argument("--source", type=Path, default=None, help="upload this file instead")
    parser.add_argument("--contend", type=int, default=0, help="other services on the GPU")
    parser.add_argument("--contend-burst", type=int, default=30)
    parser.add_argument("--contend-reps", type=int, default=10)
    args = parser.parse_args()
    stop_services_on_sigterm()
    env = dict(e.split("=", 1) for e in args.env)
    data_dir = Path(tempfile.mkdtemp(prefix="kernelgrader-bench-"))
    log_path = args.log or data_dir / "serve.log"
    service = Service(data_dir, log_path, env)
    results = []
    try:
        token = service.token()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=service.base, headers=headers, timeout=60.0) as client:
            service.wait_healthy(client)
            burst_labs = set(filter(None, args.burst_labs.split(","))) or None
            seen = 0  # the service's log lines read so far (each lab's own figures)
            for lab in filter(None, args.labs.split(",")):
                sys.path.insert(0, str(ROOT))
                from graders.spec import load_builtin_lab

                spec = load_builtin_lab(lab)
                wanted = spec.scoring.baseline if args.submit == "baseline" else spec.scoring.target
                name = wanted or next(r.name for r in spec.references if r.file)
                ref = spec.reference(name)
                if not ref.file:
                    ref = next(r for r in spec.references if r.file)
                source = args.source.read_bytes() if args.source else ref.source.encode()
                burst = args.burst if burst_labs is None or lab in burst_labs else 0
                began = time.monotonic()
                result = bench_lab(
                    client, lab, source, args.sequential, burst, args.timeout, service=service
                )
                result["submission"] = str(args.source) if args.source else ref.file
                result["wall_s"] = time.monotonic() - began
                result["worker"] = worker_figures(service.lines[seen:])
                seen = len(service.lines)
                _print(result)
                _print_worker(result["worker"])
                sys.stdout.flush()
                if args.contend:
                    alone = next(
                        (
                            r["references_ms"]
                            for r in reversed(result["rows"])
                            if r["references_ms"]
                        ),
                        {},
                    )
                    target = spec.reference(spec.scoring.target or name)
                    result["contended"] = _contend_services(
                        args, env, client, lab, source, target.source.encode(), alone, ref.name
                    )
                    _print_contended(result["contended"], alone)
                results.append(result)
    finally:
        for other in others_started:
            other.stop()
        service.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
