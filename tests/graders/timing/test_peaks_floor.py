"""The physics floor: a median under half of what the card's bandwidth and arithmetic allow."""

from __future__ import annotations

import pytest

from graders.timing.peaks import FLOOR_FRACTION, LAUNCH_FLOOR_MS, floor_ms, peak_for


def test_memory_bound_lab_floor_is_half_its_bytes_over_the_bandwidth() -> None:
    h100 = peak_for("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    nbytes = 2 * 4 * (1 << 26)  # vector-scale: read and write 64 Mi floats
    got = floor_ms(h100, flops=1 << 26, nbytes=nbytes, launches=1, dtype="float32")
    assert got == pytest.approx(FLOOR_FRACTION * nbytes / 3350e9 * 1e3)


def test_a_float32_matrix_product_may_use_tensor_cores_so_its_floor_is_low() -> None:
    h100 = peak_for("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    n = 2048
    flops, nbytes = 2 * n**3, 4 * 3 * n * n
    got = floor_ms(h100, flops=flops, nbytes=nbytes, launches=1, dtype="float32")
    # Not the CUDA cores' 67 TFLOP/s (0.26 ms, which a 3xTF32 kernel could beat).
    assert got < FLOOR_FRACTION * flops / 67e12 * 1e3
    assert got == pytest.approx(FLOOR_FRACTION * flops / 495e12 * 1e3)
    cublas_ms = 0.34  # measured on an H200 for this size: well above the floor
    assert cublas_ms > got


def test_tiny_work_is_held_to_the_launches() -> None:
    a100 = peak_for("NVIDIA A100-SXM4-80GB")
    assert a100 is not None
    got = floor_ms(a100, flops=10, nbytes=40, launches=3, dtype="float32")
    assert got == pytest.approx(3 * LAUNCH_FLOOR_MS)


def test_float64_uses_its_own_tensor_rate() -> None:
    h100 = peak_for("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    assert h100.ceiling_tflops("float64") == 67.0
    assert h100.ceiling_tflops("float32") == 495.0
    assert h100.ceiling_tflops("int32") == 1979.0
