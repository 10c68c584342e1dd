"""The part of a lab page that the spec says: kernels, launches, data, cases, checks and points.

`spec_markdown(lab)` renders it from lab.toml, so it cannot drift from what the grader does;
the lab's `lab.md` holds only the prose around it (what to compute, hints, mistakes). Hidden
cases appear only as a count and their points: no sizes, no hand-written values.
"""

from __future__ import annotations

from graders.spec.dtypes import FLOAT_DTYPES
from graders.spec.expr import ExprError, Number, evaluate
from graders.spec.model import DeclareSpec, InitSpec, LabSpec, LaunchSpec, ParamSpec

MAX_SHOWN_VALUES = 16
_KINDS = {"in": "input", "inout": "input and output", "out": "output", "scratch": "scratch"}
_BUILTIN_ANSWERS = {
    "scale": "each element of the input times the factor",
    "hadamard": "the elementwise product of the two inputs",
    "sum": "the sum of the input",
    "dot": "the dot product of the two inputs",
    "matmul": "the matrix product of the two inputs",
    "conv1d": "the 1-D convolution of the input with the mask (zero padding)",
    "conv2d": "the 2-D convolution of the input with the mask (zero padding)",
}


def _num(value: Number) -> str:
    """1e-06 as 1e-6, 0.0001 as 1e-4, 1048579 as itself."""
    if isinstance(value, int) or value == 0:
        return str(value)
    if 1e-3 <= abs(value) < 1e6:
        return f"{value:.3g}"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _expr(value: str | Number) -> str:
    return value if isinstance(value, str) else _num(value)


def _dims(values: tuple[str | Number, ...]) -> str:
    shown = [_expr(v) for v in values]
    return shown[0] if len(shown) == 1 else f"dim3({', '.join(shown)})"


def _launch_line(launch: LaunchSpec) -> str:
    geometry = [_dims(launch.grid), _dims(launch.block)]
    if launch.shared_bytes not in (0, "0"):
        geometry.append(_expr(launch.shared_bytes))
    args = ", ".join(_expr(a) for a in launch.args)
    return f"{launch.kernel}<<<{', '.join(geometry)}>>>({args});"


def _kernels(lab: LabSpec) -> list[str]:
    lines = ["## The kernel" + ("s" if len(lab.kernels) > 1 else ""), ""]
    if len(lab.kernels) > 1:
        lines += [
            f'Your file defines all {len(lab.kernels)} kernels, each `extern "C"` so the '
            "grader finds it by name:",
            "",
        ]
    else:
        lines += [
            'Your file defines this kernel (`extern "C"` so the grader finds it by name):',
            "",
        ]
    lines.append("```cuda")
    lines += [f"{lab.c_signature(k)};" for k in lab.kernels]
    lines += ["```", ""]
    if lab.requires:
        tokens = ", ".join(f"`{t}`" for t in lab.requires)
        lines += [f"The file must use {tokens} (outside comments).", ""]
    return lines


def _constraint(d: DeclareSpec) -> str:
    parts = [f"{d.min} to {d.max}"]
    if d.multiple_of:
        parts.append(f"a multiple of {d.multiple_of}")
    if d.power_of_two:
        parts.append("a power of two")
    return ", ".join(parts)


def _launches(lab: LabSpec) -> list[str]:
    lines = ["## How the grader launches it", "", "```"]
    for name, value in lab.derived.items():
        lines.append(f"{name} = {_expr(value)}")
    if lab.derived:
        lines.append("")
    lines += [_launch_line(launch) for launch in lab.launches]
    lines += ["```", ""]
    if len(lab.launches) > 1:
        lines += ["The launches run in this order, one after another, for every case.", ""]
    if lab.declares:
        lines += [
            "Names in capitals are what your file may declare at file scope "
            "(`#define TILE_WIDTH 16` or `constexpr int TILE_WIDTH = 16;`); the first accepted "
            "spelling found is used, and the default where there is none:",
            "",
            "| name | accepted spellings | default | allowed |",
            "|---|---|---|---|",
        ]
        for d in lab.declares.values():
            spellings = ", ".join(f"`{n}`" for n in d.names)
            lines.append(f"| {d.name} | {spellings} | {d.default} | {_constraint(d)} |")
        lines.append("")
    return lines


