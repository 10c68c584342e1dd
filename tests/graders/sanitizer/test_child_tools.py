"""The sanitizer child gives a job only to the tools the cubin needs, without a GPU.

compute-sanitizer is replaced by a stand-in program (KERNELGRADER_COMPUTE_SANITIZER) that takes
the tool's arguments, says its program is ready, reads the job from the FIFO and, instead of
running the program, writes what the program would have read into the result: for the native
launcher, the launcher's own `--describe` of the bytes. Everything else is real: the cubins
(NVRTC), the decision, the jobs, the FIFOs, the tools' processes and how the child collects them.
"""

from __future__ import annotations

import base64
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graders.sanitizer import child, launcher
from tests.graders.sanitizer.test_launcher import (
    CASE,
    LAB,
    TILED_SOURCE,
    built,
    cache_root,
    cubin_of,
)

__all__ = ["built", "cache_root"]  # fixtures, used below

PLAIN_MATMUL = """
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < M && c < K) {
        float acc = 0.0f;
        for (int i = 0; i < N; ++i) acc += A[r * N + i] * B[i * K + c];
        C[r * K + c] = acc;
    }
}
"""

STAND_IN = """#!{python}
import json, pathlib, subprocess, sys
args, tool = sys.argv[1:], None
while args[0].startswith("--"):
    if args[0] == "--tool":
        tool = args[1]
    args = args[2:]
if args[1] == "-m":  # the Python program: python -m graders.sanitizer.target ...
    args = [args[0], *args[3:]]
program, fifo, ready, result, held = args[:5]
pathlib.Path(ready).touch()
with open(fifo, "rb") as f:
    data = f.read()
if not data:
    sys.exit(0)
pathlib.Path(held).touch()
if program.endswith("kg-sanitizer-launcher"):
    saved = pathlib.Path(result + ".job")
    saved.write_bytes(data)
    done = subprocess.run([program, "--describe", str(saved)], capture_output=True, text=True)
    read = json.loads(done.stdout)
else:
    read = json.loads(data)
pathlib.Path(result).write_text(json.dumps(
    {{"verdict": "ok", "read": read, "tool": tool, "cpu_s": 5.0}}))
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    program = tmp_path / "compute-sanitizer"
    program.write_text(STAND_IN.format(python=sys.executable))
    program.chmod(0o755)
    monkeypatch.setenv("KERNELGRADER_COMPUTE_SANITIZER", str(program))
    monkeypatch.setenv("KERNELGRADER_LOCK_DIR", str(tmp_path / "lock"))
    monkeypatch.setenv("KERNELGRADER_GPU_KEY", "GPU-test")
    folder = tmp_path / "child"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setattr(child, "_TOOLS", [])
    yield folder


def _payload(cubin: bytes) -> dict[str, Any]:
    job = {
        "lab_folder": str(LAB.folder),
        "cubin_b64": base64.b64encode(cubin).decode("ascii"),
        "declarations": {},
        "case": CASE,
        "seed": 7,
        "timeout_s": 20,
    }
    return {"job": job, "timeout_s": 30}


@pytest.mark.parametrize("warm", [True, False], ids=["spare", "cold"])
def test_a_kernel_without_shared_memory_or_barriers_gets_memcheck_alone(
    stand_in: Path, warm: bool
) -> None:
    if warm:
        child.warm_up()  # a spare starts all three before it knows the kernel
        assert [t.name for t in child._TOOLS] == ["memcheck", "racecheck", "synccheck"]
    answer = child.run_in_child(_payload(cubin_of(PLAIN_MATMUL)))
    assert answer["needed"] == {"memcheck": "always"}
    tools = answer["tools"]
    assert tools["memcheck"]["status"] == "ok"
    assert tools["memcheck"]["target"]["read"]["case"] == CASE  # the Python program's job
    if warm:
        assert tools["racecheck"]["status"] == tools["synccheck"]["status"] == "not_needed"
    else:  # a cold child starts only what it needs
        assert set(tools) == {"memcheck"}
    assert answer["findings"] == []


def test_a_tiled_kernel_gets_every_tool_each_with_its_own_layout(
    stand_in: Path, built: Path
) -> None:
    # The child's own copy of the launcher, as a GPU child's seed gives it.
    seed = stand_in / launcher.SEED
    seed.mkdir()
    shutil.copy2(built, seed / launcher.NAME)
    child.warm_up()
    answer = child.run_in_child(_payload(cubin_of(TILED_SOURCE)))
    assert list(answer["needed"]) == ["memcheck", "racecheck", "synccheck"]
    layouts = set()
    for name, tool in answer["tools"].items():
        assert tool["status"] == "ok" and tool["native"], (name, tool)
        read = tool["target"]["read"]
        assert read["kernels"] == ["matmul"] and len(read["buffers"]) == 3
        layouts.add(tuple(b["spacer"] for b in read["buffers"]))
        # The stand-in's usage does not hold the 5 s its "program" said: they are added.
        assert tool["cpu_s"] >= 5.0
    assert len(layouts) == 3


def test_a_kernel_with_shared_memory_and_no_barrier_gets_racecheck_not_synccheck(
    stand_in: Path,
) -> None:
    source = PLAIN_MATMUL.replace(
        "float acc = 0.0f;", "__shared__ float t[32]; t[threadIdx.x] = 1.0f; float acc = t[0];"
    )
    child.warm_up()
    answer = child.run_in_child(_payload(cubin_of(source)))
    assert list(answer["needed"]) == ["memcheck", "racecheck"]
    statuses = {name: tool["status"] for name, tool in answer["tools"].items()}
    assert statuses == {"memcheck": "ok", "racecheck": "ok", "synccheck": "not_needed"}
