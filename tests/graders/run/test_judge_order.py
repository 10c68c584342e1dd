"""judge() on NumPy arrays, every step in its order, and the comparison's details: a built-in
oracle's answer made from fresh inputs, released once judged; guards, changed inputs, outputs
never written, sums, one-number answers, tolerances and properties.

The device's own parts (guards, the inputs made again, host copies) stand in as NumPy here;
tests/graders/gpu runs the same judge on CuPy arrays. Written against the survivors of
scripts/mutation.py (graders/run/judge.py).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from graders.run import compare, judge
from graders.run.buffers import DeviceArrays
from graders.run.judge import DEFAULT_TOLERANCE, Answers, _compare, _property, tolerance
from tests.graders.run.test_judge import _arrays

N = 1000
FACTOR = 2.5


class Run:
    """vector-scale's case n-1000 run on NumPy: the input, its output, what the device says."""

    def __init__(self, dst: np.ndarray | None = None) -> None:
        self.src = np.linspace(-1.0, 1.0, N, dtype=np.float32)
        self.dst = (self.src * np.float32(FACTOR)) if dst is None else dst
        self.arrays = _arrays("vector-scale", "n-1000", dst=self.dst)
        self.guards: list[str] = []
        self.modified: list[str] = []
        self.fresh: list[np.ndarray] = []
        arrays: Any = self.arrays
        arrays.guard_violations = lambda: list(self.guards)
        arrays.modified_inputs = lambda: list(self.modified)
        # The one-fetch count before them (tests/graders/run/test_untouched.py tests it).
        arrays.untouched = lambda inputs=True: not self.guards and not (inputs and self.modified)
        arrays.fresh_input = self.fresh_input
        self.case = next(c for c in self.arrays.lab.cases if c.name == "n-1000")

    def fresh_input(self, name: str) -> np.ndarray:
        assert name == "src"
        made = self.src.copy()
        self.fresh.append(made)
        return made

    def judge(self, **kw: Any) -> judge.Judgement:
        ctx: Any = SimpleNamespace(lab=self.arrays.lab, references={})
        return judge.judge(ctx, self.case, self.arrays, {"n": N, "factor": FACTOR}, **kw)


def test_a_right_answer_passes_and_the_answer_and_fresh_inputs_are_zeroed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept: list[Answers] = []
    real = judge.expected_answers

    def keep(*args: Any) -> Answers:
        answers = real(*args)
        kept.append(answers)
        kept.append(Answers(dict(answers.device)))  # the arrays themselves, after release
        return answers

    monkeypatch.setattr(judge, "expected_answers", keep)
    run = Run()
    judged = run.judge()
    assert (judged.passed, judged.verdict) == (True, "pass")
    assert judged.message.startswith("dst matches the expected answer")
    assert judged.comparison is not None and judged.comparison.ok
    answers, arrays = kept
    assert answers.device == {}
    assert all(not a.any() for a in arrays.device.values()) and arrays.device
    assert run.fresh and all(not a.any() for a in run.fresh)


def test_one_wrong_element_is_named() -> None:
    run = Run()
    run.dst[7] += 1.0
    judged = run.judge()
    assert (judged.passed, judged.verdict) == (False, "wrong_answer")
    assert judged.message.startswith("1 of 1000 elements of dst are wrong; the first is dst[7]")
    assert judged.comparison is not None and judged.comparison.wrong_count == 1


def test_an_output_never_written_is_no_output() -> None:
    run = Run(compare.sentinel_array(np.dtype(np.float32), (N,)))
    judged = run.judge()
    assert (judged.passed, judged.verdict) == (False, "no_output")
    assert judged.comparison is not None


def test_a_write_outside_an_array_comes_first_then_a_changed_input() -> None:
    run = Run()
    run.guards = ["The kernel wrote past the end of dst.", "And before src."]
    run.modified = ["src"]
    judged = run.judge()
    assert (judged.passed, judged.verdict) == (False, "out_of_bounds_write")
    assert judged.message == "The kernel wrote past the end of dst. And before src."
    run.guards = []
    run.modified = ["src", "other"]
    judged = run.judge()
    assert (judged.passed, judged.verdict) == (False, "input_modified")
    assert judged.message == (
        "The kernel changed its input src, other; inputs are read-only (the grader checks "
        "them after the run)."
    )
    assert run.judge(check_inputs=False).passed


