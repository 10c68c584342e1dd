"""What `lab check` found: one item per check, and a summary sentence."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

OK, FAIL, WARN, SKIP = "ok", "fail", "warn", "skip"


@dataclass(frozen=True)
class CheckItem:
    status: str  # ok, fail, warn, skip
    subject: str  # "spec", "oracle.py", "reference naive.cu", "faulty/off_by_one.cu", "GPU"
    message: str


@dataclass
class LabCheckReport:
    folder: Path
    lab_id: str = ""
    items: list[CheckItem] = field(default_factory=list)
    progress: Callable[[CheckItem], None] | None = None  # told of each item as it is found

    @property
    def ok(self) -> bool:
        return not any(item.status == FAIL for item in self.items)

    @property
    def failures(self) -> list[CheckItem]:
        return [item for item in self.items if item.status == FAIL]

    def add(self, status: str, subject: str, message: str) -> None:
        item = CheckItem(status, subject, message)
        self.items.append(item)
        if self.progress is not None:
            self.progress(item)

    def lines(self) -> list[str]:
        return [f"  {i.status:<4}  {i.subject}: {i.message}" for i in self.items]

    def summary(self) -> str:
        failed = self.failures
        if failed:
            return (
                f"{len(failed)} check{'s' if len(failed) != 1 else ''} failed for "
                f"{self.lab_id or self.folder.name}; fix {'them' if len(failed) > 1 else 'it'} "
                "and run `kernelgrader lab check` again."
            )
        ran = any(i.subject.startswith(("run ", "GPU")) and i.status == OK for i in self.items)
        where = "all checks, on a GPU" if ran else "the checks that need no GPU"
        return f"The lab {self.lab_id} passed {where}."
