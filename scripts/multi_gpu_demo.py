"""Every GPU used: the service with `kernelgrader worker --gpus all` on a host with several
GPUs, several submissions uploaded, and which GPU graded each.

Meant for a lent multi-GPU machine (nvidia-h200-x2) through scripts/multi-gpu-demo.sh, which
installs the carried wheels first; runs anywhere the package and CuPy are installed. It also
checks GPU-model routing (a lab timed on this GPU's model is graded; one timed on a model no
worker has waits as `compiled`, with a note for staff), that a killed worker is restarted by
its supervisor, and what /metrics and `kernelgrader status` show. Exit status 0 when all of
that held. Everything it starts is stopped at the end; its data lives in a temporary folder.

    python3 scripts/multi_gpu_demo.py [--submissions 8] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
KERNELS = {
    "vector-scale": REPO / "reference_kernels" / "vector-scale" / "grid_stride.cu",
    "matmul-tiled": REPO / "reference_kernels" / "matmul-tiled" / "tiled.cu",
}
METRICS_TOKEN = "multi-gpu-demo-metrics-token-0123456789"


def say(message: str) -> None:
    print(f"[multi-gpu] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Run:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.data = Path(tempfile.mkdtemp(prefix="kernelgrader-multi-gpu-"))
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "KERNELGRADER_DATA_DIR": str(self.data),
            "KERNELGRADER_BROKER_POLLING_SECONDS": "0.1",
            "KERNELGRADER_SWEEP_SECONDS": "1",
            "KERNELGRADER_HEARTBEAT_SECONDS": "2",
            "KERNELGRADER_METRICS_TOKEN": METRICS_TOKEN,
        }
        self.env.pop("CUDA_VISIBLE_DEVICES", None)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []
        self.failures: list[str] = []

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", *args],
            env=self.env, cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"kernelgrader {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.out / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", *args],
            env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.processes.append(process)
        return process

    def check(self, ok: bool, what: str) -> None:
        say(("ok      " if ok else "FAILED  ") + what)
        if not ok:
            self.failures.append(what)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=150)
            except subprocess.TimeoutExpired:
                process.kill()


def wait_for(what: str, predicate: Any, seconds: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = predicate()
        except httpx.HTTPError:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what} after {seconds:.0f} s")
        time.sleep(every)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.out)
    # This process reads the same database as the service it starts (graded_by, below).
    os.environ.update(run.env)
    started = time.monotonic()
    try:
        return demo(run, args.submissions, started)
    finally:
        run.stop()
        say(f"stopped everything; logs in {args.out} ({time.monotonic() - started:.0f} s in all)")


def demo(run: Run, count: int, started: float) -> int:
    say(f"python {sys.version.split()[0]}, data in {run.data}")
    try:
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise SystemExit("nvidia-smi was not found: run this on a host with NVIDIA GPUs.") from None
    gpus = [line for line in smi.stdout.splitlines() if line.startswith("GPU ")]
    if not gpus:
        raise SystemExit(f"nvidia-smi lists no GPU: {smi.stdout}{smi.stderr}")
    say("nvidia-smi -L:\n" + smi.stdout.strip())
    run.cli("db", "upgrade")
    web = run.start("serve", "serve", "--port", str(run.port), "--no-local-worker")
    wait_for("the web service", lambda: httpx.get(f"{run.base}/api/v1/health").is_success, 120)
    serve_log = (run.out / "serve.log").read_text(errors="replace")
    token = re.search(r"shown once\):\s+(kg_\S+)", serve_log)
    if token is None:
        raise SystemExit(f"serve printed no API token:\n{serve_log}")
    auth = {"Authorization": f"Bearer {token.group(1)}"}
    say(f"web service up on {run.base} (pid {web.pid})")

    # Two extra courses for routing: a lab timed on this machine's GPU model, one on another.
    workers = run.start("workers", "worker", "--gpus", "all")

    def runners() -> list[dict[str, Any]]:
        health = httpx.get(f"{run.base}/api/v1/health").json()
        return [w for w in health["workers"] if w["alive"] and w["run"]]

    live = wait_for(
        f"{len(gpus)} GPU workers", lambda: len(runners()) >= len(gpus) and runners(), 300
    )
    for w in live:
        say(f"worker {w['id']}: GPU {w['gpu']} {w['gpu_model']} {w['arch']} (compile, run)")
    run.check(len({w["gpu"] for w in live}) == len(gpus) >= 2, "one worker per GPU, each its own")
    model = live[0]["gpu_model"]
    run.cli("course", "create", "routing")
    run.cli("lab", "add", "routing", "vector-scale", "--gpu-model", model.replace("NVIDIA ", ""))
    run.cli("course", "create", "elsewhere")
    run.cli("lab", "add", "elsewhere", "vector-scale", "--gpu-model", "B300")
    for course in ("routing", "elsewhere"):
        run.cli("user", "add", "instructor@example.com", "--role", "instructor", "--course", course)

    def upload(course: str, lab: str) -> int:
        source = KERNELS[lab].read_bytes()
        r = httpx.post(
            f"{run.base}/api/v1/courses/{course}/labs/{lab}/submissions",
            headers=auth, files={"file": (KERNELS[lab].name, source, "text/plain")},
        )  # fmt: skip
        r.raise_for_status()
        return int(r.json()["id"])

    labs = ["matmul-tiled" if i % 4 == 3 else "vector-scale" for i in range(count)]
    ids = [upload("demo", lab) for lab in labs]
    routed, elsewhere = upload("routing", "vector-scale"), upload("elsewhere", "vector-scale")
    say(f"uploaded {len(ids)} submissions to demo ({', '.join(labs)}), one to each routing course")

    def detail(sid: int) -> dict[str, Any]:
        return dict(httpx.get(f"{run.base}/api/v1/submissions/{sid}", headers=auth).json())

    def settled() -> bool:
        states = [detail(sid)["status"] for sid in [*ids, routed]]
        return all(s in ("graded", "compile_error", "error") for s in states)

    wait_for("every grading", settled, 480, every=2)
    say(f"all graded {time.monotonic() - started:.0f} s after the start")
    rows = graded_by(run, [*ids, routed, elsewhere])
    say("submission  lab            status    score      worker           GPU  model / at timing")
    per_gpu: dict[str, list[int]] = {}
    for sid in [*ids, routed, elsewhere]:
        d, row = detail(sid), rows.get(sid, {})
        gpu = row.get("gpu", "-")
        if d["status"] == "graded":
            per_gpu.setdefault(gpu, []).append(sid)
        timing = d.get("gpu") or {}
        score = f"{d['score']:g}/{d['max_score']:g}" if d["score"] is not None else "-"
        say(
            f"{sid:>10}  {d['lab']:<13}  {d['status']:<8}  {score:<9}  {row.get('worker', '-'):<15}"
            f"  {gpu:>3}  {d.get('gpu_model') or '-'}"
            + (
                f", {timing.get('sm_clock_mhz')} MHz, {timing.get('temperature_c')} C"
                if timing
                else ""
            )
        )
    for gpu, sids in sorted(per_gpu.items()):
        say(f"GPU {gpu} graded submissions {sids}")
    statuses = {sid: detail(sid)["status"] for sid in ids}
    run.check(
        all(s == "graded" for s in statuses.values()), f"every demo submission graded: {statuses}"
    )
    run.check(len(per_gpu) >= 2, "the submissions were spread over at least two GPUs")
    run.check(
        all(detail(sid).get("gpu_model") for sid in ids),
        "each grading records the GPU model its timings belong to",
    )
    run.check(detail(routed)["status"] == "graded", f"a lab timed on {model} is graded here")
    other = detail(elsewhere)
    run.check(
        other["status"] == "compiled" and "B300" in other["status_message"],
        f"a lab timed on B300 GPUs waits, saying so: {other['status_message']!r}",
    )

    # A worker killed outright is restarted by the supervisor, and grading goes on.
    victim = next(w for w in graded_workers(run) if w["gpu"] == live[-1]["gpu"])
    os.kill(victim["pid"], signal.SIGKILL)
    say(f"killed the worker of GPU {victim['gpu']} (pid {victim['pid']})")
    wait_for(
        "its restart",
        lambda: any(
            w["gpu"] == victim["gpu"] and w["pid"] != victim["pid"] for w in graded_workers(run)
        ),
        120,
    )
    more = [upload("demo", "vector-scale") for _ in range(4)]
    wait_for(
        "the next gradings", lambda: all(detail(s)["status"] == "graded" for s in more), 300, 2
    )
    after = graded_by(run, more)
    run.check(
        True, f"restarted; four more graded on GPUs {sorted({r['gpu'] for r in after.values()})}"
    )

    metrics = httpx.get(
        f"{run.base}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    ).text
    shown = [line for line in metrics.splitlines() if line.startswith("kernelgrader_gpu_")]
    say("metrics at timing:\n" + "\n".join(shown))
    run.check(len(shown) >= 2 * len(gpus), "temperature and SM clock at timing for every GPU")
    say("kernelgrader status:\n" + run.cli("status"))
    (run.out / "multi_gpu_result.json").write_text(
        json.dumps(
            {"per_gpu": per_gpu, "failures": run.failures, "rows": rows}, indent=2, default=str
        )
    )
    if workers.poll() is not None:
        run.check(False, f"the supervisor stayed up (it exited with {workers.returncode})")
    say("PASSED" if not run.failures else f"FAILED: {run.failures}")
    return 0 if not run.failures else 1


def graded_workers(run: Run) -> list[dict[str, Any]]:
    """The registry's live rows (host and pid are not in /health)."""
    from app.core.database import session_scope
    from app.jobs.workers import live_workers

    with session_scope() as session:
        return [{"name": w.name, "pid": w.pid, "gpu": w.gpu} for w in live_workers(session)]


def graded_by(run: Run, ids: list[int]) -> dict[int, dict[str, Any]]:
    """Which worker, and so which GPU, took each submission's newest job."""
    from sqlalchemy import select

    from app.core.database import session_scope
    from app.jobs.models import Worker
    from app.submissions.models import GradingJob

    found: dict[int, dict[str, Any]] = {}
    with session_scope() as session:
        gpus = {w.name: w.gpu for w in session.scalars(select(Worker))}
        jobs = session.scalars(
            select(GradingJob).where(GradingJob.submission_id.in_(ids)).order_by(GradingJob.id)
        )
        for job in jobs:
            found[job.submission_id] = {
                "worker": job.worker_id,
                "gpu": gpus.get(job.worker_id or "", "-"),
                "state": job.state,
                "gpu_model_needed": job.gpu_model,
                "run_seconds": job.run_seconds,
            }
    return found


if __name__ == "__main__":
    sys.exit(main())
