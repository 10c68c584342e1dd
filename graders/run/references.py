"""The lab's reference kernels, compiled once per process and handed to the run child.

A reference is trusted instructor code: compiled as submissions are, but without the lab's
`requires` (a tiled lab's naive baseline rightly has no shared memory). Compiles are cached per
lab folder, file content and architecture, as in a long-running worker.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
from typing import Any

from graders.results import CompileResult
from graders.spec import LabSpec


def _compile(lab: LabSpec, source: str, **kwargs: Any) -> CompileResult:
    from graders.compile.compiler import compile_submission

    return compile_submission(lab, source, **kwargs)


@functools.lru_cache(maxsize=64)
def _compile_cached(
    lab_folder: str, name: str, digest: str, arch: str | None, line_info: bool
) -> CompileResult:
    from graders.spec import load_lab

    lab = load_lab(lab_folder)
    ref = lab.reference(name)
    lab = dataclasses.replace(lab, requires=[])
    return _compile(
        lab, ref.source, arch=arch, filename=ref.file or f"{name}.cu", line_info=line_info
    )


def compile_reference(lab: LabSpec, name: str, *, arch: str | None = None) -> CompileResult:
    """A reference kernel of `lab`, compiled as submissions are but without `requires`."""
    ref = lab.reference(name)
    digest = hashlib.sha256(ref.source.encode()).hexdigest()
    return _compile_cached(str(lab.folder), name, digest, arch, False)


def needed_references(lab: LabSpec, timing: bool) -> list[str]:
    """The oracle's reference, and with timing every reference the score compares against."""
    names = []
    if lab.expected_oracle.startswith("reference:"):
        names.append(lab.expected_oracle.split(":", 1)[1])
    if timing and lab.timing is not None:
        names += [r.name for r in lab.references if r.name not in names]
    return names


def reference_payloads(lab: LabSpec, arch: str | None, names: list[str]) -> list[dict[str, Any]]:
    """Compiled references for the run child; raises RuntimeError if one does not compile."""
    out: list[dict[str, Any]] = []
    for ref in lab.references:
        if ref.name not in names:
            continue
        if ref.builtin:
            out.append({"name": ref.name, "builtin": ref.builtin})
            continue
        compiled = compile_reference(lab, ref.name, arch=arch)
        if not compiled.ok or compiled.cubin is None:
            raise RuntimeError(
                f"The reference kernel {ref.path_label} of lab {lab.id} does not compile: "
                f"{compiled.message}\n{compiled.log}"
            )
        out.append(
            {
                "name": ref.name,
                "cubin_b64": base64.b64encode(compiled.cubin).decode("ascii"),
                "declarations": compiled.declarations,
            }
        )
    return out
