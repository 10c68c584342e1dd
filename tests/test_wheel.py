"""The package as an admin installs it: a wheel built from the repository, in a fresh venv,
used from a directory that is not the checkout. No CUDA extra: the web side serves alone and
says why, the worker refuses to start in a sentence, and an upload waits in the queue."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import zipfile
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory

from graders.spec import list_builtin_labs

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SOURCES = [
    "pyproject.toml",
    "setup.py",
    "README.md",
    "app",
    "migrations",
    "graders",
    "reference_kernels",
]
KERNEL = b"""extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float f)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = f * src[i];
}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs
    )  # type: ignore[call-overload]
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_wheel_installs_and_runs_every_command_from_any_directory(tmp_path: Path) -> None:
    # A copy of the tracked sources, so nothing the checkout built before (build/, egg-info)
    # can slip into the wheel.
    src = tmp_path / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", src)
    (wheel,) = (tmp_path / "dist").glob("kernelgrader-*.whl")
    # The top-level migrations/ travels inside the package, every revision of it.
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n for n in archive.namelist() if n.startswith("app/migrations/")}
        # The sanitizer's launcher is built from its source where the package is installed.
        assert "graders/sanitizer/launcher.c" in archive.namelist()
    in_checkout = {
        f"app/migrations/{p.relative_to(REPO / 'migrations').as_posix()}"
        for p in [
            *(REPO / "migrations").glob("*.py"),
            REPO / "migrations" / "script.py.mako",
            *(REPO / "migrations" / "versions").glob("*.py"),
        ]
    }
    assert any("/versions/" in name for name in in_checkout)
    assert shipped == in_checkout, sorted(shipped ^ in_checkout)
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", wheel)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KERNELGRADER_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        KERNELGRADER_DATA_DIR=str(tmp_path / "var"),
        KERNELGRADER_BROKER_POLLING_SECONDS="0.1",
    )

    def kernelgrader(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(venv / "bin" / "kernelgrader"), *args],
            capture_output=True,
            text=True,
            cwd=elsewhere,
            env=env,
            timeout=120,
        )
        if check:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    where = run(
        venv / "bin" / "python",
        "-c",
        "import app, graders, reference_kernels; print(app.__file__, graders.__file__)",
        cwd=elsewhere,
        env=env,
    )
    assert str(REPO) not in where.stdout and str(venv) in where.stdout, where.stdout

    assert "newest schema" in kernelgrader("db", "upgrade").stdout
    with closing(sqlite3.connect(tmp_path / "var" / "kernelgrader.sqlite")) as db:
        reached = db.execute("SELECT version_num FROM alembic_version").fetchall()
    head = ScriptDirectory(str(REPO / "migrations")).get_current_head()
    assert reached == [(head,)], (reached, head)

    refused = kernelgrader("worker", check=False)
    assert refused.returncode == 1
    message = (refused.stdout + refused.stderr).strip()
    assert "cannot compile kernels" in message, message
    assert "pip install 'kernelgrader[cuda13]'" in message and "cuda12" in message
    assert "Traceback" not in message and len(message.splitlines()) == 1, message

    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(venv / "bin" / "kernelgrader"), "serve", "--port", str(port)],
            cwd=elsewhere,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        text = log.read_text()
        assert "No local worker was started" in text and "kernelgrader[cuda13]" in text, text
        token = re.search(r"shown once\):\s+(kg_\S+)", text)
        assert token, text
        auth = {"Authorization": f"Bearer {token.group(1)}"}
        labs = httpx.get(f"{base}/api/v1/courses/demo/labs", headers=auth).json()
        # Every built-in lab of the checkout travelled inside the wheel.
        assert sorted(lab["slug"] for lab in labs) == list_builtin_labs()
        r = httpx.post(
            f"{base}/api/v1/courses/demo/labs/vector-scale/submissions",
            headers=auth,
            files={"file": ("scale.cu", KERNEL, "text/plain")},
        )
        assert r.status_code == 202, r.text
        time.sleep(1)
        detail = httpx.get(f"{base}/api/v1/submissions/{r.json()['id']}", headers=auth).json()
        # Nobody can compile it: it waits, and says why, instead of ending in `error`.
        assert detail["status"] == "queued", detail
        assert "The grader is not running at the moment" in detail["status_message"]
        # The token is the instructor's: the staff's note says what to start.
        assert "No grading worker has been heard from" in detail["staff_note"]
        health = httpx.get(f"{base}/api/v1/health").json()
        assert health["grading"].startswith("No worker that can compile"), health
        page = httpx.get(f"{base}/login")
        assert page.status_code == 200 and "csrf_token" in page.text  # templates ship
        book = kernelgrader("gradebook", "export", "demo")
        assert book.stdout.startswith("student_id,name,email")
        assert "Queue: 1 queued" in kernelgrader("status").stdout
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "Traceback" not in log.read_text(), log.read_text()
