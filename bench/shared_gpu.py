"""Every lab's references and faulty kernels, graded by several services at once on one GPU.

Starts `--services` copies of `kernelgrader serve` (each on a data folder of its own: two courses
on one host, or several worker containers, look the same to the GPU) and has each upload every
built-in lab's reference kernels and known-faulty kernels at once. Printed: how many gradings,
how long they took, every correct kernel that was not graded as passing (an out-of-memory or a
launch error under the others' load was the failure this bench was written for), and every
faulty kernel whose verdict is not the one its header expects.

    python bench/shared_gpu.py --services 6 [--labs matmul-tiled,softmax] [--split] [--json F]

`--split` deals the files out among the services in turn instead (every file graded once, by
one of the services, all at once): the whole set of labs in a few minutes of GPU time.

Needs a GPU host with the web stack installed. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.throughput import (  # noqa: E402
    Service,
    get_json,
    grade_once,
    stop_services_on_sigterm,
)
from graders.compile.compiler import REASONS  # noqa: E402
from graders.spec import list_builtin_labs, load_builtin_lab  # noqa: E402

_EXPECT = re.compile(r"^//\s*expect-verdict:\s*(.+)$", re.MULTILINE)


def _uploads(labs: list[str]) -> list[dict[str, Any]]:
    """(lab, name, source, expected verdicts or None for a correct kernel) for every file."""
    out = []
    for lab_id in labs:
        lab = load_builtin_lab(lab_id)
        for ref in lab.references:
            if ref.file and not ref.builtin:
                out.append({"lab": lab_id, "name": ref.file, "source": ref.source, "expect": None})
        faulty = lab.folder / "faulty"
        for path in sorted(faulty.glob("*.cu")) if faulty.is_dir() else []:
            text = path.read_text(encoding="utf-8")
            m = _EXPECT.search(text)
            expect = {v.strip() for v in m.group(1).split("|")} if m else {"wrong_answer"}
            out.append(
                {"lab": lab_id, "name": f"faulty/{path.name}", "source": text, "expect": expect}
            )
    return out


# Verdicts of the compile stage (the grader's own failure aside): the submission has no cases,
# only its status compile_error.
_COMPILE_VERDICTS = REASONS - {"internal"}


def _breaks_rule(row: dict[str, Any]) -> bool:
    lab = load_builtin_lab(row["lab"])
    return bool(lab.requires) and row["summary"].startswith("This lab requires")


def _as_expected(row: dict[str, Any]) -> bool:
    """Whether a faulty kernel got a verdict its header expects."""
    if row["status"] == "compile_error":
        return bool(row["expect"] & _COMPILE_VERDICTS)
    return bool(set(row["verdicts"]) & row["expect"])


def _grade_all(service: Service, uploads: list[dict[str, Any]], timeout: float) -> list[dict]:
    with httpx.Client(
        base_url=service.base,
        headers={"Authorization": f"Bearer {service.token()}"},
        timeout=60.0,
    ) as client:
        service.wait_healthy(client)

        def one(u: dict[str, Any]) -> dict[str, Any]:
            # Polled every half second: hundreds of threads polling six web processes every
            # 50 ms overloaded them (connections reset, H100, 6 services x 15 uploads).
            row = grade_once(client, u["lab"], u["source"].encode(), timeout, poll_s=0.5)
            detail = get_json(client, f"/api/v1/submissions/{row['id']}")
            row["verdicts"] = [c.get("verdict") for c in detail.get("cases", [])]
            row["messages"] = [c.get("message", "") for c in detail.get("cases", [])]
            return {**u, **row}

        with ThreadPoolExecutor(max_workers=max(1, len(uploads))) as pool:
            return list(pool.map(one, uploads))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", type=int, default=6)
    parser.add_argument("--labs", default="", help="comma-separated; default: every built-in lab")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--split", action="store_true", help="each file to one service, dealt in turn"
    )
    parser.add_argument("--logs", type=Path, default=None, help="a folder for each serve's log")
    args = parser.parse_args()
    stop_services_on_sigterm()
    labs = [s for s in args.labs.split(",") if s] or list(list_builtin_labs())
    uploads = _uploads(labs)
    services = []
    for i in range(args.services):
        folder = Path(tempfile.mkdtemp(prefix=f"kernelgrader-shared{i}-"))
        logs = args.logs or folder
        logs.mkdir(parents=True, exist_ok=True)
        services.append(Service(folder, logs / f"serve{i}.log", {}))
    began = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=len(services)) as pool:
            shares = [
                uploads[i :: len(services)] if args.split else uploads for i in range(len(services))
            ]
            per_service = list(
                pool.map(lambda s, u: _grade_all(s, u, args.timeout), services, shares)
            )
    finally:
        for s in services:
            s.stop()
    rows = [r for rows in per_service for r in rows]
    took = time.monotonic() - began
    correct = [r for r in rows if r["expect"] is None]
    faulty = [r for r in rows if r["expect"] is not None]
    # A lab's rule for submissions that its naive baseline rightly breaks (`requires`): that
    # reference is refused at compile time, as it should be.
    refused = [r for r in correct if r["status"] == "compile_error" and _breaks_rule(r)]
    bad_correct = [
        r
        for r in correct
        if r not in refused
        and (r["status"] != "graded" or r["failed_cases"] or "pending" in (r["summary"] or ""))
    ]
    bad_faulty = [r for r in faulty if not _as_expected(r)]
    memory_words = ("out of memory", "more memory than the GPU has")
    oom = [r for r in bad_correct if any(w in " ".join(r["messages"]) for w in memory_words)]
    gpu = rows[0]["gpu"] if rows else "?"
    p50 = statistics.median(r["graded_s"] for r in rows) if rows else float("nan")
    each = f"{len(uploads)} files dealt out" if args.split else f"{len(uploads)} files each"
    print(f"== {len(services)} services, {each}, on {gpu}")
    print(f"   {len(rows)} gradings in {took:.0f} s; upload -> graded p50 {p50:.1f} s")
    print(
        f"   correct kernels not passing: {len(bad_correct)} (out of memory: {len(oom)}, "
        f"launch errors: {sum('launch_error' in r['verdicts'] for r in bad_correct)})"
    )
    for r in bad_correct[:10]:
        print(f"     {r['lab']}/{r['name']}: {r['status']} {r['verdicts']} {r['summary'][:200]}")
    if refused:
        names = ", ".join(f"{r['lab']}/{r['name']}" for r in refused)
        print(f"   references refused by their lab's rule for submissions, as they should: {names}")
    print(f"   faulty kernels without their expected verdict: {len(bad_faulty)}")
    for r in bad_faulty[:10]:
        print(f"     {r['lab']}/{r['name']}: expected {sorted(r['expect'])}, got {r['verdicts']}")
    if args.json:
        for r in rows:
            r["expect"] = sorted(r["expect"]) if r["expect"] is not None else None
        args.json.write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
