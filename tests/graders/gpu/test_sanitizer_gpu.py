"""compute-sanitizer on the GPU through the native launcher: the tools the cubin needs, no finding
on a correct kernel, and memcheck's padding naming a write just past an array."""

from __future__ import annotations

import pytest

from graders.compile.compiler import compile_submission
from graders.run.budget import GpuBudget
from graders.run.inputs import case_seeds
from graders.sanitizer import launcher, stage
from graders.sanitizer.tool import TOOLS, unavailable_reason
from graders.spec import load_builtin_lab

SECRET = "sanitizer-gpu-tests"

# matmul-naive's reference, with one write 256 bytes (64 floats) past C by the last thread.
WRITE_PAST_THE_END = """    C[row * K + col] = sum;
    if (row == M - 1 && col == K - 1) {
        C[M * K + 63] = sum;
    }
"""


def _tools(lab_id: str, source: str) -> dict[str, object]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    lab = load_builtin_lab(lab_id)
    compiled = compile_submission(lab, source, line_info=True)
    assert compiled.ok, compiled.message
    ran = stage.run_tools(lab, compiled, case_seeds(lab, SECRET), GpuBudget(120.0))
    assert ran.outcome.ok and ran.outcome.value is not None, ran.outcome.log
    print(ran.outcome.value.get("needed"), ran.outcome.value.get("tools"))
    return ran.outcome.value


@pytest.mark.gpu
def test_the_tiled_reference_runs_every_tool_through_the_launcher_and_is_clean() -> None:
    lab = load_builtin_lab("matmul-tiled")
    value = _tools("matmul-tiled", lab.reference(lab.scoring.target).source)
    assert list(value["needed"]) == list(TOOLS)
    native = launcher.ensure_built().path is not None
    for name, tool in value["tools"].items():
        assert tool["status"] == "ok", (name, tool)
        assert tool["target"]["verdict"] == "ok", (name, tool)
        assert tool["native"] is native, (name, tool)
    assert value["findings"] == []


@pytest.mark.gpu
def test_a_kernel_without_shared_memory_or_barriers_runs_memcheck_alone() -> None:
    lab = load_builtin_lab("matmul-naive")
    value = _tools("matmul-naive", lab.reference("naive").source)
    assert list(value["needed"]) == ["memcheck"]
    tools = value["tools"]
    assert tools["memcheck"]["status"] == "ok" and tools["memcheck"]["target"]["verdict"] == "ok"
    assert all(tools.get(t, {}).get("status", "not_needed") == "not_needed" for t in TOOLS[1:])


@pytest.mark.gpu
def test_memchecks_padding_names_a_write_just_past_an_array() -> None:
    naive = load_builtin_lab("matmul-naive").reference("naive").source
    source = naive.replace("    C[row * K + col] = sum;\n", WRITE_PAST_THE_END)
    assert source != naive
    line = source.splitlines().index("        C[M * K + 63] = sum;") + 1
    value = _tools("matmul-naive", source)
    found = [f for f in value["findings"] if f["tool"] == "memcheck"]
    assert found and found[0]["kind"] == "out_of_bounds", value["findings"]
    assert found[0]["line"] == line, (found, line)