def _contents(p: ParamSpec, init: InitSpec | None) -> str:
    if p.kind == "scalar" and p.value is not None:
        return f"`{_expr(p.value)}`"
    if init is None:
        return {
            "out": "filled with the grader's marker before the run",
            "scratch": "filled with the grader's marker before the run; not checked",
        }.get(p.kind, "written by hand in every case")
    e = {k: _expr(v) for k, v in init.expressions.items()}
    whole = p.dtype not in FLOAT_DTYPES
    text = {
        "uniform": (
            f"random whole numbers from {e.get('low')} to {e.get('high')}"
            if whole
            else f"random, uniform in [{e.get('low')}, {e.get('high')})"
        ),
        "integers": f"random whole numbers from {e.get('low')} to {e.get('high')}",
        "normal": f"random, normal with mean {e.get('mean')} and standard deviation {e.get('std')}"
        + (", rounded to whole numbers and clipped to the type's range" if whole else ""),
        "constant": f"every element {e.get('value')}",
        "zeros": "zeros",
    }[init.dist]
    if p.kind == "scratch":
        text += ", set before the run; not checked"
    elif p.kind == "inout":
        text += ", set before the run"
    elif p.kind == "scalar":
        text = text.replace("random, ", "random ").replace(
            "random whole numbers", "a random whole number"
        )
    return text


def _data(lab: LabSpec) -> list[str]:
    lines = [
        "## The data",
        "",
        "| parameter | kind | type | shape | contents |",
        "|---|---|---|---|---|",
    ]
    by_hand = {name for case in lab.cases for name in case.inputs}
    for p in lab.params:
        kind = _KINDS.get(p.kind, "scalar")
        shape = " × ".join(_expr(d) for d in p.shape) if p.shape else ""
        contents = _contents(p, p.init)
        if p.name in by_hand and p.init is not None:
            contents += " (written by hand in some cases)"
        lines.append(f"| `{p.name}` | {kind} | {p.dtype} | {shape} | {contents} |")
    lines.append("")
    if any(p.dtype in ("float16", "bfloat16") for p in lab.params):
        lines += [
            "float16 (`__half`) and bfloat16 (`__nv_bfloat16`) data are 16-bit patterns. The "
            "grader serves no cuda_fp16.h or cuda_bf16.h: declare those pointers "
            "`unsigned short*` and convert the bits (float16 with the PTX instructions "
            "`cvt.f32.f16` and `cvt.rn.f16.f32`; a bfloat16 is the upper half of a float).",
            "",
        ]
    return lines


def _sizes(sizes: dict[str, Number]) -> str:
    return ", ".join(
        f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in sizes.items()
    )


def _cases(lab: LabSpec) -> list[str]:
    lines = ["## Test cases", "", "| case | sizes | points |", "|---|---|---|"]
    for case in lab.cases:
        if case.hidden:
            continue
        notes = []
        if lab.timing is not None and lab.timing.case == case.name:
            notes.append("timed")
        if lab.sanitizer and lab.sanitizer_case == case.name:
            notes.append("also run under compute-sanitizer")
        note = f" ({', '.join(notes)})" if notes else ""
        lines.append(f"| {case.name} | {_sizes(case.sizes)}{note} | {case.points:g} |")
    lines.append("")
    for case in lab.cases:
        for name, literal in case.inputs.items():
            if case.hidden:
                continue
            shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v)
                              for v in literal.values[:MAX_SHOWN_VALUES])  # fmt: skip
            more = (
                f", ... ({len(literal.values)} values)"
                if len(literal.values) > MAX_SHOWN_VALUES
                else ""
            )
            lines.append(f"In case {case.name}, `{name}` is written by hand: [{shown}{more}].")
    if any(case.inputs for case in lab.cases if not case.hidden):
        lines.append("")
    hidden = [c for c in lab.cases if c.hidden]
    if hidden:
        pts = " + ".join(f"{c.points:g}" for c in hidden)
        lines += [
            f"There {'is' if len(hidden) == 1 else 'are'} also {len(hidden)} hidden "
            f"case{'s' if len(hidden) != 1 else ''} ({pts} points): you see only pass or fail "
            "until the due date.",
            "",
        ]
    return lines


