"""Cross-field checks of a lab spec: names bound by every case, every expression evaluated."""

from __future__ import annotations

from collections.abc import Mapping

from graders.spec.dtypes import DTYPE_BYTES, FLOAT_MAX, INT_RANGES, INTEGER_DTYPES
from graders.spec.expr import FUNCTION_NAMES, ExprError, Number, evaluate, names_in
from graders.spec.fields import FieldReader
from graders.spec.model import LabSpec

MAX_BLOCK_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_CASE_BYTES = 48 * 2**30  # a spec typo (2^40 elements) fails at load, not on the GPU


def _expressions(spec: LabSpec) -> list[tuple[str, str | Number]]:
    """Every expression in the spec that is evaluated per case, with its field path."""
    out: list[tuple[str, str | Number]] = []
    for i, p in enumerate(spec.params):
        out += [(f"params[{i}].shape[{j}]", d) for j, d in enumerate(p.shape)]
        if p.value is not None:
            out.append((f"params[{i}].value", p.value))
        if p.init is not None:
            out += [(f"params[{i}].init.{k}", v) for k, v in p.init.expressions.items()]
    for i, launch in enumerate(spec.launches):
        out += [(f"launch[{i}].block[{j}]", b) for j, b in enumerate(launch.block)]
        out += [(f"launch[{i}].grid[{j}]", g) for j, g in enumerate(launch.grid)]
        out.append((f"launch[{i}].shared_bytes", launch.shared_bytes))
        param_names = {p.name for p in spec.params}
        out += [
            (f"launch[{i}].args[{j}]", a) for j, a in enumerate(launch.args) if a not in param_names
        ]
    for dtype, tol in spec.tolerance.items():
        out += [(f"tolerance.{dtype}.atol", tol.atol), (f"tolerance.{dtype}.rtol", tol.rtol)]
    if spec.work is not None:
        out += [("work.flops", spec.work.flops), ("work.bytes", spec.work.bytes)]
    return out


def _integer_expressions(spec: LabSpec) -> list[tuple[str, str | Number]]:
    """The expressions whose value must be a whole number: shapes, launch geometry, the values
    of integer scalars and the integer arguments of later launches."""
    out: list[tuple[str, str | Number]] = []
    for i, p in enumerate(spec.params):
        out += [(f"params[{i}].shape[{j}]", d) for j, d in enumerate(p.shape)]
        if p.value is not None and p.dtype in INTEGER_DTYPES:
            out.append((f"params[{i}].value", p.value))
    param_names = {p.name for p in spec.params}
    for i, launch in enumerate(spec.launches):
        out += [(f"launch[{i}].block[{j}]", b) for j, b in enumerate(launch.block)]
        out += [(f"launch[{i}].grid[{j}]", g) for j, g in enumerate(launch.grid)]
        out.append((f"launch[{i}].shared_bytes", launch.shared_bytes))
        signature = spec.signature_of(launch.kernel)
        out += [
            (f"launch[{i}].args[{j}]", a)
            for j, (a, slot) in enumerate(zip(launch.args, signature, strict=True))
            if a not in param_names and slot.dtype in INTEGER_DTYPES
        ]
    return out


def whole_number_sizes(spec: LabSpec) -> dict[str, str]:
    """Size names that must be whole numbers, each with the first field that needs it (through
    derived names too); the other sizes may be floats (a leaky ReLU's alpha)."""
    needed: dict[str, str] = {}
    pending = [(path, names_in(e)) for path, e in _integer_expressions(spec)]
    while pending:
        path, names = pending.pop(0)
        for name in sorted(names):
            if name in needed or name in spec.declares:
                continue
            needed[name] = path
            if name in spec.derived:
                pending.append((path, names_in(spec.derived[name])))
    return {k: v for k, v in needed.items() if k not in spec.derived}


