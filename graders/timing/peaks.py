"""Peak arithmetic throughput and memory bandwidth of NVIDIA GPUs, by the name CUDA reports.

Figures are NVIDIA's published specifications (product datasheets and architecture
whitepapers) at boost clock, without sparsity: FP32 and FP64 on the CUDA cores, the dense tensor
core rates (TF32, FP16, FP64, INT8), and DRAM (HBM or GDDR) bandwidth. A kernel measured against
them sees the ceiling of the card as sold; a card held at a lower clock, or a PCIe card at a
lower power limit, reaches less. A GPU missing from the table gets no percentages, only its
measured FLOP/s and GB/s, and no physics floor.

The physics floor (`floor_ms`): no kernel can move a lab's least memory traffic faster than the
card's bandwidth, do its arithmetic faster than the fastest unit that could (tensor cores
included: a float32 lab's kernel may split its numbers across TF32 products), or launch faster
than `LAUNCH_FLOOR_MS` a launch. A median under half of that bound is impossible (half: a
kernel's writes may sit in L2 when its last event fires, and datasheet figures round), and is
taken as a sign that the timing was gamed, not as a fast kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPeak:
    model: str  # the name shown, e.g. "H100 SXM5"
    fp32_tflops: float
    fp64_tflops: float
    bandwidth_gbs: float
    # Dense tensor-core rates: TF32, FP16/BF16, FP64 (0 where the card has none), INT8 (TOPS).
    tensor: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def tflops(self, dtype: str) -> float:
        """The peak for a lab's data type; integer labs are held to the FP32 rate (the
        integer multiply-add rate of these GPUs is at most that)."""
        return self.fp64_tflops if dtype == "float64" else self.fp32_tflops

    def ceiling_tflops(self, dtype: str) -> float:
        """The fastest any unit of the card could do a lab's arithmetic in `dtype`."""
        tf32, fp16, fp64, int8 = self.tensor
        if dtype == "float64":
            return max(self.fp64_tflops, fp64)
        if dtype in ("float16", "bfloat16"):
            return max(self.fp32_tflops, fp16)
        if dtype == "float32":
            return max(self.fp32_tflops, tf32, fp16 / 3)
        return max(self.fp32_tflops, int8)


LAUNCH_FLOOR_MS = 0.001
FLOOR_FRACTION = 0.5


def floor_ms(peak: GpuPeak, *, flops: float, nbytes: float, launches: int, dtype: str) -> float:
    """The least time a correct run could take on this card (see the module docstring)."""
    memory = nbytes / (peak.bandwidth_gbs * 1e9) * 1e3
    arithmetic = flops / (peak.ceiling_tflops(dtype) * 1e12) * 1e3
    return max(FLOOR_FRACTION * max(memory, arithmetic), launches * LAUNCH_FLOOR_MS)


# First match wins, so a more specific pattern comes before a general one.
_PEAKS: list[tuple[str, GpuPeak]] = [
    (r"H200.*NVL", GpuPeak("H200 NVL", 60.0, 30.0, 4800.0, (835.0, 1671.0, 60.0, 3341.0))),
    (r"H200", GpuPeak("H200 SXM", 67.0, 34.0, 4800.0, (495.0, 990.0, 67.0, 1979.0))),
    (r"H100.*NVL", GpuPeak("H100 NVL", 60.0, 30.0, 3900.0, (835.0, 1671.0, 60.0, 3341.0))),
    (r"H100.*PCIe", GpuPeak("H100 PCIe", 51.0, 26.0, 2000.0, (378.0, 756.0, 51.0, 1513.0))),
    (r"H100", GpuPeak("H100 SXM5", 67.0, 34.0, 3350.0, (495.0, 990.0, 67.0, 1979.0))),
    (r"GH200", GpuPeak("GH200", 67.0, 34.0, 4000.0, (495.0, 990.0, 67.0, 1979.0))),
    (
        r"A100.*80GB.*PCIe|A100-PCIE-80GB",
        GpuPeak("A100 PCIe 80GB", 19.5, 9.7, 1935.0, (156.0, 312.0, 19.5, 624.0)),
    ),
    (r"A100.*80GB", GpuPeak("A100 SXM4 80GB", 19.5, 9.7, 2039.0, (156.0, 312.0, 19.5, 624.0))),
    (r"A100", GpuPeak("A100 40GB", 19.5, 9.7, 1555.0, (156.0, 312.0, 19.5, 624.0))),
    (r"L40S", GpuPeak("L40S", 91.6, 1.43, 864.0, (183.0, 366.0, 0.0, 733.0))),
    (r"L40", GpuPeak("L40", 90.5, 1.41, 864.0, (90.5, 181.0, 0.0, 362.0))),
    (r"\bL4\b", GpuPeak("L4", 30.3, 0.47, 300.0, (60.0, 121.0, 0.0, 242.0))),
    (r"A10\b", GpuPeak("A10", 31.2, 0.98, 600.0, (62.5, 125.0, 0.0, 250.0))),
    (r"V100.*PCIe", GpuPeak("V100 PCIe", 14.0, 7.0, 900.0, (0.0, 112.0, 0.0, 0.0))),
    (r"V100", GpuPeak("V100 SXM2", 15.7, 7.8, 900.0, (0.0, 125.0, 0.0, 0.0))),
    (r"\bT4\b", GpuPeak("T4", 8.1, 0.25, 320.0, (0.0, 65.0, 0.0, 130.0))),
    (r"RTX 4090", GpuPeak("GeForce RTX 4090", 82.6, 1.29, 1008.0, (82.6, 330.0, 0.0, 661.0))),
    (r"RTX 3090", GpuPeak("GeForce RTX 3090", 35.6, 0.56, 936.0, (35.6, 142.0, 0.0, 284.0))),
]


def peak_for(gpu_name: str | None) -> GpuPeak | None:
    """The peak figures for a GPU name such as 'NVIDIA H100 80GB HBM3'; None if unknown."""
    if not gpu_name:
        return None
    for pattern, peak in _PEAKS:
        if re.search(pattern, gpu_name, re.IGNORECASE):
            return peak
    return None
