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


@pytest.mark.gpu
def test_the_health_check_after_a_kill_waits_for_the_process_to_leave_the_gpu() -> None:
    from graders.sandbox.runner import SandboxLimits, run_sandboxed

    # A child that holds GPU memory past its wall limit is killed, as a hung kernel's is.
    limits = SandboxLimits(wall_seconds=20, cpu_seconds=60, memory_mb=8192)
    outcome = run_sandboxed(
        "graders.sandbox.selftest_targets:hold_gpu_memory",
        {"mb": 1024, "seconds": 120},
        limits=limits,
        gpu=True,
    )
    assert outcome.timed_out, (outcome.reason, outcome.log)
    assert gpu.check_gpu_health(killed_pid=outcome.pid) is None
    running = gpu.gpu_process_ids()
    assert running is not None and outcome.pid not in running
