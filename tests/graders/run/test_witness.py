"""Which trusted kernel checks a timed repetition cheaply: it runs once per checked
repetition, so the fastest reference by the figures kept; with none kept, cuBLAS, then the
lab's scoring target, then any reference."""

from __future__ import annotations

import dataclasses

from graders.run.context import Context, Kernel
from graders.run.timed import _witness_kernel
from graders.spec import load_builtin_lab


def _ctx(names: list[str], target: str | None = "tiled") -> Context:
    lab = load_builtin_lab("matmul-tiled")
    lab = dataclasses.replace(lab, scoring=dataclasses.replace(lab.scoring, target=target))
    refs = {n: Kernel(n, {}, {}, builtin="cublas" if n == "cublas" else "") for n in names}
    return Context(lab, Kernel("submission", {}, {}), refs, 0)


def _picked(ctx: Context, cached: dict[str, dict[str, float]]) -> str | None:
    kernel = _witness_kernel(ctx, cached)
    return None if kernel is None else kernel.name


def test_the_fastest_kept_reference_checks_the_repetitions() -> None:
    ctx = _ctx(["naive", "tiled", "cublas"])
    kept = {"naive": {"median_ms": 2.7}, "tiled": {"median_ms": 1.9}, "cublas": {"median_ms": 0.4}}
    assert _picked(ctx, kept) == "cublas"
    kept["tiled"]["median_ms"] = 0.39
    assert _picked(ctx, kept) == "tiled"  # one hundredth of a millisecond faster wins


def test_only_kept_figures_of_this_labs_references_count() -> None:
    ctx = _ctx(["naive", "tiled"])
    kept = {"cublas": {"median_ms": 0.1}, "naive": {"median_ms": 2.7}, "tiled": {}}
    assert _picked(ctx, kept) == "naive"  # tiled has no figure; cuBLAS is not a reference here


def test_with_nothing_kept_cublas_then_the_target_then_any() -> None:
    assert _picked(_ctx(["naive", "tiled", "cublas"]), {}) == "cublas"
    assert _picked(_ctx(["naive", "tiled"]), {}) == "tiled"
    assert _picked(_ctx(["naive", "tiled"], target=None), {}) == "naive"
    assert _picked(_ctx([]), {"naive": {"median_ms": 1.0}}) is None
