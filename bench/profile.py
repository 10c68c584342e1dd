"""What profiling costs, through the real service: the profile's own time per submission, and
upload -> graded with profiling off and on.

Starts `kernelgrader serve` twice on fresh data folders (the embedded default, its local
worker on this host's GPU): once with KERNELGRADER_PROFILE_AFTER_GRADING=false, once as
shipped. Each run uploads the lab's scoring-target reference N times, a few seconds apart
(profiles run in the gaps, as between real students' uploads), then a burst of M at once, and
waits for every profile. Printed: upload -> graded p50/p95 for both runs (sequential and
burst), each profile's own seconds (the first also profiles the lab's references), how long
after grading each profile was done, and the top findings of the lab's slow kernels.

    python bench/profile.py [--lab matrix-transpose] [--n 6] [--gap 8] [--burst 6] [--json OUT]

Needs a GPU host with ncu and the web stack (see bench/throughput.py). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from throughput import Service, _pct, grade_once  # noqa: E402

FINAL_PROFILE = ("done", "unavailable", "failed", "withheld")


def wait_profile(client: httpx.Client, sid: int, timeout: float) -> dict[str, Any]:
    began = time.time()
    body: dict[str, Any] = {}
    while time.time() - began < timeout:
        body = client.get(f"/api/v1/submissions/{sid}/profile").json()
        if body.get("state") in FINAL_PROFILE:
            break
        time.sleep(0.5)
    body["waited_s"] = time.time() - began
    return body


def run(
    lab: str, source: bytes, slow: list[tuple[str, bytes]], args: argparse.Namespace, *, on: bool
) -> dict[str, Any]:
    env = dict(e.split("=", 1) for e in args.env)
    env["KERNELGRADER_PROFILE_AFTER_GRADING"] = "true" if on else "false"
    data_dir = Path(tempfile.mkdtemp(prefix="kernelgrader-profile-bench-"))
    service = Service(data_dir, data_dir / "serve.log", env)
    try:
        headers = {"Authorization": f"Bearer {service.token()}"}
        with httpx.Client(base_url=service.base, headers=headers, timeout=60.0) as client:
            service.wait_healthy(client)
            seq = []
            for i in range(args.n):
                seq.append(grade_once(client, lab, source, args.timeout))
                if i + 1 < args.n:
                    time.sleep(args.gap)
            with ThreadPoolExecutor(max_workers=max(1, args.burst)) as pool:
                burst = list(
                    pool.map(lambda _: grade_once(client, lab, source, args.timeout),
                             range(args.burst))
                )  # fmt: skip
            slow_rows = [(name, grade_once(client, lab, body, args.timeout)) for name, body in slow]
            profiles: list[dict[str, Any]] = []
            if on:
                for row in seq + burst + [r for _, r in slow_rows]:
                    done = wait_profile(client, row["id"], args.timeout)
                    done["graded_at"] = row["finished_at"]
                    profiles.append(done)
            findings = {}
            for name, row in slow_rows:
                body = client.get(f"/api/v1/submissions/{row['id']}/profile").json()
                findings[name] = [
                    f"{f['kind']}@{f['line']}" for f in body.get("findings", [])[:3]
                ] or [body.get("state", ""), body.get("message", "")]
    finally:
        service.stop()
    return {
        "profiling": on,
        "sequential_graded_p50": _pct([r["graded_s"] for r in seq], 0.5),
        "sequential_graded_p95": _pct([r["graded_s"] for r in seq], 0.95),
        "burst_graded_p50": _pct([r["graded_s"] for r in burst], 0.5),
        "burst_graded_p95": _pct([r["graded_s"] for r in burst], 0.95),
        "profiles": profiles,
        "slow_findings": findings,
        "gpu": next((r["gpu"] for r in seq if r["gpu"]), None),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lab", default="matrix-transpose")
    parser.add_argument("--n", type=int, default=6, help="sequential uploads per run")
    parser.add_argument("--gap", type=float, default=8.0, help="seconds between them")
    parser.add_argument("--burst", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for serve")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from graders.labcheck.slow import slow_files
    from graders.spec import load_builtin_lab

    spec = load_builtin_lab(args.lab)
    target = spec.reference(spec.scoring.target) if spec.scoring.target else None
    ref = (
        target if target is not None and target.file else next(r for r in spec.references if r.file)
    )
    slow = [(p.name, p.read_bytes()) for p in slow_files(spec.folder)]
    off = run(args.lab, ref.source.encode(), slow, args, on=False)
    on = run(args.lab, ref.source.encode(), slow, args, on=True)
    print(f"\n== {args.lab} ({ref.file}) on {on['gpu']}")
    for label, key in (
        ("sequential upload->graded p50", "sequential_graded_p50"),
        ("sequential upload->graded p95", "sequential_graded_p95"),
        ("burst upload->graded p50", "burst_graded_p50"),
        ("burst upload->graded p95", "burst_graded_p95"),
    ):
        print(f"   {label}: without profiling {off[key]:.2f} s, with {on[key]:.2f} s")
    done = [p for p in on["profiles"] if p.get("state") == "done"]
    states: dict[str, int] = {}
    for p in on["profiles"]:
        states[p.get("state", "?")] = states.get(p.get("state", "?"), 0) + 1
    print(f"   profiles: {states}")
    if done:
        first, rest = done[0], done[1:]
        print(f"   first profile (with the references): {first.get('seconds', 0):.2f} s")
        costs = [p.get("seconds") or 0.0 for p in rest]
        if costs:
            print(
                f"   profiling cost per submission: p50 {_pct(costs, 0.5):.2f} s, "
                f"max {max(costs):.2f} s (ncu {first.get('ncu_version')})"
            )
        lags = [
            datetime.fromisoformat(p["finished_at"].replace("Z", "+00:00")).timestamp()
            - p["graded_at"]
            for p in done
            if p.get("finished_at")
        ]
        if lags:
            print(
                f"   profile done after graded: p50 {_pct(lags, 0.5):.1f} s, max {max(lags):.1f} s"
            )
    for p in on["profiles"]:
        if p.get("state") != "done":
            print(f"   not profiled: {p.get('state')}: {p.get('message')}")
    for name, found in on["slow_findings"].items():
        print(f"   slow/{name}: {', '.join(str(f) for f in found)}")
    if args.json:
        args.json.write_text(json.dumps({"off": off, "on": on}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
