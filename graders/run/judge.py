"""Judging one run of a case on the device: guards, inputs, then every output.

In order, the first failure deciding the verdict: a write outside an array; a changed input;
an output checked only for properties (or by the lab's check()) still holding the grader's
marker somewhere (never written); each output compared with the trusted answer (elementwise or
its sum; the comparison also counts what was never written); each output's properties; the
lab's Python check(). The trusted answer is computed after the kernel ran, from inputs made
again: by a built-in oracle in float64 on the device, by a reference kernel, or by the lab's
oracle.py on host copies (its answer then goes to the device to be compared). Answers left on
the device are zeroed once judged, so no later kernel can find them.

An error in the lab's oracle.py raises python_oracle.OracleCodeError: the lab's fault, which
the child reports as the grader's failure, never as a verdict on the student.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graders.run import compare, oracles, properties, python_oracle
from graders.run.buffers import DeviceArrays
from graders.run.context import Context
from graders.run.harness import LaunchPlan, run_and_wait
from graders.run.inputs import DTYPES
from graders.spec import CaseSpec, LabSpec, ParamSpec
from graders.spec.dtypes import FLOAT_DTYPES

DEFAULT_TOLERANCE = (1e-5, 1e-5)


@dataclass
class Judgement:
    passed: bool
    verdict: str
    message: str
    comparison: compare.Comparison | None = None


@dataclass
class Answers:
    """The trusted answer: per compared output on the device (float64 or int64), and for the
    lab's check() what its expected() returned and the inputs it read (host)."""

    device: dict[str, Any] = field(default_factory=dict)
    host: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)

    def release(self) -> None:
        for answer in self.device.values():
            answer.fill(0)  # no answer stays in device memory for a later kernel to find
        self.device.clear()


def tolerance(lab: LabSpec, dtype: str, names: dict[str, Any]) -> tuple[float, float]:
    """(atol, rtol) of a float dtype in this case; integers are exact."""
    if dtype not in FLOAT_DTYPES:
        return 0.0, 0.0
    spec = lab.tolerance.get(dtype)
    return spec.for_case(names) if spec else DEFAULT_TOLERANCE


def _declarations(lab: LabSpec, arrays: DeviceArrays) -> dict[str, int]:
    return {name: int(arrays.names[name]) for name in lab.declares if name in arrays.names}


def _python_answers(
    ctx: Context, case: CaseSpec, arrays: DeviceArrays, scalars: dict[str, Any]
) -> Answers:
    """The lab's expected() on host copies of the inputs, made again after the launch; each
    answer compared then goes where its output is (the device; NumPy in the CPU's tests)."""
    lab = ctx.lab
    host = {p.name: arrays.host_input(p.name) for p in lab.params if p.is_array and p.is_input}
    inputs = python_oracle.oracle_inputs(lab, host)
    answers = python_oracle.expected_outputs(
        lab, case, inputs, python_oracle.oracle_scalars(lab, scalars), _declarations(lab, arrays)
    )
    device = {
        p.name: compare.array_module(arrays.arrays[p.name].view).asarray(answers[p.name])
        for p in lab.params
        if p.needs_answer
    }
    return Answers(device, answers, inputs)


def _reference_answers(
    ctx: Context, case: CaseSpec, arrays: DeviceArrays, scalars: dict[str, Any]
) -> Answers:
    """The outputs of the oracle's reference kernel, run on the same inputs made again."""
    lab = ctx.lab
    ref = ctx.references[lab.expected_oracle.split(":", 1)[1]]
    names = lab.sizes_for(case, ref.declarations)
    theirs = DeviceArrays.allocate(lab, names, guards=False, literals=case.inputs)
    try:
        theirs.fill_from(arrays.sources)
        plan = LaunchPlan.build(lab, names, theirs, scalars)
        run_and_wait(ref.funcs, plan, lab.limits.case_seconds)
        return Answers(
            {p.name: compare.widen(theirs.arrays[p.name].view) for p in lab.params if p.is_output}
        )
    finally:
        for arr in theirs.arrays.values():
            arr.raw.fill(0)
        theirs.release()


def _builtin_answers(ctx: Context, arrays: DeviceArrays, scalars: dict[str, Any]) -> Answers:
    """A built-in oracle's answer for the one output compared with it, in float64 on the device."""
    lab = ctx.lab
    compared = next((p for p in lab.params if p.needs_answer), None)
    if compared is None:
        return Answers()
    ins = [arrays.fresh_input(p.name) for p in lab.params if p.is_array and p.is_input]
    floats = [
        float(scalars[p.name])
        for p in lab.params
        if p.kind == "scalar" and p.dtype in ("float32", "float64")
    ]
    try:
        answer = oracles.compute(
            lab.expected_oracle,
            ins,
            floats,
            compared.shape_for(arrays.names),
            np.dtype(DTYPES[compared.dtype]),
        )
    finally:
        for arr in ins:
            arr.fill(0)
    return Answers({compared.name: answer})


def expected_answers(
    ctx: Context, case: CaseSpec, arrays: DeviceArrays, scalars: dict[str, Any]
) -> Answers:
    """The trusted answer of each output; computed after the kernel's run."""
    oracle = ctx.lab.expected_oracle
    if oracle == "python":
        return _python_answers(ctx, case, arrays, scalars)
    if oracle.startswith("reference:"):
        return _reference_answers(ctx, case, arrays, scalars)
    return _builtin_answers(ctx, arrays, scalars)


