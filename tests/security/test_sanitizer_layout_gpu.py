"""compute-sanitizer's run cannot be told apart from grading by where the arrays lie, and a
kernel's printed text is never read as a tool's finding.

Kernels: tests/security/kernels/sanitizer_layout_probe.cu (and printf_fake_synccheck.cu, graded
by the generic run-stage test with the sanitizer on).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from graders.compile.compiler import compile_submission
from graders.grade import run_submission
from graders.run.inputs import case_seed
from graders.run.layout import TAIL_GUARD_BYTES
from graders.sanitizer.launcher import ensure_built
from tests.security.hostile import KERNELS_DIR
from tests.security.lab_copies import lab_copy

SECRET = "layout-tests"
ROUNDS = 5
_LAYOUT = re.compile(r"layout ab=(-?\d+) bc=(-?\d+)")


def _distances(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in _LAYOUT.findall(text)]


@pytest.mark.gpu
def test_arrays_lie_alike_in_the_graded_run_and_under_the_sanitizer(tmp_path: Path) -> None:
    from graders.gpu import lock_dir
    from graders.sandbox.limits import SandboxLimits
    from graders.sandbox.runner import run_sandboxed

    lab = lab_copy(
        "matmul-tiled",
        tmp_path,
        cases=[{"name": "rect-63x65x70", "sizes": {"M": 63, "N": 65, "K": 70}}],
        settings={"sanitizer": "true"},
    )
    source = (KERNELS_DIR / "sanitizer_layout_probe.cu").read_text(encoding="utf-8")
    compiled = compile_submission(lab, source, line_info=True)
    assert compiled.ok, compiled.message
    seed = case_seed(lab.id, "rect-63x65x70", hidden=False, secret=SECRET)
    # The tools' program is the native launcher wherever one could be built (graders.sanitizer.
    # launcher): its buffers must lie as the graded run's do.
    native = ensure_built().path is not None
    graded: list[tuple[int, int]] = []
    sanitized: list[tuple[int, int]] = []
    for _ in range(ROUNDS):
        report = run_submission(lab, source, compiled=compiled, secret=SECRET, timing=False)
        assert all(c.passed for c in report.cases), [c.message for c in report.cases]
        assert not [f for f in report.findings if f.tool == "memcheck"], report.findings
        graded += _distances(report.stdout)
        job = {
            "lab_folder": str(lab.folder),
            "cubin_b64": base64.b64encode(compiled.cubin or b"").decode("ascii"),
            "declarations": compiled.declarations,
            "case": "rect-63x65x70",
            "seed": seed,
            "timeout_s": 20,
        }
        payload = {"job": job, "timeout_s": 60, "lock_dir": str(lock_dir()), "keep_output": True}
        outcome = run_sandboxed(
            "graders.sanitizer.child:run_in_child",
            payload,
            limits=SandboxLimits(
                wall_seconds=180,
                cpu_seconds=900,
                memory_mb=8192,
                max_processes=512,
                max_open_files=256,
            ),
            gpu=True,
        )
        assert outcome.ok and outcome.value, outcome.log
        for tool in outcome.value["tools"].values():
            assert tool["native"] is native, tool
            sanitized += _distances(tool.get("printed", ""))
    print("graded", graded, "sanitized", sanitized)
    assert len(graded) >= ROUNDS and len(sanitized) >= ROUNDS
    # Both are drawn afresh each time, and from the same spread: no value tells the runs apart.
    assert len(set(graded)) > 1 and len(set(sanitized)) > 1
    ab_graded = [ab for ab, _ in graded]
    ab_sanitized = [ab for ab, _ in sanitized]
    assert min(ab_graded) < max(ab_sanitized) and min(ab_sanitized) < max(ab_graded)
    # Every distance leaves room for the guard (graded) or the tools' padding (sanitizer).
    a_bytes = 63 * 65 * 4
    assert all(abs(ab) >= TAIL_GUARD_BYTES for ab in ab_graded + ab_sanitized if ab > a_bytes)


@pytest.mark.gpu
def test_a_kernels_print_shaped_like_a_report_is_not_a_finding(tmp_path: Path) -> None:
    lab = lab_copy(
        "matmul-tiled",
        tmp_path,
        cases=[{"name": "rect-63x65x70", "sizes": {"M": 63, "N": 65, "K": 70}}],
        settings={"sanitizer": "true"},
    )
    source = (KERNELS_DIR / "printf_fake_synccheck.cu").read_text(encoding="utf-8")
    compiled = compile_submission(lab, source, line_info=True)
    report = run_submission(lab, source, compiled=compiled, secret=SECRET, timing=False)
    assert all(c.passed for c in report.cases), [(c.verdict, c.message) for c in report.cases]
    assert not [f for f in report.findings if f.tool == "synccheck"], report.findings
    assert "Barrier error detected" in report.stdout  # the student's print is shown as printed
