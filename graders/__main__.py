"""The engine's own command line, for a GPU host without the web service (NumPy and CuPy only).

    python -m graders grade LAB FILE.cu [--sanitizer]   grade one file, print the report
    python -m graders check FOLDER [--no-gpu]           check a lab folder, as `kernelgrader
                                                         lab check` does
    python -m graders profile LAB FILE.cu [--json]      Nsight Compute's findings for one file,
                                                         beside the lab's references
    python -m graders labs                              list the built-in labs
    python -m graders warm-cache                        build the CuPy kernel cache for this
                                                         host's GPUs and the sanitizer's
                                                         launcher (once; workers reuse them)

LAB is a built-in lab id or a lab folder. Hidden cases are drawn with this install's grading
secret (KERNELGRADER_GRADING_SECRET, from the environment or a `.env` file, as the service reads
it: graders.config), so they are the ones a worker draws; `--secret` gives another.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from graders.config import EngineSettings
from graders.results import GradeReport


def _print_report(report: GradeReport) -> None:
    print(f"lab {report.lab}: {report.score:g} / {report.max_score:g} points")
    print(report.summary)
    for case in report.cases:
        mark = "PASS" if case.passed else case.verdict.upper()
        sizes = " ".join(f"{k}={v}" for k, v in case.sizes.items())
        print(f"  [{mark:>18}] {case.name} ({sizes}): {case.message}")
        if case.timing:
            t = case.timing
            print(
                f"      time: median {t.median_ms:.4f} ms, min {t.min_ms:.4f} ms, "
                f"{t.reps} reps, rse {t.rse:.3%}"
            )
            for name, r in case.reference_timings.items():
                print(f"      {name}: median {r.median_ms:.4f} ms ({r.reps} reps)")
    for f in report.findings:
        where = f" line {f.line}" if f.line else ""
        print(f"  finding [{f.tool}] {f.kind}{where}: {f.message}")
    if report.gpu:
        g = report.gpu
        print(
            f"  gpu: {g.name} {g.arch} sm clock {g.sm_clock_mhz}/{g.max_sm_clock_mhz} MHz, "
            f"{g.temperature_c} C"
        )
    print("  stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in report.stage_seconds.items()))
    if report.error:
        print(f"  stopped early: {report.error}")
    if report.stdout.strip():
        print("  output and grader log (tail):")
        print("    " + report.stdout.strip()[-3000:].replace("\n", "\n    "))


def _profile(lab_ref: str, file: Path, *, secret: str, as_json: bool) -> int:
    """Profile one file and the lab's references; print the findings and the ladder."""
    from graders.profile.findings import findings_of, with_estimate
    from graders.profile.ladder import figures_of, ladder
    from graders.profile.stage import profile_submission
    from graders.run.inputs import case_seed
    from graders.spec import load_builtin_lab, load_lab

    lab = load_lab(lab_ref) if Path(lab_ref).is_dir() else load_builtin_lab(lab_ref)
    case = lab.profile_case
    result = profile_submission(
        lab,
        file.read_text(encoding="utf-8"),
        seed=case_seed(lab.id, case.name, hidden=case.hidden, secret=secret),
        filename=file.name,
        references=[r.name for r in lab.references if r.file],
    )
    if as_json:
        out = {
            "status": result.status,
            "message": result.message,
            "seconds": result.seconds,
            "ncu": result.ncu_version,
            "submission": result.submission.summary if result.submission else None,
            "references": {k: v.summary for k, v in result.references.items()},
        }
        print(json.dumps(out, indent=2))
        return 0 if result.status == "ok" else 1
    print(f"lab {lab.id}, case {case.name}: {result.status} in {result.seconds:.1f} s")
    if result.message:
        print(result.message)
    if result.submission is None or not result.submission.ok:
        return 1
    for finding in findings_of(result.submission.summary):
        print(f"  [{finding.kind}] {with_estimate(finding)}")
    refs = {k: figures_of(v.summary) for k, v in result.references.items()}
    if refs:
        steps = ladder(figures_of(result.submission.summary), refs)
        for row in steps.rows:
            print("  " + row.phrase(steps.order))
        print("  " + " ".join([steps.sentence, *steps.differences]))
    return 0


