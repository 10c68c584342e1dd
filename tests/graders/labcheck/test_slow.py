"""Correct-but-slow kernels: their headers, and judging a profile against them."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.labcheck import check_lab
from graders.labcheck.slow import (
    SlowExpectation,
    SlowHeaderError,
    ladder_problem,
    profile_problem,
    read_slow_header,
    slow_files,
)
from graders.spec import builtin_labs_dir, list_builtin_labs

BODY = 'extern "C" __global__ void k(float* x)\n{\n    x[threadIdx.x * 32] = 1.0f;\n}\n'


def _write(tmp_path: Path, header: str, body: str = BODY) -> Path:
    path = tmp_path / "slow" / "k.cu"
    path.parent.mkdir(exist_ok=True)
    path.write_text(header + body, encoding="utf-8")
    return path


def test_a_header_names_the_finding_its_line_and_why(tmp_path: Path) -> None:
    header = "// expect-profile: uncoalesced_global\n// expect-line: 6\n// why: strided\n"
    exp = read_slow_header(_write(tmp_path, header))
    assert (exp.finding, exp.line, exp.why) == ("uncoalesced_global", 6, "strided")
    assert exp.label == "slow/k.cu" and exp.describe() == "uncoalesced_global at line 6"


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("// expect-line: 6\n// why: w\n", "has no expect-profile line"),
        ("// expect-profile: slow\n// expect-line: 6\n// why: w\n", "'slow' is not a finding"),
        ("// expect-profile: divergence\n// expect-line: six\n// why: w\n", "line number"),
        ("// expect-profile: divergence\n// expect-line: 99\n// why: w\n", "not a line with code"),
        ("// expect-profile: divergence\n// expect-line: 6\n// why: w\n", "not a line with code"),
        ("// expect-profile: divergence\n// expect-verdict: pass\n", "unknown header key"),
        ("// expect-profile: divergence\n// expect-profile: stall\n", "appears twice"),
    ],
)
def test_a_malformed_header_is_refused_with_a_sentence(
    tmp_path: Path, header: str, message: str
) -> None:
    body = BODY.replace("{\n", "{\n\n")  # line 6 (after a header of 3 lines) is empty
    with pytest.raises(SlowHeaderError, match=message):
        read_slow_header(_write(tmp_path, header, body))


def test_the_finding_must_be_on_its_line() -> None:
    exp = SlowExpectation(Path("slow/k.cu"), "bank_conflicts", 26, "unpadded")
    assert profile_problem(exp, [("bank_conflicts", 26), ("stall", 26)]) is None
    assert profile_problem(exp, [("bank_conflicts", 25)]) == (
        "the profile finds bank_conflicts at line 25, not at line 26"
    )
    assert profile_problem(exp, [("throughput", None)]) == (
        "the profile does not find bank_conflicts (it finds throughput)"
    )


def test_a_reference_may_show_only_what_the_ladder_expects() -> None:
    assert ladder_problem(("uncoalesced_global",), ["uncoalesced_global"]) is None
    assert ladder_problem((), []) is None
    assert ladder_problem((), ["bank_conflicts"]) == (
        "shows bank_conflicts, which [profile.expect] does not list"
    )
    assert ladder_problem(("global_atomics",), []) == (
        "does not show global_atomics, which [profile.expect] lists"
    )


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_builtin_slow_kernels_have_well_formed_headers(lab_id: str) -> None:
    for path in slow_files(builtin_labs_dir() / lab_id):
        exp = read_slow_header(path)
        assert len(exp.why) > 40, f"{exp.label}: say the lesson in a sentence"


def test_the_lessons_of_the_issue_each_have_a_slow_kernel() -> None:
    found = {
        (lab, read_slow_header(p).finding)
        for lab in list_builtin_labs()
        for p in slow_files(builtin_labs_dir() / lab)
    }
    assert found >= {
        ("matrix-transpose", "uncoalesced_global"),
        ("matrix-transpose", "bank_conflicts"),
        ("array-sum", "divergence"),
        ("histogram", "global_atomics"),
        ("softmax", "uncoalesced_global"),
        ("matmul-tiled", "uncoalesced_global"),
    }


def test_lab_check_without_a_gpu_compiles_the_slow_kernels() -> None:
    report = check_lab(builtin_labs_dir() / "matrix-transpose", run=False)
    assert report.ok, report.lines()
    slow = [i for i in report.items if i.subject.startswith("slow/")]
    assert [i.subject for i in slow] == ["slow/column_reads.cu", "slow/unpadded_tile.cu"]
    assert all("expects the profiler to find" in i.message for i in slow)


def test_lab_check_fails_a_slow_kernel_with_a_broken_header(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "matrix-transpose"
    shutil.copytree(builtin_labs_dir() / "matrix-transpose", folder)
    (folder / "slow" / "column_reads.cu").write_text("// expect-line: 3\n" + BODY)
    report = check_lab(folder, run=False)
    assert not report.ok
    assert any(i.subject == "slow/column_reads.cu" and i.status == "fail" for i in report.items)
