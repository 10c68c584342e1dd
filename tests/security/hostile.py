"""Hostile kernels in tests/security/kernels/: their header comments say what they must get.

Header lines (interfaces.md's format, plus the lines these files need):
    // lab: vector-scale                 the built-in lab the kernel is submitted to
    // stage: compile | run              where the defence acts
    // expect-verdict: timeout | resource_limit   one verdict, or alternatives joined by '|';
                                         `ok` (compile stage): a tricky but legitimate file
                                         that must compile (expect-message then reads the
                                         message and the warnings)
    // expect-declarations: TILE=16      optional (compile stage, ok): the values the grader
                                         launches with
    // expect-message: did not finish    optional; a substring of the message (any case); messages
                                         show no absolute path (`/etc/passwd` reads `.../passwd`)
    // timing: on                        optional; grade with the timed repetitions
    // case-seconds: 10                  optional; the small lab's case limit (2 s without it)
    // expect-stdout: dropped            optional; a substring of the captured kernel output
    // health-check: no                  optional; a kernel_error here need not make the worker
                                         check the GPU (the context survives it)
    // sanitizer: on                     optional; run compute-sanitizer on the lab's small case
    // test: dedicated (tests/...py)     optional; a test of its own grades it (with a lab made
                                         for it), not the generic run-stage test
    // why: ...                          what the kernel tries
"""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from graders.spec import LabSpec, load_builtin_lab, load_lab

KERNELS_DIR = Path(__file__).parent / "kernels"

# Text that would show a host file (or the worker's environment) leaking into what a student sees.
HOST_FILE_MARKERS = ("root:x:0:0", "root:*:", "root:!", "daemon:x:", "nologin", "PATH=/")


@dataclass(frozen=True)
class HostileKernel:
    path: Path
    lab: str
    stage: str
    verdicts: tuple[str, ...]
    message: str
    timing: bool
    stdout: str
    health_check: bool
    sanitizer: bool
    case_seconds: float
    why: str
    source: str
    dedicated: str = ""  # the test that grades it, where a generic run would not show the class
    declarations: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.stem


def load(path: Path) -> HostileKernel:
    # Bytes as stored: a file saved with CRLF line ends or a byte-order mark keeps them.
    source = path.read_bytes().decode("utf-8")
    header: dict[str, str] = {}
    for line in source.removeprefix("\ufeff").splitlines():
        if not line.startswith("//"):
            break
        key, sep, value = line[2:].partition(":")
        if sep:
            header.setdefault(key.strip(), value.strip())
    return HostileKernel(
        path=path,
        lab=header.get("lab", ""),
        stage=header.get("stage", ""),
        verdicts=tuple(v.strip() for v in header.get("expect-verdict", "").split("|") if v.strip()),
        message=header.get("expect-message", ""),
        timing=header.get("timing", "off") == "on",
        stdout=header.get("expect-stdout", ""),
        health_check=header.get("health-check", "yes") != "no",
        sanitizer=header.get("sanitizer", "off") == "on",
        case_seconds=float(header.get("case-seconds", "2")),
        why=header.get("why", ""),
        source=source,
        dedicated=header.get("test", "").removeprefix("dedicated").strip(" ()"),
        declarations={
            name.strip(): int(value)
            for name, _, value in (
                item.partition("=") for item in header.get("expect-declarations", "").split(",")
            )
            if name.strip()
        },
    )


def all_kernels() -> list[HostileKernel]:
    return [load(p) for p in sorted(KERNELS_DIR.glob("*.cu"))]


def leaked_host_text(text: str) -> list[str]:
    return [marker for marker in HOST_FILE_MARKERS if marker in text]


def small_lab(
    lab_id: str, workdir: Path, *, case_seconds: float = 2.0, sanitizer: bool = False
) -> LabSpec:
    """A copy of the lab with two small cases and a short case limit: hostile runs end quickly.

    The run stage's child reads the lab from its folder, so the copy's lab.toml carries the
    shorter limit and a timing case among the kept ones. With `sanitizer`, the lab's sanitizer
    case is one of the two and compute-sanitizer is on.
    """
    source = load_builtin_lab(lab_id)
    small = sorted(
        (c for c in source.cases if math.prod(c.sizes.values()) <= 1 << 21),
        key=lambda c: math.prod(c.sizes.values()),
    )[-2:]
    if sanitizer and source.sanitizer_case not in {c.name for c in small}:
        small = [c for c in small if c.name != source.sanitizer_case][-1:]
        small.insert(0, source.case(str(source.sanitizer_case)))
    folder = workdir / lab_id  # the loader wants the folder named as the lab
    shutil.copytree(source.folder, folder)
    spec = (folder / "lab.toml").read_text(encoding="utf-8")
    spec = re.sub(r"(?m)^case_seconds\s*=.*$", f"case_seconds = {case_seconds}", spec)
    spec = re.sub(r'(?m)^case\s*=\s*".*"$', f'case = "{small[-1].name}"', spec)
    spec = re.sub(r"(?m)^budget_seconds\s*=.*$", "budget_seconds = 0.5", spec)
    spec = re.sub(r"(?m)^max_reps\s*=.*$", "max_reps = 50", spec)
    if sanitizer:
        spec = re.sub(r"(?m)^sanitizer\s*=.*$", "sanitizer = true", spec)
    (folder / "lab.toml").write_text(spec, encoding="utf-8")
    lab = load_lab(folder)
    return dataclasses.replace(lab, cases=[lab.case(c.name) for c in small])
