"""GPU peaks by the names CUDA reports, and the charts' arithmetic."""

from __future__ import annotations

import pytest

from app.performance.peaks import peak_for
from app.web.charts import Bar, bar_chart, histogram, linear_bins, log_bins


@pytest.mark.parametrize(
    ("name", "model", "bandwidth"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM5", 3350),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2000),
        ("NVIDIA H100 NVL", "H100 NVL", 3900),
        ("NVIDIA H200", "H200 SXM", 4800),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", 2039),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB", 1555),
        ("Tesla V100-SXM2-16GB", "V100 SXM2", 900),
        ("Tesla T4", "T4", 320),
        ("NVIDIA L4", "L4", 300),
        ("NVIDIA L40S", "L40S", 864),
    ],
)
def test_known_gpus_are_found_by_the_name_cuda_reports(
    name: str, model: str, bandwidth: float
) -> None:
    peak = peak_for(name)
    assert peak is not None and peak.model == model and peak.bandwidth_gbs == bandwidth
    assert peak.tflops("float64") < peak.tflops("float32")


def test_an_unknown_gpu_has_no_peak() -> None:
    assert peak_for("Some Future GPU") is None and peak_for("") is None


def test_histogram_bins_count_every_value() -> None:
    bins = linear_bins([0, 5, 10, 99.9, 100], low=0, high=100, count=10)
    assert [b.count for b in bins] == [2, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    times = [0.1, 0.2, 0.9, 1.0, 12.0]
    logs = log_bins(times)
    assert sum(b.count for b in logs) == len(times)
    assert logs[0].low <= 0.1 and logs[-1].high > 12.0


def test_charts_escape_their_text() -> None:
    svg = bar_chart([Bar("<script>", 1.0, "1 ms")], title="a & b")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a &amp; b" in svg
    assert "No data yet" in histogram([], title="t", x_label="x")
