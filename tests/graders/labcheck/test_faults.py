"""Judging a faulty kernel's outcome against its header: a faulty kernel that passes fails the
lab check, as do the wrong verdict, the wrong case and a missing finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.labcheck.faults import (
    FaultExpectation,
    FaultHeaderError,
    Outcome,
    compile_problem,
    read_fault_header,
    run_problem,
)

PATH = Path("faulty/x.cu")


def _run(*cases: tuple[str, bool, str, str], findings: tuple[str, ...] = ()) -> Outcome:
    return Outcome(compile_reason="", compile_text="", cases=cases, findings=findings)


def test_a_faulty_kernel_that_passes_every_case_is_not_caught() -> None:
    exp = FaultExpectation(PATH, "wrong_answer", fail_case="n-1048579", why="drops the tail")
    problem = run_problem(exp, _run(("n-1", True, "pass", ""), ("n-1048579", True, "pass", "")))
    assert problem is not None
    assert problem.startswith(
        "every case passed; its header expects wrong_answer on case n-1048579"
    )
    assert "the lab does not catch it" in problem


def test_the_expected_case_and_verdict() -> None:
    exp = FaultExpectation(PATH, "wrong_answer", fail_case="big", pass_case="small", why="w")
    right = _run(("small", True, "pass", ""), ("big", False, "wrong_answer", "3 of 9 wrong"))
    assert run_problem(exp, right) is None
    passed = _run(("small", False, "wrong_answer", "x"), ("big", True, "pass", ""))
    assert run_problem(exp, passed) == "case big passed; its header expects wrong_answer there"
    other = _run(("small", True, "pass", ""), ("big", False, "out_of_bounds_write", "past C"))
    assert run_problem(exp, other) == "case big got out_of_bounds_write, not wrong_answer: past C"
    small_fails = _run(("small", False, "wrong_answer", "m"), ("big", False, "wrong_answer", "m"))
    assert run_problem(exp, small_fails) == "case small must pass but got wrong_answer: m"


def test_message_and_finding() -> None:
    exp = FaultExpectation(PATH, "no_output", message="never written", why="w")
    assert run_problem(exp, _run(("a", False, "no_output", "3 were never written"))) is None
    assert "contains 'never written'" in (
        run_problem(exp, _run(("a", False, "no_output", "x"))) or ""
    )
    race = FaultExpectation(PATH, "wrong_answer", finding="shared_memory_race", why="w")
    found = _run(("a", False, "wrong_answer", ""), findings=("shared_memory_race",))
    assert run_problem(race, found) is None
    missing = _run(("a", False, "wrong_answer", ""), findings=("out_of_bounds",))
    assert run_problem(race, missing) == (
        "the finding shared_memory_race was not reported (found: out_of_bounds)"
    )
    # Racecheck's finding fails the sanitizer's case with data_race; the other cases ran right.
    ruled = _run(
        ("small", False, "data_race", "racecheck"), ("big", True, "pass", ""),
        findings=("shared_memory_race",),
    )  # fmt: skip
    assert run_problem(race, ruled) is None
    other = _run(("small", False, "memory_error", "m"), findings=("shared_memory_race",))
    assert run_problem(race, other) == (
        "cases failed otherwise than with wrong_answer (small: memory_error)"
    )


def test_compile_stage_expectations() -> None:
    exp = FaultExpectation(PATH, "bad_declaration", message="32", why="w")
    assert compile_problem(exp, Outcome("bad_declaration", "from 4 to 32")) is None
    assert compile_problem(exp, Outcome("", "")) == (
        "it compiled, but its header expects the compile stage to stop with bad_declaration"
    )
    other = compile_problem(exp, Outcome("compile_error", "The compiler reported 1 error"))
    assert other == (
        "the compile stage stopped with compile_error, not bad_declaration: "
        "The compiler reported 1 error"
    )
    runs = FaultExpectation(PATH, "wrong_answer", finding="divergent_barrier", why="w")
    assert compile_problem(runs, Outcome("", "", warnings=("Line 9: __syncthreads() ...",))) is None
    assert "barrier warning" in (compile_problem(runs, Outcome("", "")) or "")


def test_a_race_may_pass_every_case_if_the_sanitizer_finds_it() -> None:
    race = FaultExpectation(PATH, "wrong_answer", finding="shared_memory_race", why="w")
    lucky = _run(("a", True, "pass", ""), findings=("shared_memory_race",))
    assert run_problem(race, lucky) is None
    unseen = _run(("a", True, "pass", ""))
    assert run_problem(race, unseen) == (
        "the finding shared_memory_race was not reported (found: none)"
    )


def test_a_header_may_expect_the_sanitizers_own_verdict(tmp_path: Path) -> None:
    faulty = tmp_path / "racy.cu"
    faulty.write_text(
        "// expect-verdict: data_race\n// expect-fail-case: small\n// why: no barrier\n"
        'extern "C" __global__ void k() {}\n'
    )
    exp = read_fault_header(faulty, {"small", "big"}, sanitizer=True)
    assert exp.verdict == "data_race" and exp.needs_sanitizer
    ruled = _run(("small", False, "data_race", "racecheck"), ("big", True, "pass", ""))
    assert run_problem(exp, ruled) is None
    with pytest.raises(FaultHeaderError, match="does not run"):
        read_fault_header(faulty, {"small", "big"}, sanitizer=False)
