"""Where a case's arrays lie on the device: drawn at random, the same way in every run.

A kernel can read its own pointers: the distance between two of its arrays, their alignment, what
lies past an array's end. If a graded run and compute-sanitizer's run laid the arrays out
differently (one pooled allocation with guard bands, against an allocation per array), a kernel
could tell the two apart and read out of bounds only where no tool watches. So both runs allocate
the same way (graders/run/buffers.py): per array, a spacer of a random size and then the array,
in a random order; the graded run adds `TAIL_GUARD_BYTES` of poisoned guard to every allocation,
and the sanitizer's tools add exactly that much padding (`--padding`) to every allocation, which
they watch. Measured on an H200 (CUDA 13, driver 580): consecutive allocations of n + P bytes lie
exactly as far apart as allocations of n bytes under `compute-sanitizer --padding P`.

The draw needs no secret and no reproducibility: each allocation draws afresh from the operating
system's generator.
"""

from __future__ import annotations

import random

# The graded run's smallest guard after an array, and the padding the sanitizer's tools put
# after every allocation: one number, so both runs lie alike.
TAIL_GUARD_BYTES = 256 * 1024
# Spacers before each array: a whole number of 512-byte blocks (CUDA's allocation granule for
# small allocations) up to this many bytes. Never empty: an empty spacer is no allocation, and
# under the sanitizer it would get no padding.
SPACER_STEP = 512
MAX_SPACER_BYTES = 4 << 20


class Layout:
    """The order of a case's arrays and the size of the spacer before each."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    @classmethod
    def fresh(cls) -> Layout:
        return cls(random.SystemRandom())

    def order(self, count: int) -> list[int]:
        """The indices 0..count-1 in the order their arrays are allocated."""
        indices = list(range(count))
        self._rng.shuffle(indices)
        return indices

    def spacer(self) -> int:
        """Bytes of the next spacer: between SPACER_STEP and MAX_SPACER_BYTES."""
        return SPACER_STEP * self._rng.randint(1, MAX_SPACER_BYTES // SPACER_STEP)
