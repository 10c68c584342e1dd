"""The submission's figures beside the references': the rung it resembles, the next one up."""

from __future__ import annotations

from typing import Any

import pytest

from graders.profile.ladder import distance, figures_of, ladder
from tests.graders.profile.conftest import NAIVE, PADDED, TILED, launch


@pytest.fixture
def figures(probe: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {
        "naive": figures_of(launch(probe, NAIVE)),
        "unpadded": figures_of(launch(probe, TILED)),
        "tiled": figures_of(launch(probe, PADDED)),
    }


def test_figures_come_from_the_same_counters(figures: dict[str, dict[str, float]]) -> None:
    assert figures["naive"]["store_bytes_per_sector"] == pytest.approx(4.0)
    assert figures["tiled"]["store_bytes_per_sector"] == pytest.approx(32.0)
    assert figures["unpadded"]["shared_ways"] == pytest.approx(16.5)
    assert figures["tiled"]["shared_ways"] == pytest.approx(1.0)
    assert "shared_ways" not in figures["naive"]  # no shared memory at all


def test_a_naive_kernel_resembles_naive_and_is_told_what_tiled_does_better(
    figures: dict[str, dict[str, float]],
) -> None:
    refs = {"naive": figures["naive"], "tiled": figures["tiled"]}
    steps = ladder(figures["naive"], refs)
    assert steps.order == ["naive", "tiled"]  # slowest first
    assert (steps.resembles, steps.next_up) == ("naive", "tiled")
    assert "What separates it from tiled, the next one up" in steps.sentence
    assert "bytes used of each 32-byte sector written: tiled 32.0, yours 4.0." in steps.differences
    row = next(r for r in steps.rows if r.key == "store_bytes_per_sector")
    assert row.phrase(steps.order) == (
        "bytes used of each 32-byte sector written: yours 4.0, naive 4.0, tiled 32.0"
    )


def test_an_unpadded_tile_resembles_the_top_and_is_told_its_bank_conflicts(
    figures: dict[str, dict[str, float]],
) -> None:
    refs = {"naive": figures["naive"], "tiled": figures["tiled"]}
    steps = ladder(figures["unpadded"], refs)
    assert steps.resembles == "tiled" and steps.next_up == ""
    assert "the top of the lab's ladder. Where tiled still does better" in steps.sentence
    assert any(d.startswith("shared-memory turns per access") for d in steps.differences)


def test_the_top_reference_itself_does_as_well_as_the_top(
    figures: dict[str, dict[str, float]],
) -> None:
    steps = ladder(figures["tiled"], {"naive": figures["naive"], "tiled": figures["tiled"]})
    assert steps.differences == []
    assert steps.sentence.endswith("does as well on these figures.")
    assert distance(figures["tiled"], figures["tiled"]) == 0


def test_no_references_no_resemblance(figures: dict[str, dict[str, float]]) -> None:
    steps = ladder(figures["naive"], {})
    assert steps.resembles == "" and steps.sentence == "" and steps.order == []
