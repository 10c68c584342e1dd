"""The sentence a student reads for the case a child was running when it was stopped."""

from __future__ import annotations

import pytest

from graders.run.harness import as_printing_hang, hang_message
from graders.run.stage import FLOOD_BYTES, killed_message
from graders.sandbox.runner import SandboxOutcome
from graders.spec import load_builtin_lab


def _outcome(
    *, timed_out: bool = True, printed: int = 0, reason: str = "timeout"
) -> SandboxOutcome:
    return SandboxOutcome(
        ok=False,
        value=None,
        reason=reason,
        message="",
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
