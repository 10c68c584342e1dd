"""The engine's settings for its own command line: the service's variables, from the
environment or a `.env` file, with the service's defaults; numbers that are not numbers read
as the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.config import (
    DEFAULT_GPU_JOBS,
    DEFAULT_RESERVE_MB,
    DEV_GRADING_SECRET,
    FALLBACK_ARCH,
    EngineSettings,
)


def test_defaults_where_nothing_is_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert EngineSettings.from_environment({}) == EngineSettings(
        DEV_GRADING_SECRET, FALLBACK_ARCH, DEFAULT_RESERVE_MB, DEFAULT_GPU_JOBS
    )


def test_the_environment_wins_over_a_dotenv_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        "# the install's settings\n"
        "export KERNELGRADER_GRADING_SECRET='from-the-file'\n"
        'KERNELGRADER_DEFAULT_ARCH="sm_80"\n'
        "KERNELGRADER_GPU_JOBS=many\n"
        "OTHER=ignored\n",
        encoding="utf-8",
    )
    from_file = EngineSettings.from_environment({})
    assert from_file.grading_secret == "from-the-file" and from_file.default_arch == "sm_80"
    assert from_file.gpu_jobs == DEFAULT_GPU_JOBS  # not a number: the default
    both = EngineSettings.from_environment(
        {"KERNELGRADER_GRADING_SECRET": "from-the-environment", "KERNELGRADER_GPU_JOBS": "0"}
    )
    assert (both.grading_secret, both.default_arch, both.gpu_jobs) == (
        "from-the-environment",
        "sm_80",
        0,
    )


def test_the_lab_check_compiles_for_the_arch_it_is_told_not_the_environments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graders.gpu import detect_arch
    from graders.labcheck import check_lab
    from graders.spec import builtin_labs_dir

    if detect_arch():
        pytest.skip("this host's GPU names the architecture; the fallback is not used here")
    monkeypatch.setenv("KERNELGRADER_DEFAULT_ARCH", "sm_75")
    report = check_lab(
        builtin_labs_dir() / "array-sum", run=False, engine=EngineSettings(default_arch="sm_80")
    )
    compiled = [item.message for item in report.items if item.message.startswith("compiles for")]
    assert compiled and all(message == "compiles for sm_80" for message in compiled), compiled
