"""docker/smoke.sh without running Docker: it is the README's larger setup, command for
command, and it stops at once, with a sentence, where it cannot run. (CI runs it for real.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "docker" / "smoke.sh"


def readme_docker_commands() -> list[str]:
    """The shell block of the README's "With Docker" section, one command per entry."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("### With Docker", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands, pending = [], ""
    for line in block.splitlines():
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line + "\n    "
            continue
        pending = ""
        command = re.sub(r"\s+#\s.*$", "", line).rstrip()
        if command:
            commands.append(command)
    return commands


def test_the_smoke_test_runs_the_readme_commands() -> None:
    smoke = SMOKE.read_text(encoding="utf-8")
    commands = readme_docker_commands()
    assert len(commands) >= 10, commands
    for command in commands:
        if command.startswith(("export COMPOSE_FILE=", "KG=")) or command == "cd docker":
            continue  # the settings the smoke test sets for this machine, checked below
        # The README shows the first submission; the script reads the id it was given.
        command = command.replace("/submissions/1", "/submissions/$id")
        assert command in smoke, f"docker/smoke.sh does not run the README's {command!r}"
    assert "export COMPOSE_FILE=compose.yaml:compose.local.yaml" in smoke
    assert 'KG="http://127.0.0.1:${KERNELGRADER_SMOKE_WEB_PORT:-58000}"' in smoke
    assert 'cd "$(dirname "$0")"' in smoke  # docker/, wherever it is called from


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run the script as nobody")
def test_without_docker_or_root_it_stops_at_once_with_a_sentence() -> None:
    # A copy nobody may read (pytest's own tmp_path is root's alone), and a PATH with the
    # shell's tools but no docker.
    tmp_path = Path(tempfile.mkdtemp(prefix="kernelgrader-smoke-"))
    try:
        check_refusals(tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def check_refusals(tmp_path: Path) -> None:
    copy = tmp_path / "docker"
    shutil.copytree(REPO / "docker", copy, ignore=shutil.ignore_patterns("*.whl", ".env"))
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "dirname", "id", "printf", "timeout", "sleep", "seq", "cat"):
        found = shutil.which(tool)
        assert found, tool
        (tools / tool).symlink_to(found)
    for path in (tmp_path, copy, tools):
        path.chmod(0o755)
    runuser = shutil.which("runuser")
    assert runuser
    done = subprocess.run(
        [
            runuser,
            "-u",
            "nobody",
            "--",
            "/usr/bin/env",
            f"PATH={tools}",
            "bash",
            str(copy / "smoke.sh"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    message = done.stderr.strip()
    assert message.startswith("smoke: FAILED: ") and "needs root" in message, message
    assert "docker.io" in message and "run docker/smoke.sh as root" in message, message
    # With Docker's tools there but no engine it may use, it says that instead.
    if all(shutil.which(tool) for tool in ("docker", "dockerd", "debootstrap")):
        with_docker = subprocess.run(
            [runuser, "-u", "nobody", "--", "bash", str(copy / "smoke.sh")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert with_docker.returncode == 1
        assert "no Docker engine answers" in with_docker.stderr, with_docker.stderr