def test_a_lab_with_nothing_to_check_says_so() -> None:
    run = Run()
    lab = run.arrays.lab
    unchecked = [dataclasses.replace(p, check="none") if p.is_output else p for p in lab.params]
    run.arrays.lab = dataclasses.replace(lab, params=unchecked)
    judged = run.judge()
    assert judged == judge.Judgement(False, "wrong_answer", "The lab declares no output to check.")


def test_expected_answers_go_to_the_oracle_the_lab_names(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[tuple[Any, ...]] = []
    for kind in ("python", "reference", "builtin"):
        monkeypatch.setattr(judge, f"_{kind}_answers", lambda *a, k=kind: called.append((k, *a)))
    case, arrays, scalars = object(), object(), {"n": 1}
    ctxs = []
    for oracle in ("python", "reference:tiled", "scale"):
        ctxs.append(SimpleNamespace(lab=SimpleNamespace(expected_oracle=oracle)))
        judge.expected_answers(ctxs[-1], case, arrays, scalars)  # type: ignore[arg-type]
    assert called == [
        ("python", ctxs[0], case, arrays, scalars),
        ("reference", ctxs[1], case, arrays, scalars),
        ("builtin", ctxs[2], arrays, scalars),
    ]


def test_a_built_in_oracle_gets_the_float_scalars_and_the_outputs_shape() -> None:
    run = Run()
    ctx: Any = SimpleNamespace(lab=run.arrays.lab)
    answers = judge._builtin_answers(ctx, run.arrays, {"n": N, "factor": FACTOR})
    ((name, answer),) = answers.device.items()
    assert name == "dst" and answer.shape == (N,) and answer.dtype == np.float64
    np.testing.assert_array_equal(answer, run.src.astype(np.float64) * FACTOR)
    assert all(not a.any() for a in run.fresh)


# --- tolerance ---


def test_tolerances_integers_exact_floats_the_labs_or_the_default() -> None:
    lab = _arrays("vector-scale", "n-1000").lab
    names = lab.sizes_for("n-1000")
    assert tolerance(lab, "int32", names) == (0.0, 0.0)
    assert tolerance(lab, "uint8", names) == (0.0, 0.0)
    assert tolerance(lab, "float32", names) == (0.0, pytest.approx(4 * 2**-24))
    assert tolerance(lab, "float64", names) == DEFAULT_TOLERANCE == (1e-5, 1e-5)


# --- the comparison, output by output ---


def _with_check(arrays: DeviceArrays, name: str, **change: Any) -> DeviceArrays:
    params = [dataclasses.replace(p, **change) if p.name == name else p for p in arrays.lab.params]
    arrays.lab = dataclasses.replace(arrays.lab, params=params)
    arrays.arrays[name].param = arrays.lab.param(name)
    return arrays


def test_a_sum_is_checked_whole_within_the_labs_tolerance() -> None:
    partial = np.array([1.0, 2.0, 3.5], dtype=np.float32)
    arrays = _with_check(_arrays("vector-scale", "n-1000", dst=partial), "dst", check="sum")
    right = _compare(arrays.lab, arrays, Answers({"dst": np.array([6.5])}))
    assert right is not None and right.passed and right.verdict == "pass"
    assert right.comparison is not None and right.comparison.got == 6.5
    wrong = _compare(arrays.lab, arrays, Answers({"dst": np.array([6.5 + 1e-3])}))
    assert wrong is not None and (wrong.passed, wrong.verdict) == (False, "wrong_answer")
    assert wrong.message == "The sum of dst is wrong: expected 6.501, got 6.5 (abs error 0.001)."
    assert wrong.comparison is not None and wrong.comparison.got == 6.5
    # A float32 rtol of 4 u: 6.5 off by 1e-6 is inside it (about 1.5e-6).
    near = _compare(arrays.lab, arrays, Answers({"dst": np.array([6.5 + 1e-6])}))
    assert near is not None and near.passed
    partial[1] = compare.sentinel_array(np.dtype(np.float32), (1,))[0]
    unwritten = _compare(arrays.lab, arrays, Answers({"dst": np.array([6.5])}))
    assert unwritten is not None and (unwritten.passed, unwritten.verdict) == (False, "no_output")
    assert unwritten.message == (
        "1 of the partial sums in dst were never written (the first is dst[1]); every block "
        "must write its partial sum."
    )


def test_a_one_number_answer_is_compared_with_element_zero() -> None:
    out = np.array([4.0, 99.0, 99.0], dtype=np.float32)
    arrays = _arrays("vector-scale", "n-1000", dst=out)
    judged = _compare(arrays.lab, arrays, Answers({"dst": np.array([4.0])}))
    assert judged is not None and judged.passed
    assert judged.comparison is not None and judged.comparison.total == 1
    out[0] = 5.0
    judged = _compare(arrays.lab, arrays, Answers({"dst": np.array([4.0])}))
    assert judged is not None and not judged.passed
    one = np.array([4.0], dtype=np.float32)
    arrays = _arrays("vector-scale", "n-1000", dst=one)
    judged = _compare(arrays.lab, arrays, Answers({"dst": np.array([4.0])}))
    assert judged is not None and judged.passed


def test_the_elementwise_tolerance_is_the_labs() -> None:
    want = np.array([1.0, 2.0], dtype=np.float64)
    inside = np.array([1.0, 2.0 * (1 + 3 * 2**-24)], dtype=np.float32)
    arrays = _arrays("vector-scale", "n-1000", dst=inside)
    assert _compare(arrays.lab, arrays, Answers({"dst": want})).passed  # type: ignore[union-attr]
    outside = np.array([1.0, 2.0 * (1 + 2**-20)], dtype=np.float32)
    arrays = _arrays("vector-scale", "n-1000", dst=outside)
    judged = _compare(arrays.lab, arrays, Answers({"dst": want}))
    assert judged is not None and not judged.passed
    assert judged.comparison is not None and judged.comparison.wrong_count == 1


def test_an_output_without_an_answer_is_not_compared() -> None:
    arrays = _arrays("vector-scale", "n-1000", dst=np.zeros(3, dtype=np.float32))
    assert _compare(arrays.lab, arrays, Answers({})) is None
    unchecked = _with_check(arrays, "dst", check="none")
    assert _compare(unchecked.lab, unchecked, Answers({"dst": np.ones(3)})) is None


def test_never_written_counts_elements_and_names_the_first_in_the_arrays_shape() -> None:
    y = compare.sentinel_array(np.dtype(np.float32), (7, 1000))
    arrays = _with_check(_arrays("softmax", "small-7x1000", y=y), "y", check="none")
    judged = judge._never_written(arrays.lab, arrays)
    assert judged == judge.Judgement(
        False,
        "no_output",
        "The kernel wrote nothing into y: every element still holds the grader's marker.",
    )
    y[:] = 0.5
    y[2, 3] = compare.sentinel_array(np.dtype(np.float32), (1,))[0]
    judged = judge._never_written(arrays.lab, arrays)
    assert judged is not None and judged.message == (
        "1 of 7000 elements of y were never written (they still hold the grader's marker); "
        "the first is y[2, 3]."
    )


def test_bytes_are_left_to_the_properties_and_later_outputs_are_still_checked() -> None:
    # Two outputs checked for properties only: a byte one first (its marker is a value a kernel
    # may write), then a float one never written.
    arrays = _arrays("vector-scale", "n-1000", dst=np.zeros(4, dtype=np.float32))
    lab = arrays.lab
    byte_out = dataclasses.replace(lab.param("dst"), name="flags", dtype="uint8", check="none")
    float_out = dataclasses.replace(lab.param("dst"), check="none")
    others = [p for p in lab.params if p.name != "dst"]
    arrays.lab = dataclasses.replace(lab, params=[byte_out, float_out, *others])
    flags = np.full(4, 0xDE, dtype=np.uint8)
    arrays.arrays["flags"] = dataclasses.replace(
        arrays.arrays["dst"], param=byte_out, dtype=flags.dtype, view=flags, raw=flags
    )
    arrays.arrays["dst"].param = float_out
    arrays.arrays["dst"].view[:] = compare.sentinel_array(np.dtype(np.float32), (4,))
    judged = judge._never_written(arrays.lab, arrays)
    assert judged is not None and judged.verdict == "no_output" and "into dst" in judged.message


# --- properties ---


def test_a_sorted_permutation_of_its_input(monkeypatch: pytest.MonkeyPatch) -> None:
    source = np.array([3.0, 1.0, 2.0], dtype=np.float32)
    out = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    arrays = _with_check(
        _arrays("vector-scale", "n-1000", dst=out),
        "dst",
        check="none",
        properties=("sorted_permutation",),
        of="src",
    )
    made: list[np.ndarray] = []

    def fresh(name: str) -> np.ndarray:
        assert name == "src"
        made.append(source.copy())
        return made[-1]

    monkeypatch.setattr(arrays, "fresh_input", fresh)
    param = arrays.lab.param("dst")
    assert _property(arrays.lab, param, "sorted_permutation", arrays) is None
    assert made and not made[-1].any()  # the input made again is zeroed once read
    out[:] = [1.0, 3.0, 2.0]
    problem = _property(arrays.lab, param, "sorted_permutation", arrays)
    assert problem is not None and problem.startswith("dst is not in ascending order")
    out[:] = [1.0, 2.0, 4.0]
    problem = _property(arrays.lab, param, "sorted_permutation", arrays)
    assert problem is not None and "src" in problem and "dst" in problem


def test_rows_that_sum_to_one_are_named_by_the_output() -> None:
    y = np.full((7, 1000), 1.0 / 1000, dtype=np.float32)
    arrays = _arrays("softmax", "small-7x1000", y=y)
    param = arrays.lab.param("y")
    assert _property(arrays.lab, param, "rows_sum_to_one", arrays) is None
    y[4, :] *= 1.01
    problem = _property(arrays.lab, param, "rows_sum_to_one", arrays)
    assert problem is not None and problem.startswith("1 of 7 rows of y")


# --- properties and the lab's check(), in judge() ---

CHECKING_ORACLE = """\
import numpy as np


def expected(inputs, sizes, scalars):
    return {"out": np.full(256, 1 / 256)}


def check(outputs, expected, inputs, sizes):
    same = bool((outputs["out"] == expected["out"]).all()) and inputs["data"].size == 5
    return same, "out holds the counts." if same else "out is not the counts."
"""


def _checked_run(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, out: np.ndarray) -> Any:
    """two-kernels' case tiny: out checked by its rows' sums and by the lab's check()."""
    from graders.spec import load_lab
    from tests.graders.spec_samples import write_multi_lab

    lab = load_lab(write_multi_lab(tmp_path, oracle=CHECKING_ORACLE))
    params = [
        dataclasses.replace(p, check="none", properties=("rows_sum_to_one",))
        if p.name == "out"
        else p
        for p in lab.params
    ]
    lab = dataclasses.replace(lab, params=params)
    case = next(c for c in lab.cases if c.name == "tiny")
    arrays = DeviceArrays(lab, lab.sizes_for(case))
    template = _arrays("vector-scale", "n-1000", dst=out).arrays["dst"]
    arrays.arrays["out"] = dataclasses.replace(template, param=lab.param("out"))
    given: Any = arrays
    given.guard_violations = list
    given.modified_inputs = list
    given.host = lambda name: {"out": out}[name].copy()
    data = np.array([1, 2, 3, 255, 0], dtype=np.uint8)
    answers = Answers({}, {"out": np.full(256, 1 / 256)}, {"data": data})
    seen: list[tuple[Any, ...]] = []

    def expected(*args: Any) -> Answers:
        seen.append(args)
        return answers

    monkeypatch.setattr(judge, "expected_answers", expected)
    ctx: Any = SimpleNamespace(lab=lab, references={})
    scalars = {"n": 5, "alpha": 0.5}
    verdict = judge.judge(ctx, case, arrays, scalars)
    # The answer is asked for once, with the run's own arguments; or not at all when the
    # output was never written.
    assert seen == ([] if verdict.verdict == "no_output" else [(ctx, case, arrays, scalars)])
    return verdict


def test_properties_and_the_labs_check_each_say_what_they_found(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = np.full(256, 1 / 256, dtype=np.float32)
    judged = _checked_run(tmp_path, monkeypatch, out)
    assert judged == judge.Judgement(
        True, "pass", "out has the property rows_sum_to_one; out holds the counts."
    )


def test_a_property_fails_before_the_labs_check_runs(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = np.full(256, 1 / 128, dtype=np.float32)
    judged = _checked_run(tmp_path, monkeypatch, out)
    assert (judged.passed, judged.verdict, judged.comparison) == (False, "wrong_answer", None)
    assert judged.message.startswith("1 of 1 rows of out")


def test_the_labs_check_fails_with_its_own_sentence(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = np.full(256, 1 / 256, dtype=np.float32)
    out[0], out[1] = 0.0, 2 / 256  # the rows still sum to one
    judged = _checked_run(tmp_path, monkeypatch, out)
    assert judged == judge.Judgement(False, "wrong_answer", "out is not the counts.", None)


def test_an_output_never_written_is_caught_before_any_property(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = compare.sentinel_array(np.dtype(np.float32), (256,))
    judged = _checked_run(tmp_path, monkeypatch, out)
    assert (judged.passed, judged.verdict) == (False, "no_output")
    assert judged.message.startswith("The kernel wrote nothing into out")


# --- more of the answer and the comparison ---


def test_an_integer_oracles_answer_wraps_as_c_does_and_is_int64() -> None:
    a = np.array([[2**30, 1], [0, 3]], dtype=np.int32)
    b = np.array([[4, 0], [1, 2]], dtype=np.int32)
    arrays: Any = _arrays("matmul-tiled-int", "square-1")
    arrays.names = {"M": 2, "N": 2, "K": 2}
    arrays.fresh_input = {"A": a, "B": b}.__getitem__
    ctx: Any = SimpleNamespace(lab=arrays.lab)
    (answer,) = judge._builtin_answers(ctx, arrays, {"M": 2, "N": 2, "K": 2}).device.values()
    assert answer.dtype == np.int64 and answer.shape == (2, 2)
    # 2^30 * 4 + 1 wraps in int32, as the kernel's arithmetic does.
    assert answer.tolist() == [[1, 2], [3, 6]]


def test_a_float64_scalar_reaches_the_oracle_too() -> None:
    run = Run()
    lab = run.arrays.lab
    factor = dataclasses.replace(lab.param("factor"), dtype="float64")
    run.arrays.lab = dataclasses.replace(
        lab, params=[factor if p.name == "factor" else p for p in lab.params]
    )
    ctx: Any = SimpleNamespace(lab=run.arrays.lab)
    (answer,) = judge._builtin_answers(ctx, run.arrays, {"n": N, "factor": 0.5}).device.values()
    np.testing.assert_array_equal(answer, run.src.astype(np.float64) * 0.5)


def test_a_tolerance_that_depends_on_the_case_is_read_for_this_case() -> None:
    # array-sum's atol grows with n: for 1000 numbers about 5e-4 in total.
    arrays = _arrays("array-sum", "n-1000", out=np.array([0.25], dtype=np.float32))
    atol, _ = tolerance(arrays.lab, "float32", arrays.names)
    assert 1e-4 < atol < 1e-3
    near = _compare(arrays.lab, arrays, Answers({"out": np.array([0.25 + atol / 2])}))
    assert near is not None and near.passed
    far = _compare(arrays.lab, arrays, Answers({"out": np.array([0.25 + atol * 2])}))
    assert far is not None and not far.passed


def test_a_one_number_answer_against_two_elements_reads_element_zero() -> None:
    out = np.array([4.0, 99.0], dtype=np.float32)
    arrays = _arrays("vector-scale", "n-1000", dst=out)
    judged = _compare(arrays.lab, arrays, Answers({"dst": np.array([4.0])}))
    assert judged is not None and judged.passed


def test_an_output_partly_never_written_is_a_wrong_answer_not_no_output() -> None:
    out = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    out[0] = compare.sentinel_array(np.dtype(np.float32), (1,))[0]
    arrays = _arrays("vector-scale", "n-1000", dst=out)
    judged = _compare(arrays.lab, arrays, Answers({"dst": np.array([1.0, 2.0, 3.0])}))
    assert judged is not None and (judged.passed, judged.verdict) == (False, "wrong_answer")


def test_partial_sums_never_written_are_no_output_however_many() -> None:
    partial = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    partial[1:] = compare.sentinel_array(np.dtype(np.float32), (2,))
    arrays = _with_check(_arrays("vector-scale", "n-1000", dst=partial), "dst", check="sum")
    judged = _compare(arrays.lab, arrays, Answers({"dst": np.array([6.0])}))
    assert judged is not None and (judged.passed, judged.verdict) == (False, "no_output")


def test_every_output_checked_for_properties_is_looked_at_for_markers() -> None:
    arrays = _arrays("vector-scale", "n-1000", dst=np.zeros(4, dtype=np.float32))
    lab = arrays.lab
    first = dataclasses.replace(lab.param("dst"), name="first", check="none")
    second = dataclasses.replace(lab.param("dst"), check="none")
    arrays.lab = dataclasses.replace(
        lab, params=[first, second, *(p for p in lab.params if p.name != "dst")]
    )
    written = np.ones(4, dtype=np.float32)
    arrays.arrays["first"] = dataclasses.replace(
        arrays.arrays["dst"], param=first, view=written, raw=written
    )
    arrays.arrays["dst"].param = second
    arrays.arrays["dst"].view[:] = compare.sentinel_array(np.dtype(np.float32), (4,))
    arrays.arrays["dst"].view[0] = 1.0
    judged = judge._never_written(arrays.lab, arrays)
    assert judged is not None and judged.passed is False and judged.verdict == "wrong_answer"
    assert judged.message.startswith("3 of 4 elements of dst were never written")


def test_a_sorted_permutation_of_bfloat16_is_judged_by_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # bfloat16 bits of -2, -1, 1: in ascending order by value, not as 16-bit integers.
    source = np.array([0x3F80, 0xC000, 0xBF80], dtype=np.uint16)
    out = np.array([0xC000, 0xBF80, 0x3F80], dtype=np.uint16)
    arrays = _with_check(
        _arrays("vector-scale", "n-1000", dst=out),
        "dst",
        check="none",
        properties=("sorted_permutation",),
        of="src",
        dtype="bfloat16",
    )
    monkeypatch.setattr(arrays, "fresh_input", lambda name: source.copy())
    assert _property(arrays.lab, arrays.lab.param("dst"), "sorted_permutation", arrays) is None


def test_a_passing_comparison_still_has_its_properties_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    y = np.full((7, 1000), 1 / 500, dtype=np.float32)  # each row sums to 2
    arrays: Any = _arrays("softmax", "small-7x1000", y=y)
    arrays.guard_violations = list
    arrays.modified_inputs = list
    monkeypatch.setattr(judge, "expected_answers", lambda *a: Answers({"y": y.astype(float)}))
    case = next(c for c in arrays.lab.cases if c.name == "small-7x1000")
    ctx: Any = SimpleNamespace(lab=arrays.lab, references={})
    judged = judge.judge(ctx, case, arrays, {})
    assert (judged.passed, judged.verdict) == (False, "wrong_answer")
    assert judged.message.startswith("7 of 7 rows of y")
