"""Children started ahead of need, so a submission never waits for Python, CuPy or a context.

A worker configures one pool per kind of child ("run", "sanitizer", "compile"), each with its
warm-up target (import CuPy, make the context, load the grader's kernels; or load NVRTC). A
pool keeps `spares` children started and warming; `take()` hands one out and starts its
replacement at once, so the next submission finds one ready too. A child serves exactly one
request and exits (graders.sandbox.child); a taken child is never given out again, and a spare
that died while waiting is thrown away, not handed out.

GPU spares share a cap per GPU with every other worker of the host (graders.sandbox.spare_slots):
a spare waits for a slot before it warms up, and a pool stops a spare idle for long when another
worker's spare waits for one (`give_way`).

Spares are spawned with generous limits, since a warm-up under instrumentation can be slow; the
request carries the real limits, which the child applies to itself before the target runs.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import SandboxProcess, SpawnError, spawn

log = logging.getLogger(__name__)

# What a spare may use while it warms up and waits; the request lowers these.
SPAWN_LIMITS = SandboxLimits(
    wall_seconds=3600.0, cpu_seconds=3600, memory_mb=32 * 1024, max_open_files=256
)


@dataclass(frozen=True)
class PoolSpec:
    name: str
    gpu: bool
    warm: str  # "package.module:function", called with no arguments in the child
    spares: int = 1
    spawn_limits: SandboxLimits = SPAWN_LIMITS


class Prestarter:
    """A pool of started children of one kind; thread-safe."""

    def __init__(self, spec: PoolSpec) -> None:
        self.spec = spec
        self._spares: list[SandboxProcess] = []
        self._lock = threading.Lock()
        self._closed = False
        self.spawned = 0
        self.handed_out: list[int] = []  # pids, in order: each appears once

    def _spawn(self) -> SandboxProcess:
        child = spawn(limits=self.spec.spawn_limits, gpu=self.spec.gpu, warm=self.spec.warm)
        self.spawned += 1
        return child

    def fill(self) -> None:
        """Start spares until there are `spares` of them (a failure is logged, not raised)."""
        while True:
            with self._lock:
                if self._closed or len(self._spares) >= self.spec.spares:
                    return
            try:
                child = self._spawn()
            except (SpawnError, OSError, RuntimeError) as exc:
                log.warning("could not prestart a %s child: %s", self.spec.name, exc)
                return
            with self._lock:
                if self._closed:
                    child.discard()
                    return
                self._spares.append(child)

    def take(self) -> SandboxProcess:
        """A started child for one request: a spare if one is alive, else a fresh one."""
        child = None
        with self._lock:
            while self._spares:
                candidate = self._spares.pop(0)
                if candidate.has_exited():
                    candidate.discard()  # died while waiting (a broken GPU, say)
                    continue
                child = candidate
                break
        if child is None:
            child = self._spawn()
        child.taken = True
        with self._lock:
            self.handed_out.append(child.pid)
        child.log.append(f"{self.spec.name} child {child.pid}, started ahead of need")
        # The replacement starts now, while this one works.
        threading.Thread(target=self.fill, name=f"prestart-{self.spec.name}", daemon=True).start()
        return child

    def give_way(self, wanted: Callable[[], bool], idle_s: float) -> bool:
        """Stop the oldest spare that has waited `idle_s` for a request, if a spare of another
        pool waits for a GPU slot (`wanted()`, graders.sandbox.spare_slots); True if one was
        stopped. Taken out of the pool under its lock first, so it is never handed out."""
        now = time.monotonic()
        with self._lock:
            idle = [c for c in self._spares if now - c.spawned_at >= idle_s]
        if not idle or not wanted():
            return False
        child = min(idle, key=lambda c: c.spawned_at)
        with self._lock:
            if child not in self._spares:
                return False  # handed out meanwhile
            self._spares.remove(child)
        log.info(
            "stopped an idle %s spare: another worker's spare waits for a GPU slot", self.spec.name
        )
        child.discard()
        return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spares, self._spares = self._spares, []
        for child in spares:
            child.discard()


_POOLS: dict[str, Prestarter] = {}
_POOLS_LOCK = threading.Lock()
_giving_way: list[threading.Thread] = []
# How often the worker looks for another worker's spare waiting for a GPU slot.
GIVE_WAY_POLL_S = 5.0


def _give_way_loop() -> None:
    """While this process has GPU pools: every GIVE_WAY_POLL_S, one idle spare of them makes
    room for another worker's waiting one (Prestarter.give_way, graders.sandbox.spare_slots)."""
    from graders.gpu import gpu_lock
    from graders.sandbox import spare_slots
    from graders.sandbox.isolation import spare_owner

    try:
        lock = gpu_lock()
        me = spare_owner()
        while True:
            time.sleep(GIVE_WAY_POLL_S)
            with _POOLS_LOCK:
                pools = [p for p in _POOLS.values() if p.spec.gpu]
            for p in pools:
                if p.give_way(
                    lambda: spare_slots.wanted_by_others(lock, me), spare_slots.IDLE_YIELD_S
                ):
                    break
    except Exception:  # the spares stay as they are; only the giving way stops
        log.exception("giving idle spares' GPU slots to other workers stopped")


def configure(spec: PoolSpec, *, fill: bool = True) -> Prestarter:
    """Set up (or replace) the pool `spec.name`; its spares start at once unless fill=False."""
    with _POOLS_LOCK:
        old = _POOLS.pop(spec.name, None)
        pool = _POOLS[spec.name] = Prestarter(spec)
    if old is not None:
        old.close()
    if fill:
        threading.Thread(target=pool.fill, name=f"prestart-{spec.name}", daemon=True).start()
    if spec.gpu:
        with _POOLS_LOCK:
            if not _giving_way:
                thread = threading.Thread(
                    target=_give_way_loop, name="prestart-give-way", daemon=True
                )
                _giving_way.append(thread)
                thread.start()
    return pool


def pool(name: str) -> Prestarter | None:
    with _POOLS_LOCK:
        return _POOLS.get(name)


def close_all() -> None:
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for p in pools:
        p.close()


atexit.register(close_all)
