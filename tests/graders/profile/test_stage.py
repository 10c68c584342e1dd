"""What a profile that did not come tells staff: ncu's own error lines, never the whole log."""

from __future__ import annotations

from graders.labcheck.gpu import _with_tool_said
from graders.profile.stage import ProfileRun, _run_of

NCU_OUTPUT = """==PROF== Connected to process 4242 (/usr/bin/python3)
==WARNING== Launching the workload is taking more time than expected.
a line the kernel printed: ==ERROR== is not at its start
==ERROR== Profiling failed because a driver resource was unavailable.
==PROF== Disconnected from process 4242
==WARNING== No kernels were profiled.
"""


def test_a_run_keeps_the_end_of_ncus_output_from_the_child() -> None:
    run = _run_of({"name": "tiled", "status": "no_report", "output_tail": NCU_OUTPUT})
    assert run.tool_output == NCU_OUTPUT
    assert _run_of({"name": "tiled", "status": "ok"}).tool_output == ""


def test_tool_said_is_ncus_own_error_and_warning_lines_the_last_few() -> None:
    run = ProfileRun("tiled", "no_report", tool_output=NCU_OUTPUT)
    assert run.tool_said() == (
        "==WARNING== Launching the workload is taking more time than expected. "
        "==ERROR== Profiling failed because a driver resource was unavailable. "
        "==WARNING== No kernels were profiled."
    )
    assert run.tool_said(lines=1) == "==WARNING== No kernels were profiled."
    assert ProfileRun("tiled", "no_report", tool_output="==PROF== done\n").tool_said() == ""


def test_a_lab_checks_failure_adds_what_ncu_said_where_it_said_anything() -> None:
    failed = ProfileRun("tiled", "no_report", tool_output="==ERROR== The GPU is busy.\n")
    message = "Nsight Compute ended without a report (the program it ran ended early)."
    assert _with_tool_said(message, failed) == f"{message} ncu said: ==ERROR== The GPU is busy."
    assert _with_tool_said(message, ProfileRun("tiled", "no_report")) == message
    assert _with_tool_said(message, None) == message
