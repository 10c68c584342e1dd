"""docker/smoke.sh without running Docker: it is the README's larger setup, command for
command, and it stops at once, with a sentence, where it cannot run. (CI runs it for real.)
Under CI these tests fail rather than skip where root or Docker's tools are missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.ci import skip_unless_ci

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


def needs_root() -> None:
    if os.geteuid() != 0:
        skip_unless_ci("needs root, to run the script as nobody")


def docker_tools_missing() -> list[str]:
    """What docker/smoke.sh would install before it asks for an engine (none: nothing)."""
    missing = [tool for tool in ("docker", "dockerd", "debootstrap") if not shutil.which(tool)]
    has_compose = shutil.which("docker-compose") or (
        shutil.which("docker")
        and subprocess.run(
            ["docker", "compose", "version"], capture_output=True, timeout=60
        ).returncode
        == 0
    )
    return missing + ([] if has_compose else ["docker compose"])


def test_without_docker_or_root_it_stops_at_once_with_a_sentence() -> None:
    needs_root()
    with copy_of_docker() as copy:
        # A PATH with the shell's tools but no docker.
        tools = copy.parent / "bin"
        tools.mkdir()
        for tool in ("bash", "dirname", "id", "printf", "timeout", "sleep", "seq", "cat"):
            found = shutil.which(tool)
            assert found, tool
            (tools / tool).symlink_to(found)
        tools.chmod(0o755)
        done = as_nobody(copy, f"PATH={tools}")
    assert done.returncode == 1
    message = done.stderr.strip()
    assert message.startswith("smoke: FAILED: ") and "needs root" in message, message
    assert "docker.io" in message and "run docker/smoke.sh as root" in message, message


def test_with_dockers_tools_but_no_engine_it_may_use_it_says_so() -> None:
    needs_root()
    missing = docker_tools_missing()
    if missing:
        skip_unless_ci(
            f"{', '.join(missing)} not installed: `docker/smoke.sh --tools` (as root) installs "
            "Docker's tools from Debian's packages, as .ci/run does before the tests"
        )
    with copy_of_docker() as copy:
        done = as_nobody(copy, f"PATH={os.environ['PATH']}")
    assert done.returncode == 1
    assert "no Docker engine answers" in done.stderr, done.stderr
    assert "run docker/smoke.sh as root" in done.stderr, done.stderr


@contextmanager
def copy_of_docker() -> Iterator[Path]:
    """docker/ copied where nobody may read it (pytest's own tmp_path is root's alone)."""
    tmp_path = Path(tempfile.mkdtemp(prefix="kernelgrader-smoke-"))
    try:
        copy = tmp_path / "docker"
        shutil.copytree(REPO / "docker", copy, ignore=shutil.ignore_patterns("*.whl", ".env"))
        for path in (tmp_path, copy):
            path.chmod(0o755)
        yield copy
    finally:
        shutil.rmtree(tmp_path)


def as_nobody(copy: Path, path_setting: str) -> subprocess.CompletedProcess[str]:
    runuser = shutil.which("runuser")
    assert runuser, "runuser (util-linux) is missing"
    return subprocess.run(
        [
            runuser,
            "-u",
            "nobody",
            "--",
            "/usr/bin/env",
            path_setting,
            "bash",
            str(copy / "smoke.sh"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_smoke_tools_only_installs_and_stops() -> None:
    smoke = SMOKE.read_text(encoding="utf-8")
    # .ci/run installs Docker's tools before the tests, so the test above runs under CI.
    assert 'if [ "${1:-}" = --tools ]; then' in smoke
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.index("docker/smoke.sh --tools") < ci.index("./scripts/test.sh")
