"""The README's `kernelgrader ...` commands after its two commands, from any directory: the
command is on PATH once the README's activate line ran, the data folder does not follow the
working directory, and a command never starts a second, empty database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.settings import checkout_root

ROOT = Path(__file__).resolve().parents[2]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELGRADER_")}
    env.update(extra)
    return env


def test_the_default_data_folder_is_the_checkouts_var_from_any_directory(tmp_path: Path) -> None:
    assert checkout_root() == ROOT
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "from app.core.settings import get_settings as g; print(g().data_dir)",
        ],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(shown) == ROOT / "var"
    assert not (tmp_path / "var").exists()


def test_a_command_refuses_to_start_an_empty_database_and_names_it(tmp_path: Path) -> None:
    data = tmp_path / "elsewhere"
    env = _clean_env(KERNELGRADER_DATA_DIR=str(data))
    for args in (
        ["status"],
        ["course", "create", "x1"],
        ["lab", "remove", "demo", "hadamard"],
        ["worker"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        said = " ".join(done.stderr.split())
        assert f"There is no kernelgrader database at {data / 'kernelgrader.sqlite'}" in said
        assert "KERNELGRADER_DATA_DIR" in said
        assert not (data / "kernelgrader.sqlite").exists(), args
    # `lab check` reads a folder only, and `db upgrade` makes the database on purpose.
    folder = ROOT / "reference_kernels" / "hadamard"
    check = subprocess.run(
        [sys.executable, "-m", "app.cli", "lab", "check", str(folder), "--no-gpu"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "There is no kernelgrader database" not in check.stderr
    subprocess.run(
        [sys.executable, "-m", "app.cli", "db", "upgrade"], cwd=tmp_path, env=env, check=True
    )
    status = subprocess.run(
        [sys.executable, "-m", "app.cli", "status"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    assert "Workers:" in status.stdout


def _cli_block() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### CLI", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_puts_kernelgrader_on_path_before_using_it() -> None:
    lines = _cli_block()
    first = lines[0].split("#")[0].strip()
    assert first == "source .venv/bin/activate", lines[0]
    if not (ROOT / ".venv" / "bin" / "kernelgrader").exists():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(".venv/bin/kernelgrader is missing: scripts/setup.sh did not run")
        pytest.skip("no .venv here (scripts/setup.sh makes it)")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    found = subprocess.run(
        ["bash", "-c", f"{first} && command -v kernelgrader && kernelgrader --help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0] == str(ROOT / ".venv" / "bin" / "kernelgrader")
    assert "serve" in found.stdout
