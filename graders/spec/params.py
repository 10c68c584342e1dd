"""Read `[[params]]`: each kernel parameter, how its data is made, and how an output is checked."""

from __future__ import annotations

from typing import Any

from graders.spec.dtypes import ARRAY_DTYPES, FLOAT_DTYPES, SCALAR_DTYPES
from graders.spec.fields import IDENTIFIER, FieldReader
from graders.spec.model import DISTRIBUTIONS, PARAM_KINDS, PROPERTIES, InitSpec, ParamSpec

# What `check` may name: a comparison with the oracle's answer, a built-in property, or
# "python" (the lab's oracle.py check() alone judges the output).
CHECK_NAMES = ("elementwise", "sum", *PROPERTIES, "python")
_INIT_KEYS: dict[str, tuple[str, ...]] = {
    "uniform": ("low", "high"),
    "integers": ("low", "high"),
    "normal": ("mean", "std"),
    "constant": ("value",),
    "zeros": (),
}


def read_init(ctx: FieldReader, value: Any, path: str) -> InitSpec:
    init = ctx.table(
        value, path, required={"dist"}, optional={"low", "high", "value", "mean", "std"}
    )
    dist = ctx.string(init["dist"], f"{path}.dist")
    if dist not in DISTRIBUTIONS:
        ctx.fail(f"{path}.dist", f"unknown distribution {dist!r} ({', '.join(DISTRIBUTIONS)})")
    wanted = _INIT_KEYS[dist]
    for key in wanted:
        if key not in init:
            needs = " and ".join(wanted)
            ctx.fail(path, f"{key!r} is missing (dist = {dist!r} needs {needs})")
    for key in sorted(set(init) - {"dist", *wanted}):
        takes = f"takes {' and '.join(wanted)}" if wanted else "takes nothing else"
        ctx.fail(f"{path}.{key}", f"is not used by dist = {dist!r}, which {takes}")
    fields = {key: ctx.expr(init[key], f"{path}.{key}") for key in wanted}
    return InitSpec(dist, **fields)


def _read_check(
    ctx: FieldReader, p: dict[str, Any], path: str, kind: str, dtype: str
) -> tuple[str, tuple[str, ...], str | None]:
    """`check` (one name or a list) as (comparison, properties, of)."""
    raw = p.get("check", "elementwise")
    if "check" in p and kind not in ("out", "inout"):
        ctx.fail(f"{path}.check", "only outputs are checked")
    if "of" in p and kind not in ("out", "inout"):
        ctx.fail(f"{path}.of", "only outputs are checked")
    names = [raw] if isinstance(raw, str) else raw
    names = ctx.list_of(names, f"{path}.check", ctx.string, min_len=1)
    for i, name in enumerate(names):
        where = f"{path}.check" if isinstance(raw, str) else f"{path}.check[{i}]"
        if name not in CHECK_NAMES:
            ctx.fail(where, f"unknown check {name!r} ({', '.join(CHECK_NAMES)})")
        if name in names[:i]:
            ctx.fail(where, f"{name!r} is listed twice")
    if "elementwise" in names and "sum" in names:
        ctx.fail(
            f"{path}.check",
            "'elementwise' and 'sum' compare with different answers (every element, or one "
            "total); pick one",
        )
    if "python" in names and len(names) > 1:
        ctx.fail(
            f"{path}.check",
            "'python' stands alone: it means the lab's check() in oracle.py judges this output "
            "(check() runs for every case anyway, after the other checks pass)",
        )
    if "rows_sum_to_one" in names and dtype not in FLOAT_DTYPES:
        ctx.fail(f"{path}.check", f"'rows_sum_to_one' needs a float output, not {dtype}")
    comparison = next((n for n in names if n in ("elementwise", "sum")), "none")
    properties = tuple(n for n in names if n in PROPERTIES)
    of = None
    if "of" in p:
        if "sorted_permutation" not in properties:
            ctx.fail(f"{path}.of", "names the input of a 'sorted_permutation' check; there is none")
        of = ctx.string(p["of"], f"{path}.of", pattern=IDENTIFIER)
    return comparison, properties, of


