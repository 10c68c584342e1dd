"""Read `[[cases]]`: sizes (whole numbers, or floats for float-only names) and hand-written inputs.

A case may give an input array's contents instead of having them generated: a literal list in
the spec (`inputs = { data = [3, 1, 4] }`, nested lists for more dimensions) or a text file in
the lab folder (`inputs = { data = { file = "inputs/tiny.txt" } }`: numbers separated by
white space or commas, `#` starts a comment). Whether the count and shape fit the array is
checked per case in checks.py, where the sizes are evaluated.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from graders.spec.dtypes import FLOAT_DTYPES, FLOAT_MAX, INT_RANGES
from graders.spec.expr import Number
from graders.spec.fields import CASE_NAME, IDENTIFIER, FieldReader
from graders.spec.model import CaseSpec, LiteralInput, ParamSpec

# Hand-written inputs are for small, telling cases; generated data is for large ones.
MAX_LITERAL_VALUES = 65536
MAX_INPUT_FILE_BYTES = 4 * 2**20
_SEPARATORS = re.compile(r"[\s,]+")


def _flatten(ctx: FieldReader, value: Any, path: str) -> tuple[list[Any], tuple[int, ...] | None]:
    """A (nested) list as its row-major leaves and its shape; a flat list has shape None."""
    if not any(isinstance(v, list) for v in value):
        return list(value), None
    if not all(isinstance(v, list) for v in value):
        ctx.fail(path, "mixes numbers and lists; write one list per row")
    rows = [_flatten(ctx, v, f"{path}[{i}]") for i, v in enumerate(value)]
    inner = {shape or (len(leaves),) for leaves, shape in rows}
    if len(inner) != 1:
        ctx.fail(path, "has rows of different lengths; every row needs as many values")
    shape = (len(value), *inner.pop())
    if len(shape) > 4:
        ctx.fail(path, "nests deeper than 4 dimensions")
    return [leaf for leaves, _ in rows for leaf in leaves], shape


def _read_file_values(ctx: FieldReader, folder: Path, name: str, path: str) -> list[Number]:
    target = (folder / name).resolve()
    if not target.is_relative_to(folder):
        ctx.fail(path, f"{name!r} is outside the lab folder")
    if not target.is_file():
        ctx.fail(path, f"the file {name!r} does not exist in {folder.name}/")
    if target.stat().st_size > MAX_INPUT_FILE_BYTES:
        ctx.fail(path, f"{name!r} is larger than {MAX_INPUT_FILE_BYTES // 2**20} MiB")
    try:
        text = target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        ctx.fail(path, f"{name!r} is not UTF-8 text")
    values: list[Number] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for token in _SEPARATORS.split(line.split("#", 1)[0].strip()):
            if not token:
                continue
            try:
                values.append(int(token))
            except ValueError:
                try:
                    values.append(float(token))
                except ValueError:
                    ctx.fail(path, f"{name!r} line {number}: {token!r} is not a number")
            if len(values) > MAX_LITERAL_VALUES:
                ctx.fail(path, f"{name!r} has more than {MAX_LITERAL_VALUES} values")
    return values


def _check_values(
    ctx: FieldReader, values: list[Any], dtype: str, path: str, source: str
) -> tuple[Number, ...]:
    for i, v in enumerate(values):
        where = f"{source} value {i}" if source != "literal" else f"value {i}"
        if isinstance(v, bool) or not isinstance(v, int | float):
            ctx.fail(path, f"{where} is not a number ({v!r})")
        if dtype in INT_RANGES:
            low, high = INT_RANGES[dtype]
            if not isinstance(v, int):
                ctx.fail(path, f"{where} is {v!r}; a {dtype} array takes whole numbers")
            if not low <= v <= high:
                ctx.fail(path, f"{where} is {v}, which does not fit in {dtype} ({low}..{high})")
        elif dtype in FLOAT_DTYPES and math.isfinite(v) and abs(v) > FLOAT_MAX[dtype]:
            ctx.fail(path, f"{where} is {v}, beyond the largest {dtype} ({FLOAT_MAX[dtype]:g})")
    return tuple(values)


def _read_input(
    ctx: FieldReader, folder: Path, param: ParamSpec, value: Any, path: str
) -> LiteralInput:
    if isinstance(value, dict):
        table = ctx.table(value, path, required={"file"})
        name = ctx.string(table["file"], f"{path}.file")
        raw = _read_file_values(ctx, folder, name, f"{path}.file")
        shape, source = None, name
    elif isinstance(value, list):
        raw, shape = _flatten(ctx, value, path)
        source = "literal"
    else:
        ctx.fail(path, 'expected a list of values or a table { file = "..." }')
    if not raw:
        ctx.fail(path, "has no values")
    if len(raw) > MAX_LITERAL_VALUES:
        ctx.fail(
            path, f"has {len(raw)} values; at most {MAX_LITERAL_VALUES} may be written by hand"
        )
    values = _check_values(ctx, raw, param.dtype, path, source)
    return LiteralInput(param.name, values, shape, source)


def read_cases(
    ctx: FieldReader, value: Any, folder: Path, params: list[ParamSpec]
) -> list[CaseSpec]:
    by_name = {p.name: p for p in params}

    def one(item: Any, path: str) -> CaseSpec:
        c = ctx.table(
            item, path, required={"name", "sizes", "points"}, optional={"hidden", "inputs"}
        )
        name = ctx.string(c["name"], f"{path}.name", pattern=CASE_NAME)
        sizes_in = c["sizes"]
        sizes_table = ctx.table(
            sizes_in, f"{path}.sizes", optional=set(sizes_in) if isinstance(sizes_in, dict) else ()
        )
        sizes: dict[str, Number] = {}
        for key, v in sizes_table.items():
            ctx.string(key, f"{path}.sizes", pattern=IDENTIFIER)
            # Whole numbers where a shape or launch needs them is checked with the expressions.
            sizes[key] = ctx.finite(v, f"{path}.sizes.{key}")
        points = ctx.number(c["points"], f"{path}.points")
        hidden = ctx.boolean(c.get("hidden", False), f"{path}.hidden")
        inputs_in = c.get("inputs", {})
        table = ctx.table(
            inputs_in,
            f"{path}.inputs",
            optional=set(inputs_in) if isinstance(inputs_in, dict) else (),
        )
        inputs: dict[str, LiteralInput] = {}
        for key, v in table.items():
            param = by_name.get(key)
            if param is None or not (param.is_array and param.is_input):
                arrays = ", ".join(p.name for p in params if p.is_array and p.is_input)
                ctx.fail(
                    f"{path}.inputs.{key}",
                    f"{key!r} is not an input array (kind 'in' or 'inout'); those are: {arrays}",
                )
            inputs[key] = _read_input(ctx, folder, param, v, f"{path}.inputs.{key}")
        return CaseSpec(name, sizes, points, hidden, inputs)

    cases = ctx.list_of(value, "cases", one, min_len=1)
    seen: set[str] = set()
    for i, case in enumerate(cases):
        if case.name in seen:
            ctx.fail(f"cases[{i}].name", f"{case.name!r} is used twice")
        seen.add(case.name)
    return cases
