"""The sentence a student reads for the case a child was running when it was stopped."""

from __future__ import annotations

import pytest

from graders.run.harness import as_printing_hang, hang_message
from graders.run.stage import FLOOD_BYTES, killed_message
from graders.sandbox.runner import SandboxLimits, SandboxOutcome, printing_message
from graders.spec import load_builtin_lab


def _outcome(
    *, timed_out: bool = True, printed: int = 0, reason: str = "timeout", message: str = ""
) -> SandboxOutcome:
    return SandboxOutcome(
        ok=False,
        value=None,
        reason=reason,
        message=message,
        exit_code=None,
        signal=9,
        timed_out=timed_out,
        stdout="",
        stdout_truncated=printed > 0,
        seconds=2.0,
        stdout_total=printed,
    )


@pytest.mark.parametrize(
    ("printed", "says"),
    [
        (0, "an endless loop"),
        (4096, "printed as it ran"),
        (FLOOD_BYTES + 1, "MiB of output"),
    ],
)
def test_a_timeout_names_what_the_kernel_was_doing(printed: int, says: str) -> None:
    lab = load_builtin_lab("vector-scale")
    verdict, sentence = killed_message(_outcome(printed=printed), lab)
    assert verdict == "timeout"
    assert says in sentence
    assert f"{lab.limits.case_seconds:g} s" in sentence
    assert sentence.endswith(".")


def test_a_crash_is_a_kernel_error_whatever_it_printed() -> None:
    lab = load_builtin_lab("vector-scale")
    verdict, sentence = killed_message(
        _outcome(timed_out=False, printed=4096, reason="crashed"), lab
    )
    assert verdict == "kernel_error"
    assert "printed" not in sentence


def test_a_hang_the_child_reported_is_told_that_the_kernel_printed() -> None:
    # The child stops a hung kernel itself and cannot see its own output; the parent can.
    assert as_printing_hang(hang_message(2.0)) == hang_message(2.0, printed=True)
    assert "printed as it ran" in hang_message(2.0, printed=True)
    other = "dst differs from the expected answer at index 3."
    assert as_printing_hang(other) == other


def test_a_child_stopped_for_printing_gives_its_case_a_verdict_that_names_the_printing() -> None:
    lab = load_builtin_lab("vector-scale")
    limits = SandboxLimits(wall_seconds=60, cpu_seconds=60, memory_mb=512)
    said = printing_message(limits, "bytes", 9 << 20)
    verdict, sentence = killed_message(
        _outcome(timed_out=False, printed=9 << 20, reason="printing", message=said), lab
    )
    assert verdict == "output_limit"
    assert sentence.startswith("Stopped for printing: 9.0 MiB of output, more than the limit")
    assert "remove the printf calls" in sentence and sentence.endswith(".")
    assert "GPU" not in sentence and "crash" not in sentence
