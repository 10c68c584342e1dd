"""Small real Nsight Compute reports of the built-in labs' slow kernels and references, for the
CPU tests (tests/graders/profile/data/samples) and for checking the labs' expectations.

On a GPU host with ncu (NumPy, CuPy and NVIDIA's ncu-report, or the copy beside ncu):

    python bench/ncu_samples.py --out samples [--labs matrix-transpose,histogram]

For every lab with slow/ kernels or a [profile.expect] table (or those named): each file
reference, and each slow kernel, profiled alone on the lab's profiled case, exactly as the
profiling stage profiles a submission. Writes, per program, `<lab>/<role>-<name>.ncu-rep.xz`
(the report, xz-compressed: a few hundred kilobytes each) and an `index.json` saying what each
is and what the lab expects of it; prints one line per program: the findings on their lines,
and whether they are what the slow kernel's header, or the lab's ladder, expects. Copy the
folder to tests/graders/profile/data/samples; tests/graders/profile/test_samples.py reads it.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from graders.labcheck.slow import ladder_problem, profile_problem, read_slow_header, slow_files
    from graders.profile import tool
    from graders.profile.findings import PATTERN_KINDS, findings_of
    from graders.profile.stage import profile_submission
    from graders.run.inputs import case_seed
    from graders.spec import builtin_labs_dir, list_builtin_labs, load_builtin_lab

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--labs",
        default="",
        help="comma-separated lab ids (default: those with slow/ or [profile.expect])",
    )
    parser.add_argument("--secret", default="kernelgrader-ncu-samples")
    args = parser.parse_args()
    reason = tool.unavailable_reason()
    if reason:
        print(reason)
        return 2
    wanted = [x for x in args.labs.split(",") if x] or [
        lab
        for lab in list_builtin_labs()
        if slow_files(builtin_labs_dir() / lab) or load_builtin_lab(lab).profile.expect
    ]
    index: list[dict[str, Any]] = []
    failures = 0
    for lab_id in wanted:
        lab = load_builtin_lab(lab_id)
        case = lab.profile_case
        seed = case_seed(lab.id, case.name, hidden=case.hidden, secret=args.secret)
        programs: list[tuple[str, str, str, str, Any]] = []  # role, name, file, source, lab
        for ref in lab.references:
            if ref.file:
                programs.append(("reference", ref.name, ref.file, ref.source, lab.for_references()))
        for path in slow_files(lab.folder):
            programs.append(("slow", path.stem, path.name, path.read_text(encoding="utf-8"), lab))
        for role, name, filename, source, spec in programs:
            began = time.monotonic()
            result = profile_submission(spec, source, seed=seed, filename=filename)
            entry: dict[str, Any] = {
                "lab": lab_id,
                "role": role,
                "name": name,
                "file": filename,
                "case": case.name,
                "status": result.status,
                "message": result.message,
                "seconds": round(time.monotonic() - began, 2),
                "ncu": result.ncu_version,
                "gpu": result.gpu,
            }
            run = result.submission
            if result.status == "ok" and run is not None and run.report is not None:
                out = args.out / lab_id / f"{role}-{name}.ncu-rep.xz"
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(lzma.compress(run.report, preset=9))
                entry["report"] = str(out.relative_to(args.out))
                found = findings_of(run.summary)
                entry["findings"] = [[f.kind, f.line] for f in found]
                if role == "slow":
                    exp = read_slow_header(lab.folder / "slow" / filename)
                    entry["expect"] = [exp.finding, exp.line]
                    problem = profile_problem(exp, [(f.kind, f.line) for f in found])
                else:
                    entry["expect"] = list(lab.profile.expect.get(name, ()))
                    kinds = sorted({f.kind for f in found if f.kind in PATTERN_KINDS})
                    problem = ladder_problem(lab.profile.expect.get(name, ()), kinds)
                entry["problem"] = problem or ""
            else:
                entry["problem"] = f"not profiled: {result.message}"
            failures += bool(entry["problem"])
            index.append(entry)
            mark = "FAIL" if entry["problem"] else "ok"
            shown = ", ".join(f"{k}@{ln}" if ln else k for k, ln in entry.get("findings", []))
            print(
                f"{mark:<4} {lab_id} {role} {filename}: {entry['seconds']:.1f} s; {shown}"
                + (f"; {entry['problem']}" if entry["problem"] else ""),
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    total = sum((args.out / e["report"]).stat().st_size for e in index if "report" in e)
    print(f"{len(index)} programs, {failures} not as expected; {total / 1e6:.1f} MB of reports")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
