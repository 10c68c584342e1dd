"""The profiling stage on a GPU host with Nsight Compute: findings on the right lines, the
references beside them, in bounded time, and nothing of ncu left running.

Needs `ncu` (the CUDA toolkit's) and NVIDIA's ncu-report reader (or the copy beside ncu); the
lab checks of every built-in lab (tests/graders/gpu/test_lab_check_gpu.py) also profile every
slow kernel and reference through the same code.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from graders.labcheck.slow import read_slow_header, slow_files
from graders.profile import tool
from graders.profile.findings import PATTERN_KINDS, findings_of
from graders.profile.ladder import figures_of, ladder
from graders.profile.stage import ProfileResult, profile_submission
from graders.run.inputs import case_seed
from graders.spec import builtin_labs_dir, list_builtin_labs, load_builtin_lab
from tests.conftest import command_lines_with

SECRET = "kernelgrader-test-secret"
SLOW = [(lab, p) for lab in list_builtin_labs() for p in slow_files(builtin_labs_dir() / lab)]


def _seed(lab_id: str) -> int:
    lab = load_builtin_lab(lab_id)
    case = lab.profile_case
    return case_seed(lab.id, case.name, hidden=case.hidden, secret=SECRET)


def _profilers_running() -> list[str]:
    """Command lines of profiled programs still alive (ncu's target, anywhere on the host)."""
    return command_lines_with("graders.profile.target")


@pytest.fixture(autouse=True)
def _needs_ncu() -> None:
    reason = tool.unavailable_reason()
    if reason:
        if os.environ.get("KERNELGRADER_REQUIRE_NCU") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.mark.gpu
@pytest.mark.parametrize(("lab_id", "path"), SLOW, ids=[f"{a}/{p.name}" for a, p in SLOW])
def test_each_slow_kernel_gets_its_finding_on_its_line(lab_id: str, path: Path) -> None:
    lab = load_builtin_lab(lab_id)
    exp = read_slow_header(path)
    result = profile_submission(
        lab, path.read_text(encoding="utf-8"), seed=_seed(lab_id), filename=path.name
    )
    assert result.status == "ok", (result.message, result.log)
    assert result.submission is not None and result.submission.report
    found = findings_of(result.submission.summary)
    assert (exp.finding, exp.line) in [(f.kind, f.line) for f in found], [
        (f.kind, f.line, f.sentence) for f in found
    ]
    print(f"{lab_id}/{path.name}: profiled in {result.seconds:.1f} s with ncu {result.ncu_version}")


@pytest.mark.gpu
def test_a_submission_is_profiled_beside_the_labs_references() -> None:
    lab = load_builtin_lab("matrix-transpose")
    path = builtin_labs_dir() / "matrix-transpose" / "slow" / "unpadded_tile.cu"
    result = profile_submission(
        lab,
        path.read_text(encoding="utf-8"),
        seed=_seed(lab.id),
        filename=path.name,
        references=["naive", "tiled"],
    )
    assert result.status == "ok", (result.message, result.log)
    assert result.submission is not None
    assert set(result.references) == {"naive", "tiled"}
    assert result.gpu and result.ncu_version
    naive = {f.kind for f in findings_of(result.references["naive"].summary)}
    tiled = {f.kind for f in findings_of(result.references["tiled"].summary)}
    assert "uncoalesced_global" in naive
    assert not tiled & set(PATTERN_KINDS)
    steps = ladder(
        figures_of(result.submission.summary),
        {k: figures_of(v.summary) for k, v in result.references.items()},
    )
    assert steps.order == ["naive", "tiled"]
    assert steps.resembles == "tiled"
    assert any("shared-memory turns per access" in d for d in steps.differences)
    # Only the submission's own report file comes back, for download.
    assert result.submission.report is not None
    assert all(r.report is None for r in result.references.values())
    assert not _profilers_running()


SPINNER = r"""
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    // Correct, and about a second per launch: under ncu's replays far past the limit.
    const long long until = clock64() + 2000000000LL;
    while (clock64() < until) {
    }
    const int c = blockIdx.x * 32 + threadIdx.x;
    const int r0 = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) {
        if (r0 + j < rows && c < cols) {
            out[c * rows + r0 + j] = in[(r0 + j) * cols + c];
        }
    }
}
"""


@pytest.mark.gpu
def test_profiling_stops_at_its_limit_and_leaves_nothing_running() -> None:
    lab = load_builtin_lab("matrix-transpose")
    result = profile_submission(
        lab, SPINNER, seed=_seed(lab.id), filename="spinner.cu", timeout_s=5.0
    )
    assert result.status == "failed"
    assert "time limit" in result.message or "did not finish" in result.message, result.message
    assert result.seconds < 600
    assert not _profilers_running()


@pytest.mark.gpu
def test_a_profile_lets_go_of_the_gpu_when_a_timed_section_waits() -> None:
    import threading

    from graders.gpu import gpu_lock
    from graders.profile.tool import YIELDED, YIELDED_MESSAGE
    from graders.timing.lock import flocked

    lab = load_builtin_lab("matrix-transpose")
    events: list[str] = []
    results: list[object] = []

    def profile() -> None:
        results.append(
            profile_submission(
                lab,
                SPINNER,
                seed=_seed(lab.id),
                filename="spinner.cu",
                timeout_s=300.0,
                yield_to_timing=True,
            )
        )
        events.append("profile returned")

    thread = threading.Thread(target=profile)
    thread.start()
    lock = gpu_lock()
    for _ in range(1200):  # the profiled program holds the lock shared (at most two minutes)
        if _profilers_running() and flocked(lock.path("lock")):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the profiled program never took the GPU's lock")
    with lock.exclusive():
        events.append("timing held")
    thread.join(timeout=600)
    assert not thread.is_alive()
    result = results[0]
    assert isinstance(result, ProfileResult)
    assert result.status == YIELDED and result.message == YIELDED_MESSAGE, result.log
    # The timed section had the GPU before the profile's spinning launches could end (each
    # takes a second, and ncu replays them tens of times).
    assert events == ["timing held", "profile returned"]
    assert not _profilers_running()
