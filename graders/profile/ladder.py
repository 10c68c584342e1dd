"""A profile's figures beside the lab's references: which one it resembles, what the next
one up does better.

The figures are read from the same counters for the submission and for each reference
(graders.profile.extract), on the same GPU model and the same case, so they compare; ncu's
durations order the references (slowest first: the ladder's bottom rung) and are never
compared with graded timings. Pure Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Figure:
    key: str
    label: str  # "bytes used per 32-byte sector read"
    better: str  # "higher", "lower", or "" (neither: it describes)
    digits: int = 1
    # A difference smaller than this (absolute) says nothing about the kernels.
    noise: float = 0.0


FIGURES = (
    Figure("load_bytes_per_sector", "bytes used of each 32-byte sector read", "higher", 1, 2.0),
    Figure("store_bytes_per_sector", "bytes used of each 32-byte sector written", "higher", 1, 2.0),
    Figure("shared_ways", "shared-memory turns per access (1: no bank conflict)", "lower", 1, 0.5),
    Figure("threads_per_inst", "threads working per warp instruction (of 32)", "higher", 1, 2.0),
    Figure("achieved_occupancy_pct", "achieved occupancy (% of warp slots)", "higher", 0, 10.0),
    Figure("dram_mb", "memory traffic (MB read and written)", "lower", 1, 0.0),
    Figure("memory_pct", "memory system busy (% of peak)", "", 0, 10.0),
    Figure("compute_pct", "arithmetic busy (% of peak)", "", 0, 10.0),
    Figure("registers", "registers per thread", "", 0, 8.0),
)
BY_KEY = {f.key: f for f in FIGURES}


def figures_of(summary: dict[str, Any]) -> dict[str, float]:
    """The profile's figures over all its launches (weighted by each launch's duration)."""
    launches = summary.get("launches", [])
    if not launches:
        return {}
    weights = [max(float(la.get("metrics", {}).get("duration_ns", 0.0)), 1.0) for la in launches]

    def mean(key: str) -> float | None:
        pairs = [
            (float(la["metrics"][key]), w)
            for la, w in zip(launches, weights, strict=True)
            if la.get("metrics", {}).get(key) is not None
        ]
        total = sum(w for _, w in pairs)
        return sum(v * w for v, w in pairs) / total if pairs and total else None

    out: dict[str, float] = {}
    for key in (
        "load_bytes_per_sector",
        "store_bytes_per_sector",
        "threads_on_per_inst",
        "achieved_occupancy_pct",
        "memory_pct",
        "compute_pct",
    ):
        value = mean(key)
        if value is not None:
            out["threads_per_inst" if key == "threads_on_per_inst" else key] = value
    # Shared-memory turns per access: the lines' wavefronts against the ideal (1: no bank
    # conflict), else the whole kernel's wavefronts per shared-memory instruction.
    waves = ideal = 0.0
    for la in launches:
        for row in la.get("lines", {}).values():
            for access in ("load", "store", "atomic"):
                waves += float(row.get(f"shared_{access}_wavefronts", 0.0))
                ideal += float(row.get(f"shared_{access}_wavefronts_ideal", 0.0))
    if ideal > 0:
        out["shared_ways"] = waves / ideal
    else:
        waves = sum(float(la.get("metrics", {}).get("shared_wavefronts", 0.0)) for la in launches)
        requests = sum(
            float(la.get("metrics", {}).get("shared_load_requests", 0.0))
            + float(la.get("metrics", {}).get("shared_store_requests", 0.0))
            for la in launches
        )
        if requests > 0:
            out["shared_ways"] = waves / requests
    dram = [
        float(la["metrics"].get("dram_read_bytes", 0.0))
        + float(la["metrics"].get("dram_write_bytes", 0.0))
        for la in launches
        if "dram_read_bytes" in la.get("metrics", {})
    ]
    if dram:
        out["dram_mb"] = sum(dram) / 1e6
    registers = [
        la["metrics"]["registers"] for la in launches if "registers" in la.get("metrics", {})
    ]
    if registers:
        out["registers"] = float(max(registers))
    out["duration_ns"] = sum(
        float(la.get("metrics", {}).get("duration_ns", 0.0)) for la in launches
    )
    return out


def show(key: str, value: float | None) -> str:
    if value is None:
        return "–"
    figure = BY_KEY.get(key)
    digits = figure.digits if figure else 1
    return f"{value:,.{digits}f}"


# What the resemblance weighs: each figure scaled to about 0..1.
_SCALE = {
    "load_bytes_per_sector": lambda v: v / 32.0,
    "store_bytes_per_sector": lambda v: v / 32.0,
    "shared_ways": lambda v: math.log2(max(v, 1.0)) / 5.0,
    "threads_per_inst": lambda v: v / 32.0,
    "achieved_occupancy_pct": lambda v: v / 100.0,
    "memory_pct": lambda v: v / 100.0,
    "compute_pct": lambda v: v / 100.0,
}


def distance(a: dict[str, float], b: dict[str, float]) -> float:
    """How far apart two profiles' figures are (0: alike), over the figures both have."""
    common = [k for k in _SCALE if k in a and k in b]
    if not common:
        return math.inf
    return math.sqrt(sum((_SCALE[k](a[k]) - _SCALE[k](b[k])) ** 2 for k in common) / len(common))


