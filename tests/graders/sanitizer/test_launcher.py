"""The sanitizer's native launcher without a GPU: it builds with a C compiler alone, reads the
jobs graders.sanitizer.job writes as they were meant (its `--describe`), and those jobs lay the
case out from the graded run's own plan."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graders.run.buffers import allocation_plan, sentinel_bits
from graders.run.layout import TAIL_GUARD_BYTES, Layout
from graders.sanitizer import job, launcher
from graders.spec import load_builtin_lab
from tests.ci import skip_unless_ci

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
LAB = load_builtin_lab("matmul-tiled")
CASE = "rect-63x65x70"
TILED_SOURCE = LAB.reference(LAB.scoring.target).source


def _fnv(data: bytes) -> str:
    h = 1469598103934665603
    for byte in data:
        h = ((h ^ byte) * 1099511628211) & (2**64 - 1)
    return f"{h:016x}"


def cubin_of(source: str, arch: str = "sm_90", options: tuple[str, ...] = ()) -> bytes:
    program = nvrtc.createProgram(source, "submission.cu", [], [])
    try:
        nvrtc.compileProgram(program, [f"--gpu-architecture={arch}", *options])
        return bytes(nvrtc.getCUBIN(program))
    finally:
        nvrtc.destroyProgram(program)


@pytest.fixture
def cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "cache"
    monkeypatch.setenv("KERNELGRADER_KERNEL_CACHE_DIR", str(root))
    monkeypatch.delenv(launcher.GIVEN_ENV, raising=False)
    monkeypatch.setattr(launcher, "_STATE", None)
    yield root


@pytest.fixture
def built(cache_root: Path) -> Path:
    if launcher.compiler() is None:
        skip_unless_ci("no C compiler (cc, gcc or clang) here to build the launcher with")
    state = launcher.ensure_built()
    assert state.path is not None, state.why_not
    return state.path


def describe(binary: Path, data: bytes, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "job.bin"
    path.write_bytes(data)
    done = subprocess.run(
        [str(binary), "--describe", str(path)], capture_output=True, text=True, timeout=30
    )
    return dict(json.loads(done.stdout))


def test_the_launcher_is_built_once_with_the_c_compiler_alone(
    built: Path, cache_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert built.is_file() and built.parent.parent == cache_root.resolve()
    assert built.stat().st_mode & 0o111
    assert launcher._STATE is not None and launcher._STATE.built_now
    monkeypatch.setattr(launcher, "_STATE", None)  # a later worker finds it built
    again = launcher.ensure_built()
    assert again.path == built and not again.built_now


def test_without_a_compiler_the_tools_keep_the_python_program(
    cache_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELGRADER_CC", "no-such-compiler-here")
    state = launcher.ensure_built()
    assert state.path is None
    assert "no C compiler" in state.why_not


def test_a_folder_others_may_write_is_not_used(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built.parent.chmod(0o777)
    monkeypatch.setattr(launcher, "_STATE", None)
    state = launcher.ensure_built()
    assert state.path is None and "other users may write" in state.why_not


def test_a_launcher_built_ahead_is_used_where_the_image_names_it(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ahead = tmp_path / "image" / launcher.NAME
    ahead.parent.mkdir(mode=0o755)
    shutil.copy2(built, ahead)
    monkeypatch.setenv(launcher.GIVEN_ENV, str(ahead))
    monkeypatch.setattr(launcher, "_STATE", None)
    assert launcher.ensure_built().path == ahead


def test_the_job_lays_the_case_out_from_the_graded_runs_plan(built: Path, tmp_path: Path) -> None:
    cubin = cubin_of(TILED_SOURCE)
    data = job.case_data(LAB, CASE, 424242, {})
    blob = job.encode(
        LAB, data, cubin, timeout_s=20, printf_bytes=1 << 20, layout=Layout(random.Random(7))
    )
    seen = describe(built, blob, tmp_path)
    assert seen["timeout_ms"] == 20000 and seen["printf_fifo"] == 1 << 20
    assert seen["cubin_bytes"] == len(cubin) and seen["cubin_digest"] == _fnv(cubin)
    assert seen["kernels"] == list(LAB.kernels)
    # The same draws give the graded run's order and spacers (its spacers carry a guard's worth
    # more, its arrays their guards: the tools' padding stands there under the sanitizer).
    plan = allocation_plan(LAB, data.names, guards=False, layout=Layout(random.Random(7)))
    graded = allocation_plan(LAB, data.names, guards=True, layout=Layout(random.Random(7)))
    assert [s.param.name for s in plan] == [s.param.name for s in graded]
    assert [s.spacer + TAIL_GUARD_BYTES for s in plan] == [s.spacer for s in graded]
    assert [b["spacer"] for b in seen["buffers"]] == [s.spacer for s in plan]
    assert [b["bytes"] for b in seen["buffers"]] == [s.nbytes for s in plan]
    for slot, buffer in zip(plan, seen["buffers"], strict=True):
        if slot.param.name in data.data:
            assert buffer["fill"] == job.FILL_DATA
            assert buffer["digest"] == _fnv(data.data[slot.param.name].tobytes())
        else:  # the output: the never-written marker, one element repeated
            assert slot.param.kind == "out" and buffer["fill"] == job.FILL_PATTERN
            marker = np.array(sentinel_bits(slot.dtype), dtype=f"u{slot.dtype.itemsize}")
            assert buffer["digest"] == _fnv(marker.tobytes())
    (launch,) = seen["launches"]
    order = [s.param.name for s in plan]
    arrays = [p.name for p in LAB.params if p.is_array]
    assert [order[a["buffer"]] for a in launch["args"][: len(arrays)]] == arrays
    sizes = {k: int(v) for k, v in data.names.items() if k in ("M", "N", "K")}
    assert sizes == {"M": 63, "N": 65, "K": 70}
    assert launch["block"] == [32, 32, 1]  # T x T, the lab's T where none is declared
    assert launch["grid"] == [3, 2, 1]  # whole tiles over C's 70 columns and 63 rows
    scalars = [int.from_bytes(bytes.fromhex(a["value"]), "little") for a in launch["args"][3:]]
    assert scalars == [sizes["M"], sizes["N"], sizes["K"]]


def test_each_tools_job_draws_a_layout_of_its_own(built: Path, tmp_path: Path) -> None:
    cubin = cubin_of(TILED_SOURCE)
    data = job.case_data(LAB, CASE, 1, {})
    layouts = set()
    for _ in range(3):
        seen = describe(built, job.encode(LAB, data, cubin, timeout_s=5, printf_bytes=0), tmp_path)
        layouts.add(tuple(b["spacer"] for b in seen["buffers"]))
        assert all(b["spacer"] % 512 == 0 and b["spacer"] > 0 for b in seen["buffers"])
    assert len(layouts) == 3


def test_a_job_cut_short_is_refused(built: Path, tmp_path: Path) -> None:
    cubin = cubin_of(TILED_SOURCE)
    blob = job.encode(LAB, job.case_data(LAB, CASE, 1, {}), cubin, timeout_s=5, printf_bytes=0)
    assert describe(built, blob[:-8], tmp_path) == {"error": "not a job"}
    assert describe(built, b"KGJOB002" + blob[8:], tmp_path) == {"error": "not a job"}
