"""The generated part of a lab page says what the spec says, and nothing about hidden cases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graders.spec import list_builtin_labs, load_builtin_lab, load_lab
from graders.spec.page import spec_markdown
from tests.graders.spec_samples import MULTI_SPEC, write_multi_lab


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_builtin_page_states_signature_launch_cases_and_points(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    page = spec_markdown(lab)
    for kernel in lab.kernels:
        assert lab.c_signature(kernel) + ";" in page
    assert page.count("<<<") == len(lab.launches)
    for case in lab.cases:
        if not case.hidden:
            assert f"| {case.name} |" in page
    assert f"Correctness: {lab.correctness_points:g} points" in page
    if lab.scoring.performance_points:
        assert f"Performance: {lab.scoring.performance_points:g} points" in page
    for tol in lab.tolerance.values():
        assert "with atol = `" in page
        for expr in (tol.atol, tol.rtol):
            if isinstance(expr, str):
                assert f"`{expr}`" in page


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_builtin_page_hides_hidden_cases(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    page = spec_markdown(lab)
    visible = {v for c in lab.cases if not c.hidden for v in c.sizes.values()}
    for case in (c for c in lab.cases if c.hidden):
        assert case.name not in page
        for value in case.sizes.values():
            if isinstance(value, int) and value >= 10 and value not in visible:
                assert not re.search(rf"(?<![\w.]){value}(?![\w.])", page), (lab_id, value)


def test_multi_kernel_page(tmp_path: Path) -> None:
    hidden = MULTI_SPEC.replace(
        "points = 2\n", "points = 2\nhidden = true\ninputs = { data = [9, 8, 7] }\n"
    )
    hidden = hidden.replace("n = 1000000, spread = 8.0", "n = 3, spread = 8.0")
    page = spec_markdown(load_lab(write_multi_lab(tmp_path, hidden)))
    assert "## The kernels" in page and "all 2 kernels" in page
    assert (
        'extern "C" __global__ void finish(unsigned int* counts, float* out, float alpha);' in page
    )
    assert "count<<<min(1024, ceil(n / BLOCK)), BLOCK>>>(data, counts, n);" in page
    assert "finish<<<1, 256>>>(counts, out, alpha);" in page
    assert "| BLOCK | `BLOCK_SIZE` | 256 | 32 to 1024, a power of two |" in page
    assert "| tiny | n = 5, spread = 1, alpha = 0.5 | 1 |" in page
    assert "In case tiny, `data` is written by hand: [1, 2, 3, 255, 0]." in page
    assert "random, normal with mean 128 and standard deviation spread, rounded" in page
    assert "| `counts` | scratch | uint32 | 256 | zeros, set before the run; not checked |" in page
    assert "computed by the lab's own Python code (`oracle.py`)" in page
    # the hidden case: a count and points only, none of its hand-written values
    assert "1 hidden case (2 points)" in page
    assert "9, 8, 7" not in page and "big" not in page
