"""Every parser of student text does work linear in the file, counted in steps, not seconds.

Each parser runs on adversarial 256 KiB sources (tests/graders/compile/hostile_sources.py),
shapes that once took 2^depth steps (nested do-while), quadratic time (a #define and a run of
blanks, comma chains) or might; the step counter (graders/compile/work.py) counts characters
scanned and tokens, statements and edges visited. bench/parser_work.py prints the times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from graders.compile import work
from graders.compile.declarations import find_declarations, near_misses
from graders.compile.include_policy import check_includes, review, without_line_directives
from graders.compile.log import (
    clean_log,
    count_errors,
    first_error,
    prioritized,
    static_shared_bytes,
)
from graders.compile.pipeline import error_sentence
from graders.compile.preprocess import preprocess
from graders.compile.source_text import SourceViews
from graders.compile.static_checks import find_barrier_problems
from graders.spec import DeclareSpec
from tests.graders.compile.hostile_sources import SIZE, SOURCES, hostile_log

# Steps per character of input: each parser reads the text a few times and visits each token,
# statement and edge a few times. Superlinear work would exceed it by orders of magnitude.
STEPS_PER_CHAR = 32
TILE = {"TILE": DeclareSpec("TILE", ("TILE_WIDTH", "TILE_SIZE", "BLOCK_SIZE", "T"), 32, 1, 32)}

PARSERS: dict[str, Callable[[str], Any]] = {
    "views": SourceViews.of,
    "preprocess": preprocess,
    "include_policy": check_includes,
    "include_review": review,
    "line_directives": without_line_directives,
    "declarations": lambda s: (find_declarations(s, TILE), near_misses(s, TILE)),
    "barrier_check": find_barrier_problems,
    "error_sentence": lambda s: error_sentence(
        'submission.cu(9): error: expected a ";"\n', "submission.cu", s
    ),
}
LOG_READERS: dict[str, Callable[[str], Any]] = {
    "clean_log": lambda text: clean_log(text, "submission.cu", "int a;\n  echoed\n"),
    "count_errors": lambda text: count_errors(text, "submission.cu"),
    "first_error": lambda text: first_error(text, "submission.cu"),
    "static_shared_bytes": static_shared_bytes,
    "prioritized": lambda text: prioritized(text, 1_000_000),
}


@pytest.fixture(scope="module", params=sorted(SOURCES))
def hostile(request: pytest.FixtureRequest) -> str:
    source = SOURCES[request.param](SIZE)
    assert SIZE // 2 < len(source) <= SIZE
    return source


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_each_parser_is_linear_on_each_hostile_source(hostile: str, parser: str) -> None:
    with work.measured() as taken:
        PARSERS[parser](hostile)
    assert taken.steps >= len(hostile), "the parser must count the text it reads"
    assert taken.steps <= STEPS_PER_CHAR * len(hostile), (parser, taken.steps / len(hostile))


@pytest.mark.parametrize("reader", sorted(LOG_READERS))
def test_each_log_reader_is_linear(reader: str) -> None:
    text = hostile_log(SIZE)
    with work.measured() as taken:
        LOG_READERS[reader](text)
    assert taken.steps <= STEPS_PER_CHAR * len(text), (reader, taken.steps / len(text))


def test_the_barrier_check_still_finds_the_problem_in_the_deep_shapes() -> None:
    # Bounded work must not come from giving up: the long chains are still followed.
    for name in ("comma_chain", "backwards_chain", "macro_chain", "call_chain"):
        findings = find_barrier_problems(SOURCES[name](SIZE))
        assert [f.kind for f in findings] == ["divergent_barrier"], name
