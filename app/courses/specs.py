"""Finding a lab's spec: a built-in lab id or a lab folder, through graders.spec."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.errors import Invalid, NotFound
from graders.spec import LabSpecError, builtin_labs_dir, load_builtin_lab, load_lab
from graders.spec import list_builtin_labs as _list

if TYPE_CHECKING:
    from app.courses.models import Lab
    from graders.spec import LabSpec


def list_builtin_labs() -> list[str]:
    return _list()


@functools.cache
def _load(builtin_id: str | None, folder: str | None, digest: str = "") -> LabSpec:
    """Loaded once per process for each recorded digest: `lab update` records a new digest when
    it re-reads a changed folder, and every process then loads it afresh."""
    try:
        if builtin_id:
            return load_builtin_lab(builtin_id)
        assert folder is not None
        return load_lab(Path(folder))
    except LabSpecError as exc:
        raise Invalid(f"The lab spec is malformed: {exc}") from exc
    except (FileNotFoundError, KeyError) as exc:
        raise NotFound(
            f"The lab {builtin_id or folder} was not found ({exc}); "
            "check the built-in lab id or the folder."
        ) from exc


def resolve_lab_ref(ref: str) -> tuple[str | None, str | None, LabSpec]:
    """A lab reference is a built-in id (`matmul-tiled`) or a path to a lab folder."""
    path = Path(ref)
    if path.is_dir():
        folder = str(path.resolve())
        return None, folder, _load(None, folder)
    if ref not in list_builtin_labs():
        raise NotFound(
            f"'{ref}' is neither a lab folder nor a built-in lab; built-in labs are: "
            + ", ".join(list_builtin_labs())
            + "."
        )
    return ref, None, _load(ref, None)


def spec_for(lab: Lab) -> LabSpec:
    return _load(lab.builtin_id, lab.folder, lab.digest or "")


def read_spec(lab: Lab) -> LabSpec:
    """The lab's spec read from its folder now (not the copy this process keeps)."""
    return _load.__wrapped__(lab.builtin_id, lab.folder)


def folder_of(lab: Lab) -> Path:
    """The lab's folder: its own, or the built-in lab's in reference_kernels/."""
    if lab.folder:
        return Path(lab.folder)

    return builtin_labs_dir() / str(lab.builtin_id)


def forget_cached_specs() -> None:
    _load.cache_clear()


def required_gpu_model(lab: Lab, spec: LabSpec) -> str:
    """The GPU model the lab's timings belong to: the course's setting, else the spec's."""
    if lab.gpu_model:
        return lab.gpu_model
    return spec.timing.gpu_model if spec.timing is not None else ""