def _read_param(ctx: FieldReader, item: Any, path: str) -> ParamSpec:
    p = ctx.table(
        item,
        path,
        required={"name", "kind", "dtype"},
        optional={"shape", "init", "value", "check", "of"},
    )
    name = ctx.string(p["name"], f"{path}.name", pattern=IDENTIFIER)
    kind = ctx.string(p["kind"], f"{path}.kind")
    if kind not in PARAM_KINDS:
        ctx.fail(f"{path}.kind", f"unknown kind {kind!r} (one of {', '.join(PARAM_KINDS)})")
    dtype = ctx.string(p["dtype"], f"{path}.dtype")
    known = SCALAR_DTYPES if kind == "scalar" else ARRAY_DTYPES
    if dtype not in known:
        what = "scalar" if kind == "scalar" else "array"
        ctx.fail(f"{path}.dtype", f"unknown {what} dtype {dtype!r} (one of {', '.join(known)})")
    init = read_init(ctx, p["init"], f"{path}.init") if "init" in p else None
    if kind == "scalar":
        for key in ("shape", "check", "of"):
            if key in p:
                ctx.fail(f"{path}.{key}", "a scalar has no shape or check")
        if ("value" in p) == (init is not None):
            ctx.fail(path, "a scalar needs exactly one of `value` or `init`")
        value = ctx.expr(p["value"], f"{path}.value") if "value" in p else None
        return ParamSpec(name, kind, dtype, init=init, value=value)
    if "shape" not in p:
        ctx.fail(path, "'shape' is missing (arrays need a shape)")
    if "value" in p:
        ctx.fail(f"{path}.value", "only scalars take a value; arrays take init")
    shape = ctx.list_of(p["shape"], f"{path}.shape", ctx.expr, min_len=1, max_len=4)
    if init is not None and kind == "out":
        ctx.fail(
            f"{path}.init",
            "an 'out' array is filled by the grader with a marker before each run, so what was "
            "never written shows; use kind = 'inout' for an output that starts with data",
        )
    comparison, properties, of = _read_check(ctx, p, path, kind, dtype)
    return ParamSpec(name, kind, dtype, tuple(shape), init, None, comparison, properties, of)


def read_params(ctx: FieldReader, value: Any) -> list[ParamSpec]:
    params = ctx.list_of(value, "params", lambda v, p: _read_param(ctx, v, p), min_len=1)
    seen: set[str] = set()
    for i, p in enumerate(params):
        if p.name in seen:
            ctx.fail(f"params[{i}].name", f"{p.name!r} is used twice")
        seen.add(p.name)
    if not any(p.is_output for p in params):
        ctx.fail("params", "no parameter has kind 'out' or 'inout', so there is nothing to check")
    return [_resolve_of(ctx, params, i, p) for i, p in enumerate(params)]


def _resolve_of(ctx: FieldReader, params: list[ParamSpec], i: int, p: ParamSpec) -> ParamSpec:
    """The input a sorted_permutation output is checked against: named, or the only fit."""
    if "sorted_permutation" not in p.properties:
        return p
    inputs = [q for q in params if q.is_array and q.is_input and q.name != p.name]
    if p.of is not None:
        source = next((q for q in inputs if q.name == p.of), None)
        if source is None:
            ctx.fail(f"params[{i}].of", f"{p.of!r} is not an input array of this lab")
        if source.dtype != p.dtype:
            ctx.fail(
                f"params[{i}].of",
                f"{p.of!r} is {source.dtype} and {p.name!r} is {p.dtype}; a permutation keeps "
                "the dtype",
            )
        return p
    fits = [q.name for q in inputs if q.dtype == p.dtype]
    if len(fits) != 1:
        found = f"the {p.dtype} inputs are {', '.join(fits)}" if fits else f"no {p.dtype} input"
        ctx.fail(
            f"params[{i}].of",
            f"is missing: 'sorted_permutation' needs the input {p.name!r} is a permutation of "
            f'({found}); write of = "<input name>"',
        )
    return ParamSpec(
        p.name, p.kind, p.dtype, p.shape, p.init, p.value, p.check, p.properties, fits[0]
    )
