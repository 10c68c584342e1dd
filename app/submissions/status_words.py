"""The words a person reads for a submission's status, in one table.

A status missing here (a phase added later, say `timing` or `sanitizer`) still reads well: its
value with spaces, capitalised, and the tone of an unfinished status. Add a line to word it.
"""

from __future__ import annotations

from app.submissions.models import Status

STATUS_WORDS: dict[str, str] = {
    Status.queued.value: "Queued",
    Status.compiling.value: "Compiling",
    Status.compile_error.value: "Compile error",
    Status.compiled.value: "Compiled, waiting for a GPU",
    Status.running.value: "Running the test cases",
    Status.timing.value: "Verdicts in; timing",
    Status.sanitizer.value: "Verdicts in; checking with the sanitizer",
    Status.graded.value: "Graded",
    Status.error.value: "Failed on our side",
}

# How a badge looks: done, failed, waiting (for something outside the queue) or busy.
STATUS_TONES: dict[str, str] = {
    Status.graded.value: "done",
    Status.compile_error.value: "failed",
    Status.error.value: "failed",
    Status.compiled.value: "waiting",
}


def _value(status: object) -> str:
    return str(getattr(status, "value", status))


def status_word(status: object) -> str:
    value = _value(status)
    return STATUS_WORDS.get(value) or value.replace("_", " ").capitalize()


def status_tone(status: object) -> str:
    return STATUS_TONES.get(_value(status), "busy")
