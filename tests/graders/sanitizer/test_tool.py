"""Parsing compute-sanitizer reports into findings a student can read (no GPU needed)."""

from __future__ import annotations

from graders.sanitizer import tool as sanitizer

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at scale+0x90 in /tmp/kg/submission.cu:7
=========     by thread (8,0,0) in block (0,0,0)
=========     Address 0x7f0000000404 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f0000000000 of size 1028 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at scale+0x90 in /tmp/kg/submission.cu:7
=========     by thread (9,0,0) in block (0,0,0)
=========     Address 0x7f0000000408 is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure"
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 3 errors
"""

RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at matmul+0x2a0 in submission.cu:21
=========     and Read access at matmul+0x3b0 in submission.cu:26 [4096 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

HAZARDS = """========= COMPUTE-SANITIZER
========= Error: Potential WAR hazard detected at __shared__ 0x1280 in block (1,0,0) :
=========     Read Thread (5,3,0) at matmul+0x340 in submission.cu:25
=========     Write Thread (5,7,0) at matmul+0x300 in submission.cu:21
=========     Current Value : 32, Incoming Value : 232
=========
========= Warning: (Warp Level Programming) Potential WAR hazard detected at __shared__ 0x1284 :
=========     Read Thread (31,29,0) at matmul+0x340 in submission.cu:25
=========     Write Thread (1,29,0) at matmul+0x300 in submission.cu:21
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 errors, 1 warnings)
"""

SYNCCHECK = """========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at matmul+0x1f0 in submission.cu:18
=========     by thread (0,31,0) in block (31,31,0)
=========
========= ERROR SUMMARY: 1 error
"""


def test_memcheck_out_of_bounds_write_with_line_and_count() -> None:
    found = sanitizer.parse_output(MEMCHECK, tool="memcheck")
    assert len(found) == 1
    f = found[0]
    assert f.kind == "out_of_bounds" and f.line == 7 and f.count == 2
    assert "Out-of-bounds write of global memory at line 7" in f.message


def test_racecheck_shared_memory_race_names_both_lines() -> None:
    found = sanitizer.parse_output(RACECHECK, tool="racecheck")
    assert [f.kind for f in found] == ["shared_memory_race"]
    assert found[0].line == 21
    assert "line 21 (write) and line 26 (read)" in found[0].message


def test_racecheck_hazard_report_is_one_finding_per_line() -> None:
    found = sanitizer.parse_output(HAZARDS, tool="racecheck")
    assert len(found) == 1
    f = found[0]
    assert f.kind == "shared_memory_race" and f.line == 25 and f.count == 2
    assert "line 25 (read) and line 21 (write)" in f.message


def test_synccheck_divergent_barrier() -> None:
    found = sanitizer.parse_output(SYNCCHECK, tool="synccheck")
    assert [f.kind for f in found] == ["divergent_barrier"]
    assert found[0].line == 18 and "barrier problem" in found[0].message


def test_clean_reports_have_no_findings() -> None:
    clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    for tool in sanitizer.TOOLS:
        assert sanitizer.parse_output(clean, tool=tool) == []
