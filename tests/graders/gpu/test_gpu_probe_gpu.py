"""The worker's view of its GPU: usable, its architecture, clocks, health."""

from __future__ import annotations

import pytest

from graders import gpu


@pytest.mark.gpu
def test_gpu_is_usable_and_described() -> None:
    assert gpu.gpu_unavailable_reason() is None
    arch = gpu.detect_arch()
    assert arch is not None and arch.startswith("sm_")
    info = gpu.gpu_info()
    assert info.name and info.arch == arch
    assert gpu.check_gpu_health() is None
