"""Download, here, the wheels a run of kernelgrader needs on a GPU host without an index.

The lent GPU machines have Python 3.12, CuPy, NumPy and pytest, and no package index. This walks
kernelgrader's runtime requirements (no extras: SQLite and the SQLite broker need no servers)
as installed in this venv, at the versions installed here, and has pip download the x86-64
CPython 3.12 wheel of each, except what the GPU host brings (NumPy, CuPy, NVIDIA's and CUDA's
packages). Run it with the venv's Python:

    .venv/bin/python scripts/device_wheels.py DEST [EXTRAS]   # e.g. .whl sso
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

TARGET = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}
# Brought by the GPU host's image; carrying other builds of these would shadow its CUDA stack.
ON_THE_GPU_HOST = re.compile(r"^(numpy|cupy(-.*)?|fastrlock|nvidia-.*|cuda-.*)$")
# Every glibc from the GPU host's (Ubuntu 24.04: 2.39) down: pip matches a platform tag exactly,
# and NVIDIA's ncu-report wheel is tagged manylinux_2_25, which a short list skipped.
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(39, 16, -1)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]


def closure(root: str, extras: frozenset[str] = frozenset()) -> dict[str, str]:
    """Every distribution `root` needs on the target, name -> version installed here."""
    found: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(root, extras)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        dist = metadata.distribution(name)
        for line in dist.requires or []:
            req = Requirement(line)
            environments = [{**TARGET, "extra": e} for e in wanted] or [{**TARGET, "extra": ""}]
            if req.marker is not None and not any(req.marker.evaluate(e) for e in environments):
                continue
            dep = canonicalize_name(req.name)
            if ON_THE_GPU_HOST.match(dep):
                continue
            try:
                found[dep] = metadata.version(dep)
            except metadata.PackageNotFoundError:
                sys.exit(
                    f"{dep} (needed by {name}) is not installed here; run scripts/setup.sh first."
                )
            todo.append((dep, frozenset(req.extras)))
    return found


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    dest = Path(sys.argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    extras = frozenset(filter(None, (sys.argv[2] if len(sys.argv) == 3 else "").split(",")))
    pins = sorted(f"{name}=={version}" for name, version in closure("kernelgrader", extras).items())
    print(f"{len(pins)} packages for CPython 3.12 on x86-64 into {dest}:", " ".join(pins))
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *platforms,
            "--dest",
            str(dest),
            *pins,
        ],
        check=True,
    )
    wheels = list(dest.glob("*.whl"))
    print(f"{len(wheels)} wheels in {dest}, {sum(p.stat().st_size for p in wheels) >> 20} MiB")


if __name__ == "__main__":
    main()
