"""Read and validate a lab.toml into a `LabSpec` (the model lives in model.py).

Every error names the file and the field path, e.g.
`matmul-tiled/lab.toml: cases[2].sizes: size 'K' is missing (the spec uses K, M, N; ...)`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from graders.spec.checks import check_every_case, check_names
from graders.spec.digest import content_digest
from graders.spec.expr import Number
from graders.spec.fields import FieldReader
from graders.spec.model import (
    ARRAY_DTYPES,
    BUILTIN_ORACLES,
    BUILTIN_REFERENCES,
    FLOAT_DTYPES,
    LAB_ID_PATTERN,
    PARAM_KINDS,
    SCALAR_DTYPES,
    CaseSpec,
    DeclareSpec,
    InitSpec,
    LabSpec,
    LabSpecError,
    LaunchSpec,
    LimitsSpec,
    ParamSpec,
    ReferenceSpec,
    ScoringSpec,
    TimingSpec,
    ToleranceSpec,
)

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.x+-]{0,63}$")
# NVRTC options that would give a submission a way to read host files or change output kinds.
FORBIDDEN_OPTION_PREFIXES = ("-I", "--include-path", "-include", "--pre-include", "-o", "--output")
# What each built-in oracle reads (graders.run.oracles): input arrays (kind in or inout, in
# order) and float scalars. It computes one answer, so the lab may have one output only.
ORACLE_OPERANDS: dict[str, tuple[int, int]] = {
    "scale": (1, 1),
    "hadamard": (2, 0),
    "sum": (1, 0),
    "dot": (2, 0),
    "matmul": (2, 0),
    "conv1d": (2, 0),
    "conv2d": (2, 0),
}


TOP_KEYS = {
    "lab",
    "params",
    "derived",
    "declare",
    "launch",
    "expected",
    "tolerance",
    "cases",
    "references",
    "limits",
    "timing",
    "scoring",
}


def read_lab(folder: Path) -> LabSpec:
    folder = folder.resolve()
    ctx = FieldReader(f"{folder.name}/lab.toml")
    spec_file = folder / "lab.toml"
    if not spec_file.is_file():
        raise LabSpecError(f"{ctx.label}: the file does not exist (no lab at {folder})")
    try:
        data = tomllib.loads(spec_file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        ctx.fail("", "the file is not UTF-8 text")
    except tomllib.TOMLDecodeError as exc:
        ctx.fail("", f"not valid TOML ({exc})")
    ctx.table(
        data,
        "(top level)",
        required={"lab", "params", "launch", "expected", "cases"},
        optional=TOP_KEYS,
    )
    lab = ctx.table(
        data["lab"],
        "lab",
        required={"id", "title", "kernel"},
        optional={
            "page",
            "requires",
            "sanitizer",
            "sanitizer_case",
            "sanitizer_hazard_points",
            "nvrtc_options",
        },
    )
    lab_id = ctx.string(lab["id"], "lab.id", pattern=LAB_ID_PATTERN)
    if lab_id != folder.name:
        ctx.fail("lab.id", f"{lab_id!r} must equal the folder name {folder.name!r}")
    page_name = ctx.string(lab.get("page", "lab.md"), "lab.page")
    page_markdown = _read_text(ctx, folder, page_name, "lab.page")
    options = ctx.list_of(lab.get("nvrtc_options", []), "lab.nvrtc_options", ctx.string)
    for i, opt in enumerate(options):
        if opt.startswith(FORBIDDEN_OPTION_PREFIXES):
            ctx.fail(f"lab.nvrtc_options[{i}]", f"{opt!r} is not allowed (no include paths)")

    params = _params(ctx, data["params"])
    declares = _declares(ctx, data.get("declare", {}))
    derived = _derived(ctx, data.get("derived", {}))
    launches = _launches(ctx, data["launch"], params)
    cases = _cases(ctx, data["cases"])
    references = _references(ctx, folder, data.get("references", []))
    oracle = _expected(ctx, data["expected"], references)
    tolerance = _tolerance(ctx, data.get("tolerance", {}), params)
    limits = _limits(ctx, data.get("limits", {}))
    timing = _timing(ctx, data["timing"], cases) if "timing" in data else None
    scoring = _scoring(ctx, data.get("scoring", {}), references, timing)

    _check_oracle_fits(ctx, oracle, params, references)
    case_names = {c.name for c in cases}
    sanitizer = ctx.boolean(lab.get("sanitizer", False), "lab.sanitizer")
    sanitizer_case = lab.get("sanitizer_case")
    if sanitizer_case is not None:
        ctx.string(sanitizer_case, "lab.sanitizer_case")
        if sanitizer_case not in case_names:
            ctx.fail("lab.sanitizer_case", f"no case is named {sanitizer_case!r}")
    elif sanitizer:
        ctx.fail("lab.sanitizer_case", "is missing (sanitizer = true needs a small case to run)")
    hazard_points = None
    if "sanitizer_hazard_points" in lab:
        hazard_points = ctx.number(lab["sanitizer_hazard_points"], "lab.sanitizer_hazard_points")

    spec = LabSpec(
        id=lab_id,
        title=ctx.string(lab["title"], "lab.title"),
        kernel=ctx.string(lab["kernel"], "lab.kernel", pattern=IDENTIFIER),
        folder=folder,
        page_markdown=page_markdown,
        params=params,
        launches=launches,
        declares=declares,
        derived=derived,
        cases=cases,
        references=references,
        expected_oracle=oracle,
        tolerance=tolerance,
        limits=limits,
        timing=timing,
        scoring=scoring,
        sanitizer=sanitizer,
        sanitizer_case=sanitizer_case,
        requires=ctx.list_of(lab.get("requires", []), "lab.requires", ctx.string),
        nvrtc_options=options,
        sanitizer_hazard_points=hazard_points,
        digest=content_digest(folder, [page_name, *(r.file for r in references if r.file)]),
    )
    check_names(ctx, spec)
    check_every_case(ctx, spec)
    return spec


def _read_text(ctx: FieldReader, folder: Path, name: str, path: str) -> str:
    target = (folder / name).resolve()
    if not target.is_relative_to(folder):
        ctx.fail(path, f"{name!r} is outside the lab folder")
    if not target.is_file():
        ctx.fail(path, f"the file {name!r} does not exist in {folder.name}/")
    try:
        return target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        ctx.fail(path, f"{name!r} is not UTF-8 text")


def _init(ctx: FieldReader, value: Any, path: str) -> InitSpec:
    init = ctx.table(value, path, required={"dist"}, optional={"low", "high", "value"})
    dist = ctx.string(init["dist"], f"{path}.dist")
    if dist in ("uniform", "integers"):
        for key in ("low", "high"):
            if key not in init:
                ctx.fail(path, f"{key!r} is missing (dist = {dist!r} needs low and high)")
        if "value" in init:
            ctx.fail(f"{path}.value", f"is only for dist = 'constant', not {dist!r}")
        return InitSpec(
            dist, ctx.expr(init["low"], f"{path}.low"), ctx.expr(init["high"], f"{path}.high")
        )
    if dist == "constant":
        if "value" not in init or "low" in init or "high" in init:
            ctx.fail(path, "dist = 'constant' takes `value` only")
        return InitSpec(dist, value=ctx.expr(init["value"], f"{path}.value"))
    ctx.fail(f"{path}.dist", f"unknown distribution {dist!r} (uniform, integers, constant)")


def _params(ctx: FieldReader, value: Any) -> list[ParamSpec]:
    def one(item: Any, path: str) -> ParamSpec:
        p = ctx.table(
            item,
            path,
            required={"name", "kind", "dtype"},
            optional={"shape", "init", "value", "check"},
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
        init = _init(ctx, p["init"], f"{path}.init") if "init" in p else None
        if kind == "scalar":
            for key in ("shape", "check"):
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
        if init is None and kind in ("in", "inout"):
            ctx.fail(path, f"'init' is missing (an {kind!r} array needs generated contents)")
        if init is not None and kind in ("out", "scratch"):
            ctx.fail(
                f"{path}.init", f"a {kind!r} array is filled by the grader; use kind = 'inout'"
            )
        check = ctx.string(p.get("check", "elementwise"), f"{path}.check")
        if check not in ("elementwise", "sum"):
            ctx.fail(f"{path}.check", f"unknown check {check!r} (elementwise or sum)")
        if "check" in p and kind not in ("out", "inout"):
            ctx.fail(f"{path}.check", "only outputs are checked")
        return ParamSpec(name, kind, dtype, tuple(shape), init, None, check)

    params = ctx.list_of(value, "params", one, min_len=1)
    _unique(ctx, "params", [p.name for p in params], "name")
    if not any(p.is_output for p in params):
        ctx.fail("params", "no parameter has kind 'out' or 'inout', so there is nothing to check")
    return params


def _unique(ctx: FieldReader, path: str, names: list[str], key: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            ctx.fail(f"{path}[{i}].{key}", f"{name!r} is used twice")
        seen.add(name)


def _declares(ctx: FieldReader, value: Any) -> dict[str, DeclareSpec]:
    table = ctx.table(value, "declare", optional=set(value) if isinstance(value, dict) else ())
    out: dict[str, DeclareSpec] = {}
    for name, item in table.items():
        path = f"declare.{name}"
        ctx.string(name, path, pattern=IDENTIFIER)
        d = ctx.table(item, path, required={"names", "default", "min", "max"})
        names = ctx.list_of(
            d["names"],
            f"{path}.names",
            lambda v, p: ctx.string(v, p, pattern=IDENTIFIER),
            min_len=1,
        )
        default = ctx.integer(d["default"], f"{path}.default")
        low = ctx.integer(d["min"], f"{path}.min")
        high = ctx.integer(d["max"], f"{path}.max")
        if not low <= default <= high:
            ctx.fail(path, f"needs min <= default <= max, got {low}, {default}, {high}")
        out[name] = DeclareSpec(name, tuple(names), default, low, high)
    return out


def _derived(ctx: FieldReader, value: Any) -> dict[str, str | Number]:
    table = ctx.table(value, "derived", optional=set(value) if isinstance(value, dict) else ())
    for name, expr in table.items():
        ctx.string(name, f"derived.{name}", pattern=IDENTIFIER)
        ctx.expr(expr, f"derived.{name}")
    return dict(table)


def _launches(ctx: FieldReader, value: Any, params: list[ParamSpec]) -> list[LaunchSpec]:
    by_name = {p.name: p for p in params}

    def one(item: Any, path: str) -> LaunchSpec:
        launch = ctx.table(
            item, path, required={"block", "grid"}, optional={"shared_bytes", "args"}
        )
        block = ctx.list_of(launch["block"], f"{path}.block", ctx.expr, min_len=1, max_len=3)
        grid = ctx.list_of(launch["grid"], f"{path}.grid", ctx.expr, min_len=1, max_len=3)
        shared = ctx.expr(launch.get("shared_bytes", 0), f"{path}.shared_bytes")
        if "args" in launch:
            args = ctx.list_of(launch["args"], f"{path}.args", ctx.expr, min_len=1)
        else:
            args = [p.name for p in params]
        return LaunchSpec(tuple(block), tuple(grid), shared, tuple(args))

    launches = ctx.list_of(value, "launch", one, min_len=1)
    first = launches[0]
    for i, entry in enumerate(first.args):
        if not isinstance(entry, str) or entry not in by_name:
            ctx.fail(
                f"launch[0].args[{i}]",
                f"{entry!r} is not a parameter name; the first launch fixes the kernel's "
                "signature, so each of its arguments must name a param",
            )
    signature = [by_name[str(a)] for a in first.args]
    for li, launch in enumerate(launches[1:], start=1):
        if len(launch.args) != len(signature):
            ctx.fail(
                f"launch[{li}].args",
                f"has {len(launch.args)} arguments; the kernel takes {len(signature)}",
            )
        for i, (entry, slot) in enumerate(zip(launch.args, signature, strict=True)):
            param = by_name.get(entry) if isinstance(entry, str) else None
            where = f"launch[{li}].args[{i}]"
            if slot.is_array:
                if param is None or not param.is_array or param.dtype != slot.dtype:
                    ctx.fail(
                        where,
                        f"must name a {slot.dtype} array parameter "
                        f"(the kernel's argument {slot.name} is one)",
                    )
            elif param is not None and (param.is_array or param.dtype != slot.dtype):
                ctx.fail(where, f"{entry!r} must be a {slot.dtype} scalar or an expression")
    used = {a for launch in launches for a in launch.args if isinstance(a, str)}
    for i, p in enumerate(params):
        if p.name not in used:
            ctx.fail(f"params[{i}]", f"{p.name!r} is not passed to any launch")
    return launches


def _cases(ctx: FieldReader, value: Any) -> list[CaseSpec]:
    def one(item: Any, path: str) -> CaseSpec:
        c = ctx.table(item, path, required={"name", "sizes", "points"}, optional={"hidden"})
        name = ctx.string(c["name"], f"{path}.name", pattern=CASE_NAME)
        sizes_in = c["sizes"]
        sizes_table = ctx.table(
            sizes_in, f"{path}.sizes", optional=set(sizes_in) if isinstance(sizes_in, dict) else ()
        )
        sizes = {}
        for key, v in sizes_table.items():
            ctx.string(key, f"{path}.sizes", pattern=IDENTIFIER)
            sizes[key] = ctx.integer(v, f"{path}.sizes.{key}", minimum=0)
        points = ctx.number(c["points"], f"{path}.points")
        hidden = ctx.boolean(c.get("hidden", False), f"{path}.hidden")
        return CaseSpec(name, sizes, points, hidden)

    cases = ctx.list_of(value, "cases", one, min_len=1)
    _unique(ctx, "cases", [c.name for c in cases], "name")
    return cases


def _references(ctx: FieldReader, folder: Path, value: Any) -> list[ReferenceSpec]:
    def one(item: Any, path: str) -> ReferenceSpec:
        r = ctx.table(item, path, required={"name"}, optional={"file", "builtin"})
        name = ctx.string(r["name"], f"{path}.name", pattern=CASE_NAME)
        if ("file" in r) == ("builtin" in r):
            ctx.fail(path, "needs exactly one of `file` or `builtin`")
        if "file" in r:
            file = ctx.string(r["file"], f"{path}.file")
            if not file.endswith(".cu"):
                ctx.fail(f"{path}.file", f"{file!r} is not a .cu file")
            return ReferenceSpec(
                name, file=file, source=_read_text(ctx, folder, file, f"{path}.file")
            )
        builtin = ctx.string(r["builtin"], f"{path}.builtin")
        if builtin not in BUILTIN_REFERENCES:
            ctx.fail(
                f"{path}.builtin",
                f"unknown builtin {builtin!r} (one of {', '.join(BUILTIN_REFERENCES)})",
            )
        return ReferenceSpec(name, builtin=builtin)

    refs = ctx.list_of(value, "references", one)
    _unique(ctx, "references", [r.name for r in refs], "name")
    return refs


def _expected(ctx: FieldReader, value: Any, references: list[ReferenceSpec]) -> str:
    table = ctx.table(value, "expected", required={"oracle"})
    oracle = ctx.string(table["oracle"], "expected.oracle")
    if oracle.startswith("reference:"):
        name = oracle.removeprefix("reference:")
        if not any(r.name == name and r.file for r in references):
            ctx.fail("expected.oracle", f"no reference kernel (with a file) is named {name!r}")
    elif oracle not in BUILTIN_ORACLES:
        ctx.fail(
            "expected.oracle",
            f"unknown oracle {oracle!r} (one of {', '.join(BUILTIN_ORACLES)}, or reference:<name>)",
        )
    return oracle


def _check_oracle_fits(
    ctx: FieldReader, oracle: str, params: list[ParamSpec], references: list[ReferenceSpec]
) -> None:
    """A built-in oracle or reference that does not fit the params fails here, at load, rather
    than as "the grader failed" for every submission (or as the student's timed case)."""
    for i, ref in enumerate(references):
        if ref.builtin == "cublas" and oracle != "matmul":
            ctx.fail(
                f"references[{i}].builtin",
                f"'cublas' multiplies two matrices; it fits only a lab whose oracle is 'matmul', "
                f"not {oracle!r}",
            )
    if oracle not in ORACLE_OPERANDS:
        return
    arrays, floats = ORACLE_OPERANDS[oracle]
    inputs = [p for p in params if p.is_array and p.is_input]
    float_scalars = [p for p in params if not p.is_array and p.dtype in FLOAT_DTYPES]
    outputs = [p.name for p in params if p.is_output]
    if len(inputs) < arrays:
        ctx.fail(
            "expected.oracle",
            f"{oracle!r} needs {arrays} input array{'s' if arrays > 1 else ''}; "
            f"the params have {len(inputs)}",
        )
    if len(float_scalars) < floats:
        ctx.fail("expected.oracle", f"{oracle!r} needs a float scalar (the factor); there is none")
    if len(outputs) > 1:
        ctx.fail(
            "expected.oracle",
            f"{oracle!r} computes one answer, but the params have {len(outputs)} outputs "
            f"({', '.join(outputs)}); the others would go unchecked. Use a reference kernel "
            '(oracle = "reference:<name>") or make the others "scratch"',
        )


def _tolerance(ctx: FieldReader, value: Any, params: list[ParamSpec]) -> dict[str, ToleranceSpec]:
    table = ctx.table(value, "tolerance", optional=FLOAT_DTYPES)
    out: dict[str, ToleranceSpec] = {}
    for dtype, item in table.items():
        t = ctx.table(item, f"tolerance.{dtype}", required={"atol", "rtol"})
        out[dtype] = ToleranceSpec(
            dtype,
            ctx.expr(t["atol"], f"tolerance.{dtype}.atol"),
            ctx.expr(t["rtol"], f"tolerance.{dtype}.rtol"),
        )
    for i, p in enumerate(params):
        if p.is_output and p.dtype in FLOAT_DTYPES and p.dtype not in out:
            ctx.fail(
                "tolerance",
                f"[tolerance.{p.dtype}] is missing (params[{i}] {p.name!r} is a {p.dtype} output)",
            )
    return out


def _limits(ctx: FieldReader, value: Any) -> LimitsSpec:
    t = ctx.table(value, "limits", optional={"compile_seconds", "case_seconds", "memory_mb"})
    d = LimitsSpec()
    return LimitsSpec(
        ctx.number(
            t.get("compile_seconds", d.compile_seconds), "limits.compile_seconds", positive=True
        ),
        ctx.number(t.get("case_seconds", d.case_seconds), "limits.case_seconds", positive=True),
        ctx.integer(t.get("memory_mb", d.memory_mb), "limits.memory_mb", minimum=256),
    )


def _timing(ctx: FieldReader, value: Any, cases: list[CaseSpec]) -> TimingSpec:
    t = ctx.table(
        value,
        "timing",
        required={"case"},
        optional={"budget_seconds", "target_rse", "min_reps", "max_reps", "flag_speedup"},
    )
    d = TimingSpec(case="")
    case = ctx.string(t["case"], "timing.case")
    if case not in {c.name for c in cases}:
        ctx.fail("timing.case", f"no case is named {case!r}")
    rse = ctx.number(t.get("target_rse", d.target_rse), "timing.target_rse", positive=True)
    if rse >= 1:
        ctx.fail("timing.target_rse", f"is a fraction (0.01 = 1 %), got {rse}")
    min_reps = ctx.integer(t.get("min_reps", d.min_reps), "timing.min_reps", minimum=1)
    # Two samples at least: the spread (and the rse the stop rule uses) needs two.
    max_reps = ctx.integer(
        t.get("max_reps", d.max_reps), "timing.max_reps", minimum=max(min_reps, 2)
    )
    budget = ctx.number(
        t.get("budget_seconds", d.budget_seconds), "timing.budget_seconds", positive=True
    )
    flag = ctx.number(t.get("flag_speedup", d.flag_speedup), "timing.flag_speedup")
    if flag < 1:
        ctx.fail("timing.flag_speedup", f"is a factor of at least 1, got {flag}")
    return TimingSpec(case, budget, rse, min_reps, max_reps, flag)


def _scoring(
    ctx: FieldReader, value: Any, references: list[ReferenceSpec], timing: TimingSpec | None
) -> ScoringSpec:
    t = ctx.table(value, "scoring", optional={"performance_points", "baseline", "target"})
    points = ctx.number(t.get("performance_points", 0), "scoring.performance_points")
    names = {r.name for r in references}
    picked: dict[str, str | None] = {}
    for key in ("baseline", "target"):
        ref = t.get(key)
        if ref is not None:
            ctx.string(ref, f"scoring.{key}")
            if ref not in names:
                ctx.fail(
                    f"scoring.{key}",
                    f"no reference is named {ref!r} "
                    f"(references: {', '.join(sorted(names)) or 'none'})",
                )
        elif points > 0:
            ctx.fail(f"scoring.{key}", "is missing (performance points need a baseline and target)")
        picked[key] = ref
    if points > 0 and timing is None:
        ctx.fail("timing", "is missing (performance points need a timed case)")
    if points > 0 and picked["baseline"] == picked["target"]:
        ctx.fail("scoring.target", "must differ from scoring.baseline")
    return ScoringSpec(points, picked["baseline"], picked["target"])


def builtin_labs_dir() -> Path:
    """The repository's (or installed package's) `reference_kernels/` folder."""
    import reference_kernels

    return Path(reference_kernels.__file__).resolve().parent


def list_builtin_labs() -> list[str]:
    """The ids of the built-in labs: folders of reference_kernels/ holding a lab.toml."""
    root = builtin_labs_dir()
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "lab.toml").is_file())


def load_builtin_lab(lab_id: str) -> LabSpec:
    """Load a built-in lab by id; the id is checked first, since it may come from a request."""
    if not isinstance(lab_id, str) or not LAB_ID_PATTERN.match(lab_id):
        raise LabSpecError(f"{lab_id!r} is not a lab id (lowercase letters, digits and hyphens)")
    known = list_builtin_labs()
    if lab_id not in known:
        raise LabSpecError(
            f"there is no built-in lab {lab_id!r}; the built-in labs are: {', '.join(known)}"
        )
    return load_lab(builtin_labs_dir() / lab_id)


def load_lab(folder: Path | str) -> LabSpec:
    """Read `folder/lab.toml` and everything it names; raise LabSpecError if anything is off."""
    return read_lab(Path(folder))