def _never_written(lab: LabSpec, arrays: DeviceArrays) -> Judgement | None:
    """An output no answer is compared with must still be written everywhere."""
    for p in lab.params:
        if not p.is_output or p.needs_answer:
            continue
        view = arrays.arrays[p.name].view
        if not compare.knows_unwritten(view.dtype):
            continue  # a byte has no spare value: the properties judge what is there
        xp = compare.array_module(view)
        mask = compare.sentinel_mask(view).reshape(-1)
        count = int(xp.count_nonzero(mask))
        if not count:
            continue
        if count == view.size:
            return Judgement(
                False,
                "no_output",
                f"The kernel wrote nothing into {p.name}: every element still holds the "
                "grader's marker.",
            )
        first = np.unravel_index(int(xp.argmax(mask.view(xp.uint8))), view.shape)
        where = ", ".join(str(int(i)) for i in first)
        return Judgement(
            False,
            "wrong_answer",
            f"{count} of {view.size} elements of {p.name} were never written (they still hold "
            f"the grader's marker); the first is {p.name}[{where}].",
        )
    return None


def _compare(lab: LabSpec, arrays: DeviceArrays, answers: Answers) -> Judgement | None:
    """Each output compared with its answer; the first that differs fails the case."""
    last: Judgement | None = None
    for p in lab.params:
        if not p.needs_answer or p.name not in answers.device:
            continue
        got = arrays.arrays[p.name].view
        want = answers.device[p.name]
        atol, rtol = tolerance(lab, p.dtype, arrays.names)
        if p.check == "sum":
            total = float(want.reshape(-1)[0])
            cmp = compare.compare_sum(got, total, atol=atol, rtol=rtol)
        else:
            if want.size == 1 and got.size > 1:
                got = got.reshape(-1)[:1]  # a one-number answer lives in element 0
            cmp = compare.compare_elementwise(got, want.reshape(got.shape), atol=atol, rtol=rtol)
        text = compare.describe(cmp, p.name, check=p.check)
        if not cmp.ok:
            verdict = "no_output" if cmp.unwritten_count == cmp.total else "wrong_answer"
            if p.check == "sum" and cmp.got is None:
                verdict = "no_output"
            return Judgement(False, verdict, text, cmp)
        last = Judgement(True, "pass", text, cmp)
    return last


def _property(lab: LabSpec, p: ParamSpec, name: str, arrays: DeviceArrays) -> str | None:
    """Why output `p` lacks the property `name`, or None when it has it."""
    view = arrays.arrays[p.name].view
    if name == "rows_sum_to_one":
        atol, rtol = tolerance(lab, p.dtype, arrays.names)
        result = properties.rows_sum_to_one(compare.widen(view), name=p.name, atol=atol, rtol=rtol)
    else:
        assert p.of is not None
        source = arrays.fresh_input(p.of)
        try:
            floats = compare.is_float_data(view.dtype)
            got, of = (compare.widen(view), compare.widen(source)) if floats else (view, source)
            result = properties.sorted_permutation(got, of, name=p.name, of=p.of)
        finally:
            source.fill(0)
    return None if result.ok else result.message


def _touched(arrays: DeviceArrays, *, check_inputs: bool) -> Judgement | None:
    """A write outside an array, else (with `check_inputs`) a changed input; counted in one
    fetch first (DeviceArrays.untouched), and named only where one was found."""
    if arrays.untouched(inputs=check_inputs):
        return None
    guards = arrays.guard_violations()
    if guards:
        return Judgement(False, "out_of_bounds_write", " ".join(guards))
    # No guard was written, so untouched() counted a changed input: `check_inputs` was on.
    modified = arrays.modified_inputs()
    if modified:
        return Judgement(
            False,
            "input_modified",
            f"The kernel changed its input {', '.join(modified)}; inputs are read-only "
            "(the grader checks them after the run).",
        )
    return None


def judge(
    ctx: Context,
    case: CaseSpec,
    arrays: DeviceArrays,
    scalars: dict[str, Any],
    *,
    check_inputs: bool = True,
) -> Judgement:
    """The verdict on one run (see the module docstring for the order)."""
    lab = ctx.lab
    touched = _touched(arrays, check_inputs=check_inputs)
    if touched is not None:
        return touched
    unwritten = _never_written(lab, arrays)
    if unwritten is not None:
        return unwritten
    answers = expected_answers(ctx, case, arrays, scalars)
    try:
        compared = _compare(lab, arrays, answers)
        if compared is not None and not compared.passed:
            return compared
        said = []
        for p in lab.params:
            for name in p.properties if p.is_output else ():
                problem = _property(lab, p, name, arrays)
                if problem:
                    return Judgement(False, "wrong_answer", problem)
                said.append(f"{p.name} has the property {name}")
        oracle = lab.python_oracle
        if oracle is not None and oracle.has_check:
            outputs = {p.name: arrays.host(p.name) for p in lab.params if p.is_output}
            verdict = python_oracle.run_check(lab, case, outputs, answers.host, answers.inputs)
            if not verdict.passed:
                return Judgement(False, "wrong_answer", verdict.message, None)
            said.append(verdict.message.rstrip("."))
    finally:
        answers.release()
    if compared is not None:
        return compared
    if not said:
        return Judgement(False, "wrong_answer", "The lab declares no output to check.")
    return Judgement(True, "pass", "; ".join(said) + ".")