def check_names(ctx: FieldReader, spec: LabSpec) -> None:
    """Sizes are what cases bind: every free name of every expression, and nothing else."""
    bound_elsewhere = set(spec.declares) | set(spec.derived)
    for name in spec.derived:
        if name in spec.declares:
            ctx.fail(f"derived.{name}", f"{name!r} is also a declaration name")
    sources: dict[str, str] = {}
    for path, expr in _expressions(spec) + [(f"derived.{k}", v) for k, v in spec.derived.items()]:
        for name in sorted(names_in(expr)):
            if name not in bound_elsewhere:
                sources.setdefault(name, path)
    needed = set(sources)
    what = ", ".join(sorted(needed)) or "no sizes"
    for i, case in enumerate(spec.cases):
        for name in sorted(needed - set(case.sizes)):
            ctx.fail(
                f"cases[{i}].sizes",
                f"size {name!r} is missing (the spec uses {what}; first in {sources[name]})",
            )
        for name in sorted(set(case.sizes) - needed):
            clash = " (it is a declaration or derived name)" if name in bound_elsewhere else ""
            ctx.fail(
                f"cases[{i}].sizes",
                f"size {name!r} is not used by any expression{clash}; the spec uses {what}",
            )
    for name in needed & FUNCTION_NAMES:
        ctx.fail(sources[name], f"{name!r} is a function name")
    whole = whole_number_sizes(spec)
    for i, case in enumerate(spec.cases):
        for name, value in case.sizes.items():
            if name not in whole:
                continue
            if not isinstance(value, int):
                ctx.fail(
                    f"cases[{i}].sizes.{name}",
                    f"must be a whole number, got {value!r} ({name} is used in {whole[name]}, "
                    "which needs one; only sizes that float expressions alone use may be floats)",
                )
            if value < 0:
                ctx.fail(f"cases[{i}].sizes.{name}", f"must be at least 0, got {value}")


def _declaration_variants(spec: LabSpec) -> list[dict[str, int]]:
    if not spec.declares:
        return [{}]
    return [
        {n: d.default for n, d in spec.declares.items()},
        {n: d.min for n, d in spec.declares.items()},
        {n: d.max for n, d in spec.declares.items()},
    ]


def check_every_case(ctx: FieldReader, spec: LabSpec) -> None:
    """Evaluate every expression for every case (with default, min and max declarations)."""
    for ci, case in enumerate(spec.cases):
        for decl in _declaration_variants(spec):
            label = f" with {decl}" if decl else ""
            where = f"case {case.name!r}{label}"
            try:
                names = spec.sizes_for(case, decl)
            except ExprError as exc:
                ctx.fail("derived", f"{where}: {exc}")
            _check_case(ctx, spec, ci, where, names)


def _check_case(
    ctx: FieldReader, spec: LabSpec, ci: int, where: str, names: Mapping[str, Number]
) -> None:
    for path, expr in _expressions(spec):
        try:
            value = evaluate(expr, names)
        except ExprError as exc:
            ctx.fail(path, f"{where}: {exc}")
        negative_ok = path.endswith((".low", ".high", ".value", ".mean"))
        if value < 0 and not (negative_ok and path.startswith("params")):
            ctx.fail(path, f"{where}: {expr!r} is {value}, which is negative")
    _check_init_ranges(ctx, spec, where, names)
    total_bytes = 0
    for i, p in enumerate(spec.params):
        if not p.is_array:
            continue
        try:
            shape = p.shape_for(names)
        except ExprError as exc:
            ctx.fail(f"params[{i}].shape", f"{where}: {exc}")
        if any(d < 1 for d in shape):
            ctx.fail(f"params[{i}].shape", f"{where}: shape {shape} has an empty dimension")
        total_bytes += p.numel_for(names) * DTYPE_BYTES[p.dtype]
    if total_bytes > MAX_CASE_BYTES:
        ctx.fail(f"cases[{ci}].sizes", f"{where}: the arrays need {total_bytes / 2**30:.0f} GiB")
    _check_literal_inputs(ctx, spec, ci, where, names)
    if spec.expected_oracle in ("sum", "dot"):
        for i, p in enumerate(spec.params):
            if p.needs_answer and p.check == "elementwise" and p.numel_for(names) != 1:
                ctx.fail(
                    f"params[{i}].check",
                    f"{where}: {spec.expected_oracle!r} computes one number, but {p.name} has "
                    f"{p.numel_for(names)} elements, so only its first would be compared; give "
                    f'it check = "sum" (the grader adds it up) or shape [1], or use '
                    'oracle = "python"',
                )
    for i, p in enumerate(spec.params):
        if p.of is not None and p.numel_for(names) != spec.param(p.of).numel_for(names):
            ctx.fail(
                f"params[{i}].of",
                f"{where}: {p.name} has {p.numel_for(names)} elements and {p.of} has "
                f"{spec.param(p.of).numel_for(names)}; a permutation has as many",
            )
    for li, launch in enumerate(spec.launches):
        try:
            grid, block, shared = launch.geometry(names)
        except ExprError as exc:
            ctx.fail(f"launch[{li}]", f"{where}: {exc}")
        threads = block[0] * block[1] * block[2]
        if min(block) < 1 or threads > MAX_BLOCK_THREADS:
            ctx.fail(
                f"launch[{li}].block",
                f"{where}: block {block} has {threads} threads (1 to {MAX_BLOCK_THREADS})",
            )
        for axis, (g, limit) in enumerate(zip(grid, MAX_GRID, strict=True)):
            if not 1 <= g <= limit:
                ctx.fail(f"launch[{li}].grid[{axis}]", f"{where}: {g} is outside 1..{limit}")
        if shared < 0:
            ctx.fail(f"launch[{li}].shared_bytes", f"{where}: {shared} is negative")
        try:
            bound = spec.launch_args(launch, names)
        except ExprError as exc:
            ctx.fail(f"launch[{li}].args", f"{where}: {exc}")
        for arg in bound:
            if arg.dtype not in INT_RANGES or arg.value is None:
                continue
            low, high = INT_RANGES[arg.dtype]
            if low <= arg.value <= high:
                continue
            path = (
                f"params[{spec.params.index(arg.param)}].value"
                if arg.param is not None
                else f"launch[{li}].args[{arg.position}]"
            )
            ctx.fail(path, f"{where}: {arg.value} does not fit in {arg.dtype} ({low}..{high})")


