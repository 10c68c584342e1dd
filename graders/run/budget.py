"""The GPU time one submission may take in all: its cases, the timed section and the sanitizer.

Each stage's child gets at most what is left (time spent waiting for the GPU's lock, or for
room in its memory, does not count: the supervisor's clock stands still then). A stage stopped
because the budget ran out ends the grading with a verdict that names the budget, so a file that
runs every case to its limit cannot hold a worker for minutes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GpuBudget:
    seconds: float
    spent: float = 0.0

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.spent)

    def spend(self, seconds: float) -> None:
        self.spent += max(0.0, seconds)

    @property
    def spent_out(self) -> bool:
        return self.remaining() <= 0.0

    def message(self) -> str:
        return (
            f"Stopped: this submission used the GPU time one grading may take in all "
            f"({self.seconds:g} s for its cases, the timed launches and compute-sanitizer "
            "together, as the lab sets). A kernel that runs each case close to its limit "
            "spends it; make the kernel faster."
        )

    def not_run(self) -> str:
        return (
            f"Not run: the grading had used the GPU time one submission may take "
            f"({self.seconds:g} s) before this case."
        )
