"""Reading a real Nsight Compute report (H200, ncu 2025.3.1) into the profile summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graders.profile import extract
from tests.graders.profile.conftest import HISTOGRAM, NAIVE, TILED


def test_every_launch_is_read_in_order_with_its_gpu(probe: dict[str, Any]) -> None:
    names = [launch["kernel"] for launch in probe["launches"]]
    assert len(names) == 22
    assert names[NAIVE] == "transpose_naive"
    assert names[TILED] == "transpose_tiled"
    assert names[HISTOGRAM] == "histogram_global"
    assert probe["gpu"] == "NVIDIA H200"


def test_the_naive_transposes_store_line_carries_its_sectors(probe: dict[str, Any]) -> None:
    naive = probe["launches"][NAIVE]
    assert naive["grid"] == [128, 128, 1] and naive["block"] == [32, 32, 1]
    line = naive["lines"]["7"]
    # Coalesced loads, stores eight times the sectors they need (4 of 32 bytes used).
    assert line["load_sectors"] == line["load_sectors_ideal"] == 2097152
    assert line["store_sectors"] == 16777216
    assert line["store_sectors_ideal"] == 2097152
    assert naive["metrics"]["store_bytes_per_sector"] == pytest.approx(4.0)
    assert naive["metrics"]["memory_pct"] == pytest.approx(86.59, abs=0.01)


def test_shared_memory_wavefronts_and_the_n_way_conflict_are_per_line(
    probe: dict[str, Any],
) -> None:
    tiled = probe["launches"][TILED]["lines"]
    assert tiled["21"]["shared_nway"] == 32
    assert tiled["21"]["shared_load_wavefronts"] == 16777216
    assert tiled["21"]["shared_load_wavefronts_ideal"] == 524288
    assert tiled["16"]["shared_nway"] == 1  # the row-wise store into the tile


def test_rules_keep_nvidias_estimate_and_lose_their_link_markup(probe: dict[str, Any]) -> None:
    rules = {r["id"]: r for r in probe["launches"][NAIVE]["rules"]}
    uncoalesced = rules["UncoalescedGlobalAccess"]
    assert uncoalesced["speedup"] == pytest.approx(77.09, abs=0.01)
    assert uncoalesced["speedup_type"] == "global"
    assert "14680064 excessive sectors" in uncoalesced["message"]
    assert "@url" not in uncoalesced["message"]
    assert "CUDA Programming Guide" in uncoalesced["message"]
    assert rules["AchievedOccupancy"]["speedup_type"] == "local"


def test_stall_samples_are_counted_per_line(probe: dict[str, Any]) -> None:
    lines = probe["launches"][HISTOGRAM]["lines"]
    assert lines["55"]["stalls"]["long_scoreboard"] > 100000
    assert "atomic" in lines["55"]["ops"] and "load" in lines["55"]["ops"]


def test_the_summary_is_plain_json_and_bounded(probe: dict[str, Any]) -> None:
    text = json.dumps(probe)
    assert len(text) < 22 * 8 * 1024  # 22 launches, a few kilobytes each
    assert json.loads(text) == probe


def test_plain_message_keeps_the_words_of_each_link() -> None:
    text = (
        "See the @url:CUDA Best Practices Guide:https://docs.nvidia.com/x#y@ and the "
        "@section:SourceCounters:Source Counters@ section."
    )
    assert extract.plain_message(text) == (
        "See the CUDA Best Practices Guide and the Source Counters section."
    )


def test_a_file_that_is_not_a_report_is_refused_with_a_sentence(
    reader: Any, tmp_path: Path
) -> None:
    bad = tmp_path / "not-a-report.ncu-rep"
    bad.write_bytes(b"NVR\0 this is not a report")
    with pytest.raises(extract.ReportError, match="could not be read"):
        extract.summarize_report(bad, filename="x.cu", reader=reader)


def test_the_saved_summaries_the_service_tests_use_are_this_reports(
    probe: dict[str, Any],
) -> None:
    """tests/graders/profile/data/probe-summaries.json (read by the service's tests, which
    need no report reader) is what this extraction makes of the report."""
    from tests.graders.profile.conftest import DATA, PADDED, REDUCE

    saved = json.loads((DATA / "probe-summaries.json").read_text(encoding="utf-8"))
    names = {"naive": NAIVE, "tiled": TILED, "padded": PADDED, "reduce": REDUCE}
    names["histogram"] = HISTOGRAM
    for name, index in names.items():
        assert saved[name]["launches"] == [probe["launches"][index]], name
