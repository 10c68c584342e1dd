"""How far an honest float evaluation and the shortcut probes land from each lab's answer.

For every built-in lab and case: the largest error of each honest order of evaluation
(tests/graders/rounding.py: one accumulator in order or in a random order, trees, FMA...),
and how far each shortcut probe of `lab check` misses, both as multiples of the lab's
tolerance on that case. An honest order must stay well under 1; a probe must be over 1 on
some case, the timed one (marked *) included. CPU only; the data are the device's, made by
the generator's NumPy twin.

    python bench/honest_error.py [--labs array-sum,array-sum-atomic] [--trials 3]

The lab.toml comments quote these figures; tests/graders/test_tolerances.py asserts them.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graders.labcheck.probes import PROBE_KINDS  # noqa: E402
from graders.spec import list_builtin_labs, load_builtin_lab  # noqa: E402
from tests.graders.rounding import HONEST, shortcut_miss  # noqa: E402

MATMUL_ROWS = 64


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labs", default="", help="comma-separated lab ids (default: all)")
    parser.add_argument("--trials", type=int, default=3, help="random orders per case")
    args = parser.parse_args()
    labs = [x for x in args.labs.split(",") if x] or list_builtin_labs()
    rng = np.random.default_rng(20261121)
    for lab_id in labs:
        lab = load_builtin_lab(lab_id)
        timed = lab.timing.case if lab.timing else ""
        print(f"\n{lab_id}")
        for case in lab.cases:
            began = time.monotonic()
            mark = "*" if case.name == timed else " "
            honest = ""
            if lab_id in HONEST:
                worst: dict[str, float] = {}
                for _ in range(args.trials):
                    for order, r in HONEST[lab_id](lab, case.name, rng).items():
                        worst[order] = max(worst.get(order, 0.0), r)
                honest = "  honest " + ", ".join(f"{k} {_fmt(v)}" for k, v in worst.items())
            rows = MATMUL_ROWS if lab_id.startswith("matmul") else None
            misses = ", ".join(
                f"{kind} {_fmt(shortcut_miss(lab, case.name, kind, rows=rows))}"
                for kind in PROBE_KINDS
            )
            took = time.monotonic() - began
            print(f" {mark}{case.name:<22} shortcuts {misses}{honest}  ({took:.1f} s)")


if __name__ == "__main__":
    main()