@dataclass
class LadderRow:
    key: str
    label: str
    yours: float | None
    references: dict[str, float | None]

    def phrase(self, order: list[str]) -> str:
        """ "bytes used per sector: yours 4, naive 4, tiled 32"."""
        parts = [f"yours {show(self.key, self.yours)}"]
        parts += [f"{name} {show(self.key, self.references.get(name))}" for name in order]
        return f"{self.label}: " + ", ".join(parts)


@dataclass
class Ladder:
    order: list[str]  # the references, slowest first (by ncu's duration on this GPU)
    rows: list[LadderRow]
    resembles: str = ""
    next_up: str = ""
    sentence: str = ""
    differences: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "rows": [
                {"key": r.key, "label": r.label, "yours": r.yours, "references": r.references}
                for r in self.rows
            ],
            "resembles": self.resembles,
            "next_up": self.next_up,
            "sentence": self.sentence,
            "differences": self.differences,
        }


def _better(figure: Figure, theirs: float, yours: float) -> bool:
    """Whether `theirs` is markedly better than `yours` for this figure."""
    gap = theirs - yours if figure.better == "higher" else yours - theirs
    if gap <= figure.noise:
        return False
    scale = max(abs(theirs), abs(yours), 1e-9)
    return gap / scale >= 0.2


def _difference(figure: Figure, name: str, theirs: float, yours: float) -> str:
    return f"{figure.label}: {name} {show(figure.key, theirs)}, yours {show(figure.key, yours)}."


def ladder(yours: dict[str, float], references: dict[str, dict[str, float]]) -> Ladder:
    """The submission's figures beside the references', the nearest reference and the next up."""
    order = sorted(references, key=lambda n: -references[n].get("duration_ns", 0.0))
    rows = [
        LadderRow(f.key, f.label, yours.get(f.key), {n: references[n].get(f.key) for n in order})
        for f in FIGURES
        if f.key in yours or any(f.key in references[n] for n in order)
    ]
    result = Ladder(order=order, rows=rows)
    if not order or not yours:
        return result
    nearest = min(order, key=lambda n: distance(yours, references[n]))
    if not math.isfinite(distance(yours, references[nearest])):
        return result
    result.resembles = nearest
    place = order.index(nearest)
    result.next_up = order[place + 1] if place + 1 < len(order) else ""
    # Against the next one up; at the top, against the top itself.
    other = result.next_up or nearest
    theirs = references[other]
    result.differences = [
        _difference(f, other, theirs[f.key], yours[f.key])
        for f in FIGURES
        if f.better
        and f.key in theirs
        and f.key in yours
        and _better(f, theirs[f.key], yours[f.key])
    ]
    if result.next_up and result.differences:
        result.sentence = (
            f"Your kernel's profile is closest to the reference {nearest}. What separates it "
            f"from {result.next_up}, the next one up:"
        )
    elif result.next_up:
        result.sentence = (
            f"Your kernel's profile is closest to the reference {nearest}; on these figures it "
            f"already does as well as {result.next_up}, the next one up, so what separates "
            "them is elsewhere (compare the times above)."
        )
    elif result.differences:
        result.sentence = (
            f"Your kernel's profile is closest to the reference {nearest}, the top of the "
            f"lab's ladder. Where {nearest} still does better:"
        )
    else:
        result.sentence = (
            f"Your kernel's profile is closest to the reference {nearest}, the top of the "
            "lab's ladder, and does as well on these figures."
        )
    return result
