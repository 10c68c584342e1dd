"""Print what reading declared values from the compiled program costs NVRTC: the median
seconds of compiling a file alone and inside the generated wrapper that probes the lab's names
(graders/compile/declared_values.py), on the lab's target reference and on a 240 KB file of
comments in six languages (issue 34, case 6).

    python bench/declared_values.py [--lab matmul-tiled] [--rounds 7]

Needs NVRTC, no GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graders.compile.declared_values import WRAPPER_NAME, make_wrapper, nonce_for  # noqa: E402
from graders.compile.headers import BUILTIN_HEADERS  # noqa: E402
from graders.compile.pipeline import PTXAS_VERBOSE, nvrtc_compile  # noqa: E402
from graders.spec import load_builtin_lab  # noqa: E402
from tests.graders.compile.hostile_sources import multilingual_comments  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", default="matmul-tiled")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    lab = load_builtin_lab(args.lab)
    names = [s for spec in lab.declares.values() for s in spec.names]
    options = ["--gpu-architecture=sm_90", "-std=c++17", "-DKERNELGRADER=1", PTXAS_VERBOSE]
    target = lab.reference(lab.scoring.target or lab.references[0].name).source
    files = {
        f"{args.lab} target reference": target,
        "240 KB of comments": multilingual_comments(240_000),
    }
    print(f"{'file':<30} {'alone (s)':>10} {f'with {len(names)} probes (s)':>20}")
    for label, source in files.items():
        wrapper = make_wrapper("submission.cu", names, nonce_for(source))
        served = {**BUILTIN_HEADERS, "submission.cu": source}
        nvrtc_compile(source, "submission.cu", options, BUILTIN_HEADERS)  # NVRTC loaded, warm
        alone, wrapped = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            nvrtc_compile(source, "submission.cu", options, BUILTIN_HEADERS)
            alone.append(time.perf_counter() - started)
            started = time.perf_counter()
            nvrtc_compile(wrapper.text, WRAPPER_NAME, options, served)
            wrapped.append(time.perf_counter() - started)
        print(f"{label:<30} {statistics.median(alone):>10.3f} {statistics.median(wrapped):>20.3f}")


if __name__ == "__main__":
    main()
