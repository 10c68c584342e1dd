"""Known-faulty kernels and what their header comments say they must get (interfaces.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from graders.spec import builtin_labs_dir, list_builtin_labs

HEADER_LINE = re.compile(r"^//\s*(?P<key>[a-z-]+):\s*(?P<value>.+?)\s*$")
COMPILE_VERDICTS = {
    "compile_error", "missing_kernel", "bad_declaration", "forbidden_include", "timeout",
    "resource_limit",
}  # fmt: skip
SANITIZER_FINDINGS = {"out_of_bounds", "shared_memory_race", "divergent_barrier"}


@dataclass(frozen=True)
class Expectation:
    lab: str
    path: Path
    verdict: str
    fail_case: str | None
    pass_case: str | None
    finding: str | None
    message: str | None

    @property
    def id(self) -> str:
        return f"{self.lab}/{self.path.name}"

    @property
    def compile_stage(self) -> bool:
        return self.verdict in COMPILE_VERDICTS and self.fail_case is None


def read_expectation(lab: str, path: Path) -> Expectation:
    fields: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = HEADER_LINE.match(line)
        if not m:
            break
        fields[m["key"]] = m["value"]
    return Expectation(
        lab=lab,
        path=path,
        verdict=fields["expect-verdict"],
        fail_case=fields.get("expect-fail-case"),
        pass_case=fields.get("expect-pass-case"),
        finding=fields.get("expect-finding"),
        message=fields.get("expect-message"),
    )


def all_expectations() -> list[Expectation]:
    out = []
    for lab in list_builtin_labs():
        folder = builtin_labs_dir() / lab / "faulty"
        for path in sorted(folder.glob("*.cu")) if folder.is_dir() else []:
            out.append(read_expectation(lab, path))
    return out
