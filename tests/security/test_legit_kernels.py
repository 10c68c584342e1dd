"""Unusual but valid CUDA is never refused or misread (issue 34): the grader asks the compiler.

The kernels in tests/security/kernels/legit/ are written as careful students and library
authors write CUDA; each was refused or misread by the grader's own reading of the source. Their
headers are hostile.py's, plus `expect-warnings: N` (the grader's own static warnings). Without
a GPU each compiles through the worker's entry (NVRTC in the sandbox) with the declared values
and the number of warnings its header names; on a GPU each passes every case of its lab, and the
barrier kernels pass compute-sanitizer's synccheck and racecheck too (what the static check
leaves to them). A long file of comments in six languages (case 6) compiles with its stages
timed in the worker's log.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from graders.compile.compiler import compile_submission
from graders.spec import load_builtin_lab
from tests.graders.compile.hostile_sources import multilingual_comments
from tests.security.hostile import KERNELS_DIR, HostileKernel, load, small_lab

LEGIT = [load(p) for p in sorted((KERNELS_DIR / "legit").glob("*.cu"))]
SECRET = "legit-kernels"
# The file of issue 34's case 6 was 239 KB.
LONG_FILE_BYTES = 240_000


def _expected_warnings(kernel: HostileKernel) -> int:
    found = re.search(r"^// expect-warnings: (\d+)$", kernel.source, re.M)
    assert found, f"{kernel.name}: say how many warnings it gets in an `expect-warnings:` line"
    return int(found.group(1))


def test_the_collection_holds_every_case_of_the_issue() -> None:
    names = {k.name for k in LEGIT}
    assert names >= {
        "tile_by_platform_macro",  # 1
        "two_constants_one_declaration",  # 2
        "nv_diagnostic_push_pop",  # 3
        "include_in_raw_string",  # 4
        "syncwarp_masked_half_warp",  # 5
        "syncthreads_or_loop",  # 5
    }
    for kernel in LEGIT:
        assert kernel.stage == "run" and kernel.verdicts == ("pass",), kernel.name
        assert kernel.why and kernel.lab, kernel.name
        _expected_warnings(kernel)


@pytest.mark.parametrize("kernel", LEGIT, ids=lambda k: k.name)
def test_it_compiles_as_the_compiler_reads_it(kernel: HostileKernel) -> None:
    lab = load_builtin_lab(kernel.lab)
    result = compile_submission(lab, kernel.source, arch="sm_90")
    assert result.ok, (result.reason, result.message, result.log[:800])
    declared = {name: result.declarations.get(name) for name in kernel.declarations}
    assert declared == kernel.declarations, result.declarations
    assert len(result.warnings) == _expected_warnings(kernel), result.warnings


def test_a_long_file_of_comments_in_six_languages_compiles_and_its_stages_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = multilingual_comments(LONG_FILE_BYTES)
    assert len(source.encode()) > LONG_FILE_BYTES - 200
    lab = load_builtin_lab("matmul-tiled")
    with caplog.at_level(logging.INFO, logger="graders.compile.compiler"):
        result = compile_submission(lab, source, arch="sm_90")
    assert result.ok and result.declarations == {"TILE": 32}, (result.message, result.log[:800])
    assert result.warnings == []
    # The staff's log says where the compile stage's time went, stage by stage.
    (line,) = [r.getMessage() for r in caplog.records if "characters," in r.getMessage()]
    assert line.startswith(f"compile child for lab matmul-tiled: {len(source)} characters, ")
    for stage in ("preprocess", "include_policy", "nvrtc", "static_checks"):
        assert re.search(rf"\b{stage} \d+\.\d{{3}} s\b", line), line


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", LEGIT, ids=lambda k: k.name)
def test_it_passes_every_case_on_a_gpu(kernel: HostileKernel) -> None:
    from graders.grade import grade_source

    lab = load_builtin_lab(kernel.lab)
    report = grade_source(lab, kernel.source, secret=SECRET, timing=False, sanitizer=False)
    assert not report.error, report.summary
    assert report.cases and all(c.passed for c in report.cases), [
        (c.name, c.verdict, c.message) for c in report.cases
    ]


BARRIER_KERNELS = [
    k for k in LEGIT if k.name in ("syncwarp_masked_half_warp", "syncthreads_or_loop")
]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", BARRIER_KERNELS, ids=lambda k: k.name)
def test_the_barriers_left_to_the_sanitizer_are_right(
    kernel: HostileKernel, tmp_path: Path
) -> None:
    # The static check says nothing of these forms; synccheck and racecheck find nothing.
    from graders.grade import grade_source

    lab = small_lab(kernel.lab, tmp_path, sanitizer=True)
    report = grade_source(lab, kernel.source, secret=SECRET, timing=False, sanitizer=True)
    assert all(c.passed for c in report.cases), [(c.name, c.message) for c in report.cases]
    found = [
        (f.tool, f.kind, f.message)
        for f in report.findings
        if f.kind in ("divergent_barrier", "shared_memory_race", "out_of_bounds")
    ]
    assert found == []


@pytest.mark.gpu
def test_the_long_file_passes_every_case_on_a_gpu() -> None:
    from graders.grade import grade_source

    lab = load_builtin_lab("matmul-tiled")
    source = multilingual_comments(LONG_FILE_BYTES)
    report = grade_source(lab, source, secret=SECRET, timing=False, sanitizer=False)
    assert not report.error and all(c.passed for c in report.cases), report.summary
    print(f"long file: stage seconds {report.stage_seconds}")
