"""How ncu is found and called, and what its output says (no GPU needed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from graders.profile import tool


def test_the_command_profiles_only_the_labs_kernels_in_the_profiler_range() -> None:
    cmd = tool.command(
        "/opt/ncu",
        report="/w/report",
        kernels=["scan_blocks", "add.offsets"],
        launches=3,
        source_folder="/w/src",
        target=["python", "-m", "graders.profile.target", "job", "result"],
    )
    joined = " ".join(cmd)
    assert cmd[0] == "/opt/ncu"
    # The clocks stay as they are: a shared GPU's other gradings never see them locked.
    assert "--clock-control none" in joined
    assert "--profile-from-start off" in joined
    assert "--kernel-name regex:^(scan_blocks|add\\.offsets)$" in joined
    assert "--launch-count 3" in joined
    assert cmd[-5:] == ["python", "-m", "graders.profile.target", "job", "result"]
    for section in tool.SECTIONS:
        assert f"--section {section}" in joined


def test_launches_are_capped() -> None:
    cmd = tool.command("ncu", report="r", kernels=["k"], launches=500, source_folder=".", target=[])
    assert cmd[cmd.index("--launch-count") + 1] == str(tool.MAX_LAUNCHES)


def test_refused_counters_and_the_version_are_read_from_the_output() -> None:
    refused = (
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
        "Performance Counters on the target device 0."
    )
    assert tool.counters_refused(refused)
    assert not tool.counters_refused("==PROF== Disconnected from process 768")
    version = "NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (build 3639)"
    assert tool.version_of(version) == "2025.3.1.0"


def test_without_ncu_the_reason_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KERNELGRADER_NCU", str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(tool, "_KNOWN", ())
    assert tool.executable() is None
    assert tool.unavailable_reason() == tool.NOT_INSTALLED


def test_a_configured_ncu_is_used_and_a_mig_slice_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    program = tmp_path / "ncu"
    program.write_text("#!/bin/sh\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("KERNELGRADER_NCU", str(program))
    assert tool.executable() == str(program)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4b1c2d3e-0000-1111-2222-333344445555")
    assert tool.unavailable_reason() == tool.MIG_SLICE


def test_the_reader_beside_ncu_is_found(tmp_path: Path) -> None:
    install = tmp_path / "nsight-compute-2025.3.1"
    (install / "extras" / "python").mkdir(parents=True)
    (install / "extras" / "python" / "ncu_report.py").write_text("")
    program = install / "ncu"
    program.write_text("")
    wrapper_dir = tmp_path / "bin"
    wrapper_dir.mkdir()
    os.symlink(program, wrapper_dir / "ncu")
    assert tool.reader_folders(str(wrapper_dir / "ncu")) == [str(install / "extras" / "python")]
    assert tool.reader_folders(None) == []


def _install(root: Path, version: str) -> Path:
    folder = root / version / "extras" / "python"
    folder.mkdir(parents=True)
    (folder / "ncu_report.py").write_text("")
    (root / version / "ncu").write_text("")
    return folder


def test_the_reader_of_the_install_a_wrapper_script_runs_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/usr/local/cuda/bin/ncu as the CUDA toolkit ships it: a script that runs the ncu of
    /opt/nvidia/nsight-compute/<version>, which realpath does not reach."""
    opt = tmp_path / "opt" / "nvidia" / "nsight-compute"
    reader = _install(opt, "2025.3.1")
    monkeypatch.setattr(tool, "INSTALL_ROOTS", ())  # found through the script alone
    wrapper = tmp_path / "cuda" / "bin" / "ncu"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{opt}/2025.3.1/ncu" "$@"\n')
    assert tool.reader_folders(str(wrapper)) == [str(reader)]


def test_every_version_under_nvidias_install_folder_is_tried_newest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opt = tmp_path / "nsight-compute"
    older, newer = _install(opt, "2024.1.0"), _install(opt, "2025.10.2")
    monkeypatch.setattr(tool, "INSTALL_ROOTS", (str(opt),))
    program = tmp_path / "bin" / "ncu"
    program.parent.mkdir()
    program.write_bytes(b"\x7fELF not a script")
    assert tool.reader_folders(str(program)) == [str(newer), str(older)]
