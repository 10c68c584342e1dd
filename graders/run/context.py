"""What the run child holds while it grades one submission: the lab, the loaded kernels, notes."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from graders.run.harness import Functions, load_kernels
from graders.spec import LabSpec


@dataclass
class Kernel:
    """A submission's or a reference's kernels (one function per kernel the lab names), and the
    declarations its launch geometry depends on; a built-in reference has no functions."""

    name: str
    funcs: Functions
    declarations: dict[str, int]
    builtin: str = ""


@dataclass
class Context:
    lab: LabSpec
    submission: Kernel
    references: dict[str, Kernel]
    max_shared: int
    log: list[str] = field(default_factory=list)


def load(entry: dict[str, Any], lab: LabSpec) -> Kernel:
    """A compiled entry of the run payload ({name, cubin_b64, declarations} or {name,
    builtin}), loaded: every kernel of the lab from its cubin."""
    if entry.get("builtin"):
        return Kernel(entry["name"], {}, {}, builtin=entry["builtin"])
    cubin = base64.b64decode(entry["cubin_b64"])
    return Kernel(
        entry["name"], load_kernels(cubin, lab.kernels), dict(entry.get("declarations", {}))
    )
