"""Print the steps and seconds each parser of student text takes on the hostile sources.

The sources are tests/graders/compile/hostile_sources.py (about 256 KiB each, the upload limit);
the steps are what tests/graders/compile/test_bounded_work.py bounds (at most 32 per character).
With --compile, each source also goes through `compile_submission` as the worker calls it
(NVRTC and every parser in the sandboxed child), for the end-to-end seconds, and the compile
child's seconds per stage are printed as the worker logs them.

    python bench/parser_work.py [--size 262144] [--only nested_do_while,comma_chain] [--compile]

Needs no GPU.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graders.compile import work  # noqa: E402
from graders.compile.declarations import find_declarations, near_misses  # noqa: E402
from graders.compile.include_policy import check_includes, review  # noqa: E402
from graders.compile.pipeline import error_sentence  # noqa: E402
from graders.compile.preprocess import preprocess  # noqa: E402
from graders.compile.source_text import SourceViews  # noqa: E402
from graders.compile.static_checks import find_barrier_problems  # noqa: E402
from graders.spec import DeclareSpec, load_builtin_lab  # noqa: E402
from tests.graders.compile.hostile_sources import SIZE, SOURCES  # noqa: E402

TILE = {"TILE": DeclareSpec("TILE", ("TILE_WIDTH", "TILE_SIZE", "BLOCK_SIZE", "T"), 32, 1, 32)}
PARSERS: dict[str, Callable[[str], Any]] = {
    "views": SourceViews.of,
    "preprocess": preprocess,
    "includes": check_includes,
    "compiled": review,
    "declares": lambda s: (find_declarations(s, TILE), near_misses(s, TILE)),
    "barriers": find_barrier_problems,
    "errors": lambda s: error_sentence('s.cu(9): error: expected a ";"\n', "s.cu", s),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--only", default="", help="comma-separated source names")
    parser.add_argument("--compile", action="store_true", help="also time compile_submission")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the compile child's notes go to the worker's log
    stages = _StageLines()
    compile_log = logging.getLogger("graders.compile.compiler")
    compile_log.addHandler(stages)
    compile_log.setLevel(logging.INFO)
    compile_log.propagate = False  # the stage line is printed under its source's row
    names = [n for n in sorted(SOURCES) if not args.only or n in args.only.split(",")]
    lab = load_builtin_lab("matmul-tiled") if args.compile else None
    header = f"{'source':<22} {'bytes':>7}  " + "  ".join(f"{p:>17}" for p in PARSERS)
    print(header + ("  compile (s, verdict)" if args.compile else ""))
    print(f"{'':<22} {'':>7}  " + "  ".join(f"{'steps/char  secs':>17}" for _ in PARSERS))
    for name in names:
        source = SOURCES[name](args.size)
        cells = []
        for run in PARSERS.values():
            started = time.perf_counter()
            with work.measured() as taken:
                run(source)
            seconds = time.perf_counter() - started
            cells.append(f"{taken.steps / len(source):>9.1f} {seconds:>7.3f}")
        line = f"{name:<22} {len(source):>7}  " + "  ".join(cells)
        if lab is not None:
            from graders.compile.compiler import compile_submission

            started = time.perf_counter()
            stages.lines.clear()
            result = compile_submission(lab, source, arch="sm_90")
            line += f"  {time.perf_counter() - started:6.2f} {result.reason or 'ok'}"
            line += "".join(f"\n    {said}" for said in stages.lines)
        print(line, flush=True)


class _StageLines(logging.Handler):
    """The worker's log line with the compile child's stages (graders.compile.compiler)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "characters," in record.getMessage():
            self.lines.append(record.getMessage())


if __name__ == "__main__":
    main()
