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


def test_every_file_a_dockerfile_copies_is_in_the_build_context() -> None:
    """.dockerignore sends only what it names; a COPY of anything else fails the image's build
    (the smoke test found the entrypoint left out). Checked here without Docker."""
    import pathspec

    # Docker, unlike git, lets a pattern bring back a file under a folder left out: patterns
    # one by one, the last that matches deciding (pathspec's basic gitignore patterns).
    ignore = pathspec.PathSpec.from_lines(
        "gitignore", (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    )
    copied = []
    for dockerfile in sorted(DOCKER.glob("*.Dockerfile")):
        for line in dockerfile.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
                copied += [(dockerfile.name, source.rstrip("/")) for source in words[1:-1]]
    assert copied, "no COPY lines read"
    left_out = []
    for dockerfile, source in copied:
        path = REPO / source
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
        sent = [f for f in files if not ignore.match_file(str(f.relative_to(REPO)))]
        if not sent and not (path.is_dir() and source.endswith("wheels")):
            left_out.append(f"{dockerfile}: {source}")
    assert not left_out, f".dockerignore leaves out what these copy: {left_out}"
