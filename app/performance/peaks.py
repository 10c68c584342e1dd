"""The GPUs' peak figures live with the timing stage (graders.timing.peaks), which also sets the
physics floor; the service reads them from there."""

from graders.timing.peaks import GpuPeak, floor_ms, peak_for

__all__ = ["GpuPeak", "floor_ms", "peak_for"]
