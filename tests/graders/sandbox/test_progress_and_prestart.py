"""The progress channel, its clocks, and children started ahead of need (real processes, no GPU).

Clocks are tested by what happens (killed or not, which step), never by how long it took.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graders.sandbox import prestart
from graders.sandbox.runner import SandboxLimits, run_sandboxed

# Each test runs with fresh children and with children forked from a zygote (conftest.py).
pytestmark = pytest.mark.usefixtures("child_kind")

TARGETS = "graders.sandbox.selftest_targets"
LIMITS = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_mb=512)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def scripted(actions: list[dict[str, Any]], limits: SandboxLimits = LIMITS, **kw: Any) -> Any:
    return run_sandboxed(f"{TARGETS}:scripted", {"actions": actions}, limits=limits, **kw)


def test_progress_records_reach_the_parent_in_order_beside_the_answer() -> None:
    seen: list[dict[str, Any]] = []
    outcome = scripted(
        [{"report": {"start": "n-1"}}, {"report": {"done": {"name": "n-1"}}}],
        on_progress=seen.append,
    )
    assert outcome.ok, outcome
    records = [r for r in seen if "ready" not in r]
    assert records == [{"start": "n-1"}, {"done": {"name": "n-1"}}]


def test_time_spent_waiting_for_the_lock_does_not_count() -> None:
    limits = SandboxLimits(wall_seconds=2, cpu_seconds=10, memory_mb=512)
    waited = scripted(
        [{"report": {"lock": "wait"}}, {"sleep": 3}, {"report": {"lock": "held"}}], limits
    )
    assert waited.ok, (waited.reason, waited.log)
    # The same sleep, not said to be a wait for the lock, runs past the limit.
    busy = scripted([{"sleep": 3}], limits)
    assert busy.reason == "timeout" and busy.timed_out


def test_a_step_past_its_own_limit_is_killed_and_named() -> None:
    outcome = scripted(
        [{"report": {"step": "case:n-1000", "limit_s": 1}}, {"sleep": 30}],
        SandboxLimits(wall_seconds=60, cpu_seconds=10, memory_mb=512),
    )
    assert outcome.reason == "timeout" and outcome.timed_out
    assert outcome.stopped_step == "case:n-1000"


def test_a_step_limit_is_paused_by_a_lock_wait_and_cleared_by_none() -> None:
    outcome = scripted(
        [
            {"report": {"step": "timing", "limit_s": 2}},
            {"report": {"lock": "wait"}},
            {"sleep": 2.5},
            {"report": {"lock": "held"}},
            {"report": {"step": "timing", "limit_s": None}},
            {"sleep": 2.5},
        ]
    )
    assert outcome.ok, (outcome.reason, outcome.log)


def test_the_childs_stderr_goes_to_the_log_not_to_what_students_see() -> None:
    outcome = scripted([{"stderr": "Warning: /root/.venv/lib/x.py"}, {"stdout": "kernel says"}])
    assert outcome.ok
    assert "kernel says" in outcome.stdout
    assert "Warning" not in outcome.stdout
    assert any("Warning: /root/.venv/lib/x.py" in line for line in outcome.log)


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[prestart.Prestarter]:
    # The warm-up takes longer than the request's wall limit: it must not count.
    monkeypatch.setenv("KG_SELFTEST_WARM_S", "3")
    spec = prestart.PoolSpec(name="selftest", gpu=False, warm=f"{TARGETS}:warm_up", spares=1)
    configured = prestart.configure(spec, fill=False)
    configured.fill()
    yield configured
    configured.close()
    prestart.close_all()


def test_a_prestarted_child_is_warm_serves_one_request_and_is_never_reused(
    pool: prestart.Prestarter,
) -> None:
    limits = SandboxLimits(wall_seconds=2, cpu_seconds=10, memory_mb=512)
    first = run_sandboxed(f"{TARGETS}:warm_echo", {}, limits=limits, pool="selftest")
    assert first.ok, (first.reason, first.log)
    assert first.value["warmed"] is True
    assert first.value["pid"] != os.getpid()
    assert not _alive(first.value["pid"])  # it exited after its one answer
    second = run_sandboxed(f"{TARGETS}:warm_echo", {}, limits=limits, pool="selftest")
    assert second.ok, (second.reason, second.log)
    assert second.value["pid"] != first.value["pid"]
    assert second.value["warmed"] is True
    assert pool.spawned >= 2


def test_a_prestarted_child_is_held_to_its_requests_limits(pool: prestart.Prestarter) -> None:
    # The pool starts children with room to warm up; the request's limits still apply.
    cpu = run_sandboxed(
        f"{TARGETS}:burn_cpu",
        {},
        limits=SandboxLimits(wall_seconds=30, cpu_seconds=1, memory_mb=512),
        pool="selftest",
    )
    assert cpu.reason == "resource_limit" and "CPU time" in cpu.message, cpu
    memory = run_sandboxed(
        f"{TARGETS}:allocate_memory",
        {},
        limits=SandboxLimits(wall_seconds=30, cpu_seconds=20, memory_mb=256),
        pool="selftest",
    )
    assert memory.reason == "resource_limit" and "256 MiB" in memory.message, memory


def test_a_closed_pool_leaves_no_child_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KG_SELFTEST_WARM_S", "60")
    spec = prestart.PoolSpec(name="closing", gpu=False, warm=f"{TARGETS}:warm_up", spares=2)
    configured = prestart.configure(spec, fill=False)
    configured.fill()
    pids = [c.pid for c in configured._spares]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    configured.close()
    assert not any(_alive(p) for p in pids)
