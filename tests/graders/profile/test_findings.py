"""Findings in sentences, on lines, ranked: from the real report's summaries."""

from __future__ import annotations

from typing import Any

from graders.profile.findings import (
    PATTERN_KINDS,
    estimate_phrase,
    findings_of,
    kinds_at_lines,
    with_estimate,
)
from tests.graders.profile.conftest import HISTOGRAM, NAIVE, PADDED, REDUCE, TILED, launch


def test_the_naive_transpose_is_told_its_strided_writes_first(probe: dict[str, Any]) -> None:
    found = findings_of(launch(probe, NAIVE))
    top = found[0]
    assert (top.kind, top.line) == ("uncoalesced_global", 7)
    assert "writes global memory with a stride" in top.sentence
    assert "only 4.0 bytes are used" in top.sentence
    assert "14,680,064 extra sectors, 78 % of all the kernel's sectors" in top.sentence
    assert top.speedup is not None and round(top.speedup) == 77
    assert with_estimate(top).endswith("could save up to 77 % of the kernel's time.")
    # The metric names behind the sentence, for the details fold.
    assert top.metrics["memory_l2_theoretical_sectors_global"] == 16777216
    assert top.metrics["smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"] == 4.0
    assert top.rule == "UncoalescedGlobalAccess"
    # Coalesced loads on the same line are not a finding.
    assert [f for f in found if f.kind == "uncoalesced_global"] == [top]
    assert found[-1].kind == "throughput" and "memory-bound" in found[-1].sentence


def test_the_unpadded_tile_is_told_its_32_way_bank_conflict_at_the_column_read(
    probe: dict[str, Any],
) -> None:
    top = findings_of(launch(probe, TILED))[0]
    assert (top.kind, top.line) == ("bank_conflicts", 21)
    assert "reads shared memory with a 32-way bank conflict" in top.sentence
    assert "tile[32][33]" in top.sentence
    assert top.speedup is not None and round(top.speedup) == 59


def test_the_padded_tile_has_no_access_pattern_finding(probe: dict[str, Any]) -> None:
    kinds = {f.kind for f in findings_of(launch(probe, PADDED))}
    assert not kinds & set(PATTERN_KINDS)
    assert "throughput" in kinds


def test_the_interleaved_reduction_is_told_its_divergence_at_the_addition(
    probe: dict[str, Any],
) -> None:
    found = findings_of(launch(probe, REDUCE))
    top = found[0]
    assert (top.kind, top.line) == ("divergence", 46)
    # 4.0 lanes per instruction issued, 5.4 per instruction of a warp that did any work there.
    assert "only 5.4 of a warp's 32 threads" in top.sentence
    assert "the kernel as a whole: 23.5 of 32" in top.sentence
    assert top.speedup is not None and round(top.speedup) == 21


def test_the_global_histogram_is_told_its_contended_atomics(probe: dict[str, Any]) -> None:
    found = findings_of(launch(probe, HISTOGRAM))
    atomics = next(f for f in found if f.kind == "global_atomics")
    assert atomics.line == 55
    assert "20.4 different 32-byte sectors per warp instruction instead of 4.0" in atomics.sentence
    # A global estimate outranks a local one of a larger number (a stall reason's share).
    assert found[0] is atomics
    stall = next(f for f in found if f.kind == "stall")
    assert stall.speedup_type == "local" and stall.score < atomics.score
    assert "of the time this part takes" in estimate_phrase(stall)
    small = next(f for f in found if f.kind == "small_grid")
    assert "528 blocks" in small.sentence


def test_findings_are_ranked_by_nvidias_estimate(probe: dict[str, Any]) -> None:
    for index in (NAIVE, TILED, PADDED, REDUCE, HISTOGRAM):
        scores = [f.score for f in findings_of(launch(probe, index))]
        assert scores == sorted(scores, reverse=True)


def test_several_kernels_name_theirs_and_a_repeated_launch_counts_once(
    probe: dict[str, Any],
) -> None:
    two = {"launches": [probe["launches"][NAIVE], probe["launches"][TILED]]}
    found = findings_of(two)
    assert any(f.sentence.startswith("Line 7 (kernel transpose_naive)") for f in found)
    again = {"launches": [probe["launches"][NAIVE], probe["launches"][NAIVE]]}
    kinds = [(f.kind, f.line) for f in findings_of(again)]
    assert len(kinds) == len(set(kinds))


def test_lines_are_marked_with_their_kinds(probe: dict[str, Any]) -> None:
    marks = kinds_at_lines(findings_of(launch(probe, TILED)))
    assert marks[21][0] == "bank_conflicts"


def test_an_empty_summary_has_no_findings() -> None:
    assert findings_of({}) == []
    assert findings_of({"launches": [{"kernel": "k", "metrics": {}, "lines": {}}]}) == []


def _lines(rows: dict[int, tuple[float, float]]) -> dict[str, dict[str, float]]:
    """Per line: (warp instructions, lanes on) -> the summary's per-line counts."""
    return {
        str(n): {"inst": inst, "thread_inst": 32 * inst, "thread_inst_true": on}
        for n, (inst, on) in rows.items()
    }


def _kernel(rows: dict[int, tuple[float, float]]) -> dict[str, Any]:
    inst = sum(i for i, _ in rows.values())
    on = sum(o for _, o in rows.values())
    return {
        "launches": [
            {
                "kernel": "k",
                "metrics": {"threads_on_per_inst": on / inst},
                "lines": _lines(rows),
                "rules": [],
            }
        ]
    }


def test_a_bounds_checks_early_exit_is_not_divergence() -> None:
    # vector-scale's one thread per element, as an H100 counted it: the `if (i < n)` line is
    # a compare and an `@P0 EXIT` that no lane takes (16 of 32), an eighth of the kernel's
    # instructions; the kernel as a whole keeps 30 of 32 lanes on.
    w = 2_097_152.0  # warps
    rows = {4: (3 * w, 96 * w), 5: (2 * w, 32 * w), 6: (6 * w, 192 * w), 8: (w, 32 * w)}
    kernel = _kernel(rows)
    assert kernel["launches"][0]["metrics"]["threads_on_per_inst"] > 24
    assert not [f for f in findings_of(kernel) if f.kind == "divergence"]
    # The same line in a kernel whose lanes mostly idle is told.
    rows[6] = (6 * w, 12 * w)
    found = [f for f in findings_of(_kernel(rows)) if f.kind == "divergence"]
    assert [f.line for f in found] == [6]


def test_a_streaming_kernels_short_reduction_tail_is_not_divergence() -> None:
    # The kernel as a whole dips under 24 lanes over ten rounds of a reduction, but no line's
    # idle lanes reach 5 % of its issue slots: no line is where its time goes.
    w = 1_000_000.0
    rows = {10: (60 * w, 60 * 32 * w)} | {n: (4 * w, 4 * 4 * w) for n in range(11, 21)}
    kernel = _kernel(rows)
    assert kernel["launches"][0]["metrics"]["threads_on_per_inst"] < 24
    assert not [f for f in findings_of(kernel) if f.kind == "divergence"]
    rows[15] = (6 * w, 6 * 4 * w)  # its idle lanes past 5 % of the slots: told
    assert [f.line for f in findings_of(_kernel(rows)) if f.kind == "divergence"] == [15]
