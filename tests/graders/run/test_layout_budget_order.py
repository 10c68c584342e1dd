"""Where arrays lie, the submission's GPU budget, and the order of the cases."""

from __future__ import annotations

import random

from graders.run import layout
from graders.run.budget import GpuBudget
from graders.run.stage import case_order
from graders.spec import load_builtin_lab


def test_every_order_of_the_arrays_is_drawn() -> None:
    lay = layout.Layout(random.Random(1))
    seen = {tuple(lay.order(3)) for _ in range(200)}
    assert len(seen) == 6


def test_spacers_are_whole_blocks_never_empty_and_spread_out() -> None:
    lay = layout.Layout(random.Random(2))
    sizes = [lay.spacer() for _ in range(2000)]
    assert all(s % layout.SPACER_STEP == 0 for s in sizes)
    assert min(sizes) >= layout.SPACER_STEP and max(sizes) <= layout.MAX_SPACER_BYTES
    assert max(sizes) - min(sizes) > layout.MAX_SPACER_BYTES // 2


def test_a_fresh_layout_draws_from_the_system() -> None:
    assert isinstance(layout.Layout.fresh()._rng, random.SystemRandom)


def test_the_budget_counts_what_is_spent_and_says_so() -> None:
    b = GpuBudget(10.0)
    b.spend(4.0)
    b.spend(-1.0)  # a negative span counts nothing
    assert b.remaining() == 6.0 and not b.spent_out
    b.spend(6.0)
    assert b.spent_out and b.remaining() == 0.0
    assert "10 s" in b.message() and "10 s" in b.not_run()


def test_hidden_cases_come_last_and_the_sanitizers_case_first() -> None:
    lab = load_builtin_lab("matmul-tiled")
    order = case_order(lab)
    hidden = [c.name for c in lab.cases if c.hidden]
    assert order[-len(hidden) :] == [n for n in order if n in hidden]
    assert order[0] == lab.sanitizer_case
    assert sorted(order) == sorted(c.name for c in lab.cases)
