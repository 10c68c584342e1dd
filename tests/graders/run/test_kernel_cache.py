"""The CuPy kernel cache: one per host (whatever the data folder), found built at once, given to
every GPU child as a private copy, and never taken from a folder others may write. No GPU here:
a built cache is stood in for by a folder marked complete; the build itself is a GPU test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.run import kernel_cache
from graders.sandbox.process import register_gpu_seed
from graders.sandbox.runner import SandboxLimits, run_sandboxed
from tests.conftest import gpu_unavailable_reason

ROOT = Path(__file__).resolve().parents[3]
ARCH = "sm_00"  # no GPU has it: nothing here is ever really built


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "cache"
    monkeypatch.setenv("KERNELGRADER_KERNEL_CACHE_DIR", str(root))
    kernel_cache._BUILT.clear()
    yield root
    kernel_cache._BUILT.clear()
    register_gpu_seed(".cupy", None)


def _built(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "kernel-from-the-trusted-build.cubin").write_bytes(b"\x7fELF")
    (folder / kernel_cache.COMPLETE).touch()


def test_one_cache_per_host_named_by_cupy_cuda_and_the_gpus_architecture(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import cupy

    monkeypatch.delenv("KERNELGRADER_KERNEL_CACHE_DIR", raising=False)
    folders = set()
    for data in ("course-a", "course-b"):
        monkeypatch.setenv("KERNELGRADER_DATA_DIR", str(tmp_path / data))
        monkeypatch.setenv("KERNELGRADER_LOCK_DIR", str(tmp_path / data / "locks"))
        folders.add(kernel_cache.cache_folder("sm_90"))
    assert len(folders) == 1, folders
    name = folders.pop().name
    assert f"cupy{cupy.__version__}-cuda" in name and "-sm_90-" in name
    assert kernel_cache.cache_folder("sm_90") != kernel_cache.cache_folder("sm_100")


def test_a_built_cache_is_found_and_every_gpu_child_gets_its_own_copy(cache_dir: Path) -> None:
    final = kernel_cache.cache_folder(ARCH)
    _built(final)
    state = kernel_cache.ensure_built(ARCH)
    assert state.folder == final and not state.built_now
    limits = SandboxLimits(wall_seconds=30, cpu_seconds=20, memory_mb=1024)
    seen = []
    for _ in range(2):
        outcome = run_sandboxed(
            "graders.sandbox.selftest_targets:workdir_info", {}, limits=limits, gpu=True
        )
        assert outcome.ok, outcome.log
        assert ".cupy" in outcome.value["entries"]
        seen.append(outcome.value["cwd"])
    assert seen[0] != seen[1] and not any(Path(cwd).exists() for cwd in seen)
    # The child wrote into its working folder; the trusted cache is as it was built.
    assert sorted(p.name for p in final.iterdir()) == [
        kernel_cache.COMPLETE,
        "kernel-from-the-trusted-build.cubin",
    ]


def test_a_cache_other_users_may_write_is_never_used(cache_dir: Path) -> None:
    final = kernel_cache.cache_folder(ARCH)
    _built(final)
    cache_dir.chmod(0o777)
    state = kernel_cache.ensure_built(ARCH)
    assert state.folder is None
    assert "other users may write in" in state.why_not and state.why_not.endswith(".")
    cache_dir.chmod(0o755)
    final.chmod(0o775)
    kernel_cache._BUILT.clear()
    assert kernel_cache.ensure_built(ARCH).folder is None
    final.chmod(0o755)
    assert kernel_cache.ensure_built(ARCH).folder == final


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a GPU is here: it would build")
def test_warm_cache_without_a_gpu_says_where_it_is_built(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELGRADER_KERNEL_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "graders", "warm-cache"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "The CuPy kernel cache is built on a GPU host" in done.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("count", "parts"), [(0, 3), (1, 12), (5, 5), (151, 12), (151, 1)])
def test_the_builders_share_out_every_warm_up_step_exactly_once(count: int, parts: int) -> None:
    from graders.run.kernel_cache import share

    dealt = [i for part in range(parts) for i in share(count, part, parts)]
    assert sorted(dealt) == list(range(count))
    sizes = [len(share(count, part, parts)) for part in range(parts)]
    assert max(sizes) - min(sizes) <= 1  # as even as it can be
