"""The worker image shares the host's GPU lock folder and keeps its CuPy kernel cache built:
what compose mounts, and the entrypoint run for real (as root, dropping to another user)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from graders.gpu import HOST_LOCK_DIRS
from tests.ci import skip_unless_ci

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"


def test_compose_mounts_the_hosts_lock_folder_and_keeps_the_kernel_cache() -> None:
    compose = (DOCKER / "compose.yaml").read_text(encoding="utf-8")
    worker = compose.split("\n  worker:\n", 1)[1].split("\nvolumes:\n", 1)[0]
    lock = str(HOST_LOCK_DIRS[0])  # where a worker outside Docker takes its locks too
    assert f"- ${{KERNELGRADER_HOST_LOCK_DIR:-{lock}}}:{lock}\n" in worker
    assert "- kernelcache:/var/cache/kernelgrader\n" in worker
    assert "kernelcache:" in compose.split("\nvolumes:\n", 1)[1]
    image = (DOCKER / "worker.Dockerfile").read_text(encoding="utf-8")
    assert "KERNELGRADER_KERNEL_CACHE_DIR=/var/cache/kernelgrader" in image
    assert 'ENTRYPOINT ["/usr/local/bin/kernelgrader-worker-entrypoint"]' in image
    assert "COPY docker/worker-entrypoint.sh /usr/local/bin/kernelgrader-worker-entrypoint" in image
    assert "python3 -m graders warm-cache" in (DOCKER / "worker-entrypoint.sh").read_text()


def test_the_entrypoint_readies_the_shared_folders_then_runs_the_command_as_the_worker() -> None:
    if os.geteuid() != 0:
        skip_unless_ci("needs root, as the image's entrypoint starts")
    runuser = shutil.which("runuser")
    assert runuser, "runuser (util-linux) is missing"
    tmp = Path(tempfile.mkdtemp(prefix="kernelgrader-entrypoint-"))
    try:
        tmp.chmod(0o755)
        script = tmp / "entrypoint.sh"
        shutil.copy(DOCKER / "worker-entrypoint.sh", script)
        script.chmod(0o755)
        locks, cache = tmp / "run-lock" / "kernelgrader", tmp / "cache"
        env = {
            "PATH": "/usr/bin:/bin",  # no nvidia-smi: no GPU, so no cache to build
            "KERNELGRADER_LOCK_DIR": str(locks),
            "KERNELGRADER_KERNEL_CACHE_DIR": str(cache),
            "KERNELGRADER_USER": "nobody",
        }
        done = subprocess.run(
            [str(script), "id", "-un"], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "nobody"  # the command ran as the worker's user
        assert locks.stat().st_mode & 0o7777 == 0o1777
        assert cache.stat().st_uid == int(
            subprocess.run(["id", "-u", "nobody"], capture_output=True, text=True).stdout
        )
        assert cache.stat().st_mode & 0o777 == 0o755
    finally:
        shutil.rmtree(tmp)