def _check(
    folder: Path,
    *,
    run: bool,
    arch: str | None,
    secret: str,
    profile: bool = True,
    engine: EngineSettings,
) -> int:
    """`lab check` without the service: one line per check, exit status 1 when one fails."""
    from graders.labcheck import CheckItem, check_lab

    if not folder.is_dir():
        print(f"{folder} is not a folder; give the lab's folder, the one holding lab.toml.")
        return 2

    def show(item: CheckItem) -> None:
        print(f"  {item.status:<4}  {item.subject}: {item.message}", flush=True)

    print(f"Checking the lab folder {folder}:")
    report = check_lab(
        folder, run=run, secret=secret, arch=arch, progress=show, profile=profile, engine=engine
    )
    print(report.summary())
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="compile and run one .cu file against a lab")
    g.add_argument("lab", help="a built-in lab id or a lab folder")
    g.add_argument("file", type=Path)
    # The grading secret of this install, as a worker draws hidden cases with it (one for all three
    # commands: before, `grade` used the cookie-signing key, and its hidden cases were not the
    # worker's).
    engine = EngineSettings.from_environment()
    g.add_argument("--secret", default=engine.grading_secret)
    g.add_argument("--sanitizer", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--json", action="store_true", help="print the report as JSON")
    c = sub.add_parser("check", help="check a lab folder before students meet it")
    c.add_argument("folder", type=Path, help="the lab folder (holding lab.toml)")
    c.add_argument("--no-gpu", action="store_true", help="only the checks that need no GPU")
    c.add_argument(
        "--no-profile", action="store_true", help="on a GPU, skip the Nsight Compute checks"
    )
    c.add_argument("--arch", default=None, help="compile for this sm_XX")
    c.add_argument("--secret", default=engine.grading_secret)
    p = sub.add_parser("profile", help="Nsight Compute's findings for one .cu file")
    p.add_argument("lab", help="a built-in lab id or a lab folder")
    p.add_argument("file", type=Path)
    p.add_argument("--secret", default=engine.grading_secret)
    p.add_argument("--json", action="store_true", help="print the summaries as JSON")
    sub.add_parser("labs", help="list the built-in labs")
    sub.add_parser(
        "warm-cache",
        help="build the CuPy kernel cache for this host's GPUs and the sanitizer's launcher",
    )
    args = parser.parse_args(argv)
    if args.command == "warm-cache":
        import logging

        from graders.gpu import gpu_unavailable_reason
        from graders.run.kernel_cache import warm_cache
        from graders.sanitizer.launcher import ensure_built

        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        status = warm_cache()
        if gpu_unavailable_reason() is None:  # the sanitizer's launcher, beside the cache
            built = ensure_built()
            if built.path is None:
                print(f"The sanitizer's tools will run its Python program: {built.why_not}")
            else:
                state = "built" if built.built_now else "there"
                print(f"The sanitizer's launcher is {state}: {built.path}")
        return status

    from graders.spec import list_builtin_labs, load_builtin_lab, load_lab

    if args.command == "labs":
        print("\n".join(list_builtin_labs()))
        return 0
    if args.command == "check":
        return _check(
            args.folder,
            run=not args.no_gpu,
            arch=args.arch,
            secret=args.secret,
            profile=not args.no_profile,
            engine=engine,
        )
    if args.command == "profile":
        return _profile(args.lab, args.file, secret=args.secret, as_json=args.json)
    from graders.grade import grade_source

    lab = load_lab(args.lab) if Path(args.lab).is_dir() else load_builtin_lab(args.lab)
    source = args.file.read_text(encoding="utf-8")
    report = grade_source(lab, source, secret=args.secret, sanitizer=args.sanitizer, engine=engine)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _print_report(report)
    return 0 if all(c.passed for c in report.cases) else 1


if __name__ == "__main__":
    sys.exit(main())
