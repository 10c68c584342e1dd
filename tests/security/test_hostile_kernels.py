"""Hostile submissions get the verdict their header names, leak nothing, and harm no one after.

Compile-stage kernels run everywhere (NVRTC needs no GPU); run-stage kernels need a GPU. Each
is followed by a correct submission to the same lab, which must still grade normally.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from graders.spec import list_builtin_labs, load_builtin_lab
from tests.security.hostile import HostileKernel, all_kernels, leaked_host_text, small_lab

KERNELS = all_kernels()
COMPILE_STAGE = [k for k in KERNELS if k.stage == "compile"]
RUN_STAGE = [k for k in KERNELS if k.stage == "run" and not k.dedicated]
COMPILE_REASONS = {
    "ok",
    "compile_error",
    "missing_kernel",
    "bad_declaration",
    "forbidden_include",
    "timeout",
    "resource_limit",
}
CASE_VERDICTS = {
    "pass",
    "memory_error",
    "data_race",
    "divergent_barrier",
    "wrong_answer",
    "no_output",
    "out_of_bounds_write",
    "input_modified",
    "timeout",
    "output_limit",
    "kernel_error",
    "launch_error",
}
# Bombs are stopped by the compile limits; a short limit keeps the suite quick.
COMPILE_LIMIT_S = 8.0
SECRET = "security-tests"


def test_the_collection_is_complete_and_every_header_is_well_formed() -> None:
    assert len(KERNELS) >= 20
    labs = set(list_builtin_labs())
    for kernel in KERNELS:
        assert kernel.lab in labs, f"{kernel.name}: unknown lab {kernel.lab!r}"
        assert kernel.stage in ("compile", "run"), kernel.name
        allowed = COMPILE_REASONS if kernel.stage == "compile" else CASE_VERDICTS
        assert kernel.verdicts and set(kernel.verdicts) <= allowed, kernel.name
        assert kernel.why, f"{kernel.name}: say what it tries in a `why:` line"
        if kernel.dedicated:
            test = Path(__file__).resolve().parents[2] / kernel.dedicated
            assert test.is_file(), f"{kernel.name}: its test {kernel.dedicated} is missing"
            assert kernel.path.name in test.read_text(encoding="utf-8"), kernel.name


def _reference_source(lab_id: str) -> str:
    """A correct submission: the lab's target reference where it scores against one (a tiled
    lab's naive baseline breaks the lab's `requires` and would not compile as a submission)."""
    lab = load_builtin_lab(lab_id)
    if lab.scoring.target:
        return lab.reference(lab.scoring.target).source
    return next(ref.source for ref in lab.references if ref.source)


@pytest.mark.parametrize("kernel", COMPILE_STAGE, ids=lambda k: k.name)
def test_compile_stage_defence(kernel: HostileKernel) -> None:
    from graders.compile.compiler import compile_submission

    lab = load_builtin_lab(kernel.lab)
    lab = dataclasses.replace(
        lab, limits=dataclasses.replace(lab.limits, compile_seconds=COMPILE_LIMIT_S)
    )
    result = compile_submission(lab, kernel.source, arch="sm_90", timeout_s=COMPILE_LIMIT_S)
    shown = f"{result.message}\n{result.log}\n{result.to_dict()}"
    assert not leaked_host_text(shown), f"host file text reached the student: {shown[:800]}"
    if kernel.verdicts == ("ok",):  # a legitimate file that once was refused or misread
        assert result.ok, (result.reason, result.message, result.log[:800])
        said = "\n".join([result.message, *result.warnings])
        assert kernel.message.lower() in said.lower(), said
        for name, value in kernel.declarations.items():
            assert result.declarations[name] == value, result.declarations
        return
    assert not result.ok, f"{kernel.name} compiled: {result.message}"
    assert result.reason in kernel.verdicts, (result.reason, result.message, result.log[:500])
    assert kernel.message.lower() in f"{result.message}\n{result.log}".lower(), result.message
    assert result.message.strip().endswith((".", "!", "?")), "the message must be a sentence"
    assert not leaked_host_text(shown), f"host file text reached the student: {shown[:800]}"
    assert result.cubin is None

    # The next, correct submission to the same lab compiles as usual.
    after = compile_submission(lab, _reference_source(kernel.lab), arch="sm_90")
    assert after.ok, (after.message, after.log)
    assert after.cubin


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", RUN_STAGE, ids=lambda k: k.name)
def test_run_stage_defence(kernel: HostileKernel, tmp_path: Path) -> None:
    from graders.grade import grade_source

    lab = small_lab(
        kernel.lab, tmp_path, case_seconds=kernel.case_seconds, sanitizer=kernel.sanitizer
    )
    assert lab.limits.case_seconds == kernel.case_seconds
    report = grade_source(
        lab, kernel.source, secret=SECRET, timing=kernel.timing, sanitizer=kernel.sanitizer
    )
    verdicts = [c.verdict for c in report.cases]
    print(f"{kernel.name}: {verdicts} score {report.score}/{report.max_score} {report.summary}")
    if kernel.verdicts == ("pass",):
        assert all(c.passed for c in report.cases), [(c.name, c.message) for c in report.cases]
    else:
        hits = [c for c in report.cases if c.verdict in kernel.verdicts]
        assert hits, [(c.name, c.verdict, c.message) for c in report.cases]
        assert report.score < report.max_score
        assert any(kernel.message.lower() in c.message.lower() for c in hits), [
            c.message for c in hits
        ]
        assert all(c.message for c in hits)
    # Whatever the submission did, the run side gave verdicts, never "the grader failed".
    assert report.error in ("", "gpu_unhealthy"), report.summary
    assert not leaked_host_text(report.stdout)
    assert "Traceback" not in report.stdout and "site-packages" not in report.stdout
    assert kernel.stdout in report.stdout, report.stdout[-1000:]
    assert len(report.stdout) < 256 * 1024, "the kernel's output must be capped"
    if "output_limit" in verdicts and not {"timeout", "kernel_error"} & set(verdicts):
        # Stopped for printing: the student's file, not the GPU. No health check, no alarm.
        assert "[grader] GPU health" not in report.stdout, report.stdout[-2000:]
        assert report.error == "" and "not healthy" not in report.summary, report.summary
    if kernel.health_check and {"timeout", "kernel_error"} & set(verdicts):
        # After a kernel was killed or crashed, the worker checked the GPU before going on.
        assert "[grader] GPU health" in report.stdout, report.stdout[-2000:]
        assert report.error != "gpu_unhealthy", report.summary

    # The next, correct submission grades normally: every case passes.
    after = grade_source(lab, _reference_source(kernel.lab), secret=SECRET, timing=False)
    assert all(c.passed for c in after.cases), [(c.name, c.message) for c in after.cases]
    assert after.score == pytest.approx(after.correctness_points)
    assert not after.error
