"""Cross-field checks of a lab spec: names bound by every case, every expression evaluated."""

from __future__ import annotations

from collections.abc import Mapping

from graders.spec.expr import FUNCTION_NAMES, ExprError, Number, evaluate, names_in
from graders.spec.fields import FieldReader
from graders.spec.model import LabSpec

MAX_BLOCK_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_CASE_BYTES = 48 * 2**30  # a spec typo (2^40 elements) fails at load, not on the GPU
# What an integer scalar argument can hold; NumPy refuses (at run time) a value outside it.
INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _expressions(spec: LabSpec) -> list[tuple[str, str | Number]]:
    """Every expression in the spec that is evaluated per case, with its field path."""
    out: list[tuple[str, str | Number]] = []
    for i, p in enumerate(spec.params):
        out += [(f"params[{i}].shape[{j}]", d) for j, d in enumerate(p.shape)]
        if p.value is not None:
            out.append((f"params[{i}].value", p.value))
        if p.init is not None:
            keys = ("value",) if p.init.dist == "constant" else ("low", "high")
            out += [(f"params[{i}].init.{k}", getattr(p.init, k)) for k in keys]
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
        negative_ok = path.endswith((".low", ".high", ".value")) and path.startswith("params")
        if value < 0 and not negative_ok:
            ctx.fail(path, f"{where}: {expr!r} is {value}, which is negative")
    for i, p in enumerate(spec.params):
        # Generated integers are cast to the dtype, which would wrap a bound that does not fit.
        if p.init is None or p.dtype not in INT_RANGES:
            continue
        low, high = INT_RANGES[p.dtype]
        keys = ("value",) if p.init.dist == "constant" else ("low", "high")
        for key in keys:
            value = evaluate(getattr(p.init, key), names)
            if not low <= value <= high:
                ctx.fail(
                    f"params[{i}].init.{key}",
                    f"{where}: {value} does not fit in {p.dtype} ({low}..{high})",
                )
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
        total_bytes += p.numel_for(names) * (8 if p.dtype in ("float64", "int64") else 4)
    if total_bytes > MAX_CASE_BYTES:
        ctx.fail(f"cases[{ci}].sizes", f"{where}: the arrays need {total_bytes / 2**30:.0f} GiB")
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