def _check_init_ranges(
    ctx: FieldReader, spec: LabSpec, where: str, names: Mapping[str, Number]
) -> None:
    """Generated values are cast to the dtype, which would wrap (or overflow) a bound that does
    not fit; `integers` bounds must be whole numbers, a normal's std not negative."""
    for i, p in enumerate(spec.params):
        if p.init is None:
            continue
        values = {k: evaluate(e, names) for k, e in p.init.expressions.items()}
        path = f"params[{i}].init"
        if values.get("std", 0) < 0:
            ctx.fail(f"{path}.std", f"{where}: {values['std']} is negative")
        if p.init.dist == "integers" or (p.init.dist == "uniform" and p.dtype in INT_RANGES):
            for key in ("low", "high"):
                if not float(values[key]).is_integer():
                    ctx.fail(f"{path}.{key}", f"{where}: {values[key]} is not a whole number")
            if values["low"] > values["high"]:
                ctx.fail(path, f"{where}: low {values['low']} is above high {values['high']}")
        if p.init.dist == "normal":
            continue  # integers are clipped to the dtype's range, floats are what they are
        if p.dtype in INT_RANGES:
            low, high = INT_RANGES[p.dtype]
            for key, value in values.items():
                if not low <= value <= high:
                    ctx.fail(
                        f"{path}.{key}",
                        f"{where}: {value} does not fit in {p.dtype} ({low}..{high})",
                    )
        elif p.dtype in FLOAT_MAX:
            for key, value in values.items():
                if abs(value) > FLOAT_MAX[p.dtype]:
                    ctx.fail(f"{path}.{key}", f"{where}: {value} is beyond the largest {p.dtype}")


def _check_literal_inputs(
    ctx: FieldReader, spec: LabSpec, ci: int, where: str, names: Mapping[str, Number]
) -> None:
    """Hand-written values fill their array exactly: as many, and nested as its shape."""
    for name, literal in spec.cases[ci].inputs.items():
        param = spec.param(name)
        shape = param.shape_for(names)
        path = f"cases[{ci}].inputs.{name}"
        count = param.numel_for(names)
        if len(literal.values) != count:
            ctx.fail(
                path,
                f"{where}: {len(literal.values)} values given; {name} has shape {list(shape)}, "
                f"{count} elements",
            )
        if literal.shape is not None and literal.shape != shape:
            ctx.fail(
                path,
                f"{where}: the lists nest as {list(literal.shape)}, but {name} has shape "
                f"{list(shape)}; write one list per row, or one flat list",
            )
