"""What the sanitizer's findings do to its case and the score (no GPU)."""

from __future__ import annotations

from graders.results import CaseResult, Finding
from graders.sanitizer import verdicts

RACE = Finding("racecheck", "shared_memory_race", "Shared-memory race between line 21 ...", 21)
BARRIER = Finding("synccheck", "divergent_barrier", "Barrier in divergent code at line 9.", 9)
OOB = Finding("memcheck", "out_of_bounds", "Out-of-bounds read of global memory at line 7.", 7)
CLEAN = {t: {"status": "ok", "target": {"verdict": "ok"}} for t in ("memcheck", "racecheck")}


def _case() -> CaseResult:
    return CaseResult("rect-63x65x70", {"M": 63}, False, True, "pass", "ok", 10.0, 10.0)


def test_a_clean_run_changes_nothing() -> None:
    ruling = verdicts.rule([], CLEAN, hazard_points=None, timeout_s=45)
    case = _case()
    verdicts.apply(case, ruling)
    assert case.passed and case.verdict == "pass" and ruling.penalty == 0


def test_a_memcheck_error_fails_the_case_with_its_line() -> None:
    ruling = verdicts.rule([OOB, OOB], CLEAN, hazard_points=5, timeout_s=45)
    case = _case()
    verdicts.apply(case, ruling)
    assert not case.passed and case.points == 0 and case.verdict == "memory_error"
    assert "line 7" in case.message and "1 more" in case.message


def test_a_race_fails_the_case_by_default_or_costs_the_labs_points() -> None:
    default = verdicts.rule([RACE], CLEAN, hazard_points=None, timeout_s=45)
    assert default.verdict == "data_race" and "line 21" in default.message
    barrier = verdicts.rule([BARRIER], CLEAN, hazard_points=None, timeout_s=45)
    assert barrier.verdict == "divergent_barrier"
    priced = verdicts.rule([RACE, BARRIER], CLEAN, hazard_points=4, timeout_s=45)
    assert priced.verdict == "" and priced.penalty == 4


def test_a_hang_or_a_crash_under_the_sanitizer_is_a_verdict() -> None:
    hung = {**CLEAN, "synccheck": {"status": "timeout", "target": {}}}
    ruling = verdicts.rule([], hung, hazard_points=None, timeout_s=45)
    assert ruling.verdict == "timeout" and "45 s" in ruling.message
    crashed = {
        **CLEAN,
        "memcheck": {"status": "ok", "target": {"verdict": "kernel_error", "message": "A trap."}},
    }
    ruling = verdicts.rule([], crashed, hazard_points=None, timeout_s=45)
    assert ruling.verdict == "kernel_error" and "A trap." in ruling.message
    # The target's own limit on the launch can end the hang before the tool's does: still a
    # hang under the sanitizer, not a crash (the H100 run of sanitizer_only_hang.cu).
    waited = {
        **CLEAN,
        "racecheck": {"status": "ok", "target": {"verdict": "timeout", "message": "Killed."}},
    }
    ruling = verdicts.rule([], waited, hazard_points=None, timeout_s=45)
    assert ruling.verdict == "timeout" and "under compute-sanitizer" in ruling.message.lower()


def test_a_tool_that_never_got_the_job_is_not_the_students_fault() -> None:
    tools = {"memcheck": {"status": "not_started", "target": {}}}
    assert verdicts.rule([], tools, hazard_points=None, timeout_s=45).verdict == ""


def test_the_lab_page_sentence_states_the_rule() -> None:
    assert "fails that case too" in verdicts.policy_sentence("square-64", None)
    assert "costs 3 points" in verdicts.policy_sentence("square-64", 3)
