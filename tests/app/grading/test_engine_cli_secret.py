"""`python -m graders grade` draws the hidden cases a worker of the same install draws: the same
grading secret, from the same setting, whether the install sets one or runs on the development
default. (It used the cookie-signing key before, so its hidden cases were never the worker's.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.settings import Settings
from graders.run.inputs import case_seeds
from graders.spec import load_builtin_lab

REPO = Path(__file__).resolve().parents[3]
LAB = "array-sum"  # it has hidden cases


def cli_hidden_seeds(environ: dict[str, str], cwd: Path) -> dict[str, int]:
    """The hidden cases' seeds in the engine's command line's report (no GPU is needed: the
    cases it cannot run are listed with their seeds)."""
    done = subprocess.run(
        [sys.executable, "-m", "graders", "grade", LAB, "kernel.cu", "--json"],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout, done.stderr
    cases = json.loads(done.stdout)["cases"]
    return {case["name"]: case["seed"] for case in cases if case["hidden"]}


@pytest.mark.parametrize("secret", [None, "this-install-s-own-grading-secret"])
def test_the_command_line_draws_the_hidden_cases_a_worker_draws(
    secret: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (REPO / "reference_kernels" / LAB / "shared_tree.cu").read_text(encoding="utf-8")
    (tmp_path / "kernel.cu").write_text(source, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KERNELGRADER_")}
    environ["PYTHONPATH"] = str(REPO)
    # The worker's settings, read as a worker reads them, from the same environment.
    for name in [k for k in os.environ if k.startswith("KERNELGRADER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("KERNELGRADER_ENV", "development")
    monkeypatch.setenv("KERNELGRADER_DATA_DIR", str(tmp_path))
    environ["KERNELGRADER_ENV"] = "development"
    if secret is not None:
        monkeypatch.setenv("KERNELGRADER_GRADING_SECRET", secret)
        environ["KERNELGRADER_GRADING_SECRET"] = secret
    worker = Settings()
    lab = load_builtin_lab(LAB)
    # What the worker seeds its run with (app.grading.worker passes its grading secret).
    drawn = case_seeds(lab, worker.grading_secret)
    expected = {case.name: drawn[case.name] for case in lab.cases if case.hidden}
    assert expected, f"{LAB} has no hidden case to compare"
    assert cli_hidden_seeds(environ, tmp_path) == expected