def _tolerance_text(lab: LabSpec, p: ParamSpec) -> str:
    if p.dtype not in FLOAT_DTYPES:
        return "must equal the expected value exactly"
    tol = lab.tolerance.get(p.dtype)
    if tol is None:
        return "is compared"
    return (
        f"passes when |yours − expected| ≤ atol + rtol · |expected|, with atol = "
        f"`{_expr(tol.atol)}` and rtol = `{_expr(tol.rtol)}`"
    )


def _per_case_tolerance(lab: LabSpec, p: ParamSpec) -> list[str]:
    tol = lab.tolerance.get(p.dtype)
    if tol is None or (isinstance(tol.atol, int | float) and isinstance(tol.rtol, int | float)):
        return []
    rows = []
    for case in lab.cases:
        if case.hidden:
            continue
        try:
            names = lab.sizes_for(case)
            atol, rtol = float(evaluate(tol.atol, names)), float(evaluate(tol.rtol, names))
        except ExprError:
            continue
        rows.append(f"| {case.name} | {_num(atol)} | {_num(rtol)} |")
    if not rows:
        return []
    return ["", f"| case | atol ({p.dtype}) | rtol |", "|---|---|---|", *rows, ""]


def _answer(lab: LabSpec) -> str:
    oracle = lab.expected_oracle
    if oracle == "python":
        file = lab.python_oracle.file if lab.python_oracle else "oracle.py"
        floats = any(p.needs_answer and p.dtype in FLOAT_DTYPES for p in lab.params)
        how = ", in double precision," if floats else ""
        return (
            f"The expected answer is computed by the lab's own Python code (`{file}`){how} "
            "from the same inputs."
        )
    if oracle.startswith("reference:"):
        name = oracle.split(":", 1)[1]
        return f"The expected answer is the output of the lab's reference kernel `{name}`."
    return (
        f"The expected answer is {_BUILTIN_ANSWERS.get(oracle, oracle)}, computed in double "
        "precision from the same inputs."
    )


def _checks(lab: LabSpec) -> list[str]:
    lines = ["## How answers are checked", "", _answer(lab), ""]
    for p in lab.params:
        if not p.is_output:
            continue
        if p.check == "elementwise":
            lines.append(f"- Every element of `{p.name}` {_tolerance_text(lab, p)}.")
            lines += _per_case_tolerance(lab, p)
        elif p.check == "sum":
            lines.append(
                f"- The grader adds up `{p.name}` in double precision; the total "
                f"{_tolerance_text(lab, p)}."
            )
            lines += _per_case_tolerance(lab, p)
        if "rows_sum_to_one" in p.properties:
            lines.append(
                f"- Every row of `{p.name}` (along its last dimension) must add up to 1, within "
                "the number of columns × atol + rtol."
            )
        if "sorted_permutation" in p.properties:
            lines.append(
                f"- `{p.name}` must hold exactly the values of `{p.of}`, in ascending order."
            )
        if p.check == "none" and not p.properties:
            lines.append(f"- `{p.name}` is judged by the lab's own check.")
    if lab.python_oracle is not None and lab.python_oracle.has_check:
        lines.append("- The lab's own check then runs on every case; it says what it found.")
    if lines[-1]:
        lines.append("")
    lines += [
        "Outputs are filled with a marker value before the run, so elements never written are "
        "reported as such; a write past the end of any array, or a change to an input, fails "
        "the case.",
        "",
    ]
    return lines


def _points(lab: LabSpec) -> list[str]:
    lines = [
        "## Points",
        "",
        f"- Correctness: {lab.correctness_points:g} points, per case, hidden cases included.",
    ]
    s = lab.scoring
    refs = ", ".join(r.name for r in lab.references)
    if s.performance_points and lab.timing is not None:
        lines.append(
            f"- Performance: {s.performance_points:g} points, only when every case passes: your "
            f"median time on {lab.timing.case} against the reference kernels `{s.baseline}` (0 "
            f"points at or above its time) and `{s.target}` (full points at or below its time), "
            "on a log scale in between."
        )
    elif lab.timing is not None:
        lines.append(
            f"- Your time on {lab.timing.case} is measured and shown beside the reference "
            f"kernels ({refs}), without points."
        )
    lines.append("")
    return lines


def spec_markdown(lab: LabSpec) -> str:
    """The generated part of the lab page, in Markdown (headings from level 2)."""
    parts = _kernels(lab) + _launches(lab) + _data(lab) + _cases(lab) + _checks(lab) + _points(lab)
    return "\n".join(parts).rstrip() + "\n"
