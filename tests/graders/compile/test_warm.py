"""A prestarted compile child's warm-up: NVRTC loaded and the compiling module imported, so a
request pays for neither."""

from __future__ import annotations

import json
import subprocess
import sys

from graders.compile.compiler import COMPILE_TARGET


def test_the_warm_up_imports_what_a_compile_request_runs() -> None:
    probe = (
        "import json, sys\n"
        "from graders.compile.warm import load_nvrtc\n"
        "load_nvrtc()\n"
        "print(json.dumps({m: m in sys.modules for m in "
        "('graders.compile.pipeline', 'cupy_backends.cuda.libs.nvrtc')}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert COMPILE_TARGET.startswith("graders.compile.pipeline:")
    assert loaded == {
        "graders.compile.pipeline": True,
        "cupy_backends.cuda.libs.nvrtc": True,
    }
