"""The README's first command on an empty data folder: first run, then a submission compiles."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.app.conftest import GOOD_KERNEL

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bare_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment without its KERNELGRADER_ settings, the data under tmp_path:
    a fresh install in development, as the README's first command makes one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELGRADER_")}
    env.update(KERNELGRADER_DATA_DIR=str(tmp_path / "var"), KERNELGRADER_RUN_ON_GPU="false")
    env.update(extra)
    return env


@contextmanager
def serving(tmp_path: Path, env: dict[str, str], *options: str) -> Iterator[tuple[str, Path]]:
    """`kernelgrader serve` on a free loopback port in a process of its own, answering its
    health check: its address and its log; stopped (by its own id) when the block ends."""
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port), *options],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield base, log
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_serve_on_an_empty_folder_creates_the_demo_and_compiles_a_submission(
    tmp_path: Path,
) -> None:
    env = bare_environment(tmp_path, KERNELGRADER_BROKER_POLLING_SECONDS="0.1")
    with serving(tmp_path, env) as (base, log):
        deadline = time.monotonic() + 60
        text = log.read_text()
        assert "created the course 'demo'" in text, text
        login = re.search(r"log in as (\S+) with password (\S+)", text)
        token = re.search(r"shown once\):\s+(kg_\S+)", text)
        assert login and token, text
        assert f"{login.group(1)} is also the site administrator" in text
        auth = {"Authorization": f"Bearer {token.group(1)}"}
        labs = httpx.get(f"{base}/api/v1/courses/demo/labs", headers=auth).json()
        assert "vector-scale" in [lab["slug"] for lab in labs]
        source = GOOD_KERNEL.encode()
        r = httpx.post(
            f"{base}/api/v1/courses/demo/labs/vector-scale/submissions",
            headers=auth,
            files={"file": ("scale.cu", source, "text/plain")},
        )
        assert r.status_code == 202, r.text
        detail: dict[str, object] = {}
        while time.monotonic() < deadline:
            detail = httpx.get(f"{base}/api/v1/submissions/{r.json()['id']}", headers=auth).json()
            if detail["status"] not in ("queued", "compiling"):
                break
            time.sleep(0.2)
        # What the server and its worker said, should the submission not get there in time.
        assert detail["status"] == "compiled", (detail, log.read_text()[-3000:])
        assert "waits for a GPU worker" in str(detail["status_message"])
        page = httpx.get(f"{base}/login")
        assert page.status_code == 200 and "csrf_token" in page.text
    # The local worker went down with the server.
    time.sleep(0.5)
    assert "Traceback" not in log.read_text(), log.read_text()
