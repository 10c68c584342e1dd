"""Read and validate a lab.toml into a `LabSpec` (the model lives in model.py).

Every error names the file and the field path, e.g.
`matmul-tiled/lab.toml: cases[2].sizes: size 'K' is missing (the spec uses K, M, N; ...)`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from graders.spec.cases import read_cases
from graders.spec.checks import check_every_case, check_names
from graders.spec.digest import content_digest
from graders.spec.dtypes import FLOAT_DTYPES
from graders.spec.expr import Number
from graders.spec.fields import CASE_NAME, IDENTIFIER, FieldReader
from graders.spec.launches import read_launches
from graders.spec.model import (
    BUILTIN_ORACLES,
    BUILTIN_REFERENCES,
    LAB_ID_PATTERN,
    PROFILE_FINDINGS,
    PYTHON_ORACLE,
    REPORT_DOWNLOADS,
    CaseSpec,
    DeclareSpec,
    LabSpec,
    LabSpecError,
    LimitsSpec,
    ParamSpec,
    ProfileSpec,
    PythonOracleSpec,
    ReferenceSpec,
    ScoringSpec,
    TimingSpec,
    ToleranceSpec,
    WorkSpec,
)
from graders.spec.oracle_file import DEFAULT_ORACLE_FILE, read_oracle_file
from graders.spec.params import read_params

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


# Built-in oracles whose answer is one number: an output compared with it elementwise must
# have one element (checks.py), or check = "sum".
ONE_NUMBER_ORACLES = frozenset({"sum", "dot"})

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
    "work",
    "profile",
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
        required={"id", "title"},
        optional={
            "kernel", "kernels", "page", "requires", "sanitizer", "sanitizer_case",
            "sanitizer_hazard_points", "nvrtc_options",
        },
    )  # fmt: skip
    lab_id = ctx.string(lab["id"], "lab.id", pattern=LAB_ID_PATTERN)
    if lab_id != folder.name:
        ctx.fail("lab.id", f"{lab_id!r} must equal the folder name {folder.name!r}")
    page_name = ctx.string(lab.get("page", "lab.md"), "lab.page")
    page_markdown = _read_text(ctx, folder, page_name, "lab.page")
    options = ctx.list_of(lab.get("nvrtc_options", []), "lab.nvrtc_options", ctx.string)
    for i, opt in enumerate(options):
        if opt.startswith(FORBIDDEN_OPTION_PREFIXES):
            ctx.fail(f"lab.nvrtc_options[{i}]", f"{opt!r} is not allowed (no include paths)")

    kernels = _kernels(ctx, lab)
    params = read_params(ctx, data["params"])
    declares = _declares(ctx, data.get("declare", {}))
    derived = _derived(ctx, data.get("derived", {}))
    launches = read_launches(ctx, data["launch"], params, kernels)
    cases = read_cases(ctx, data["cases"], folder, params)
    _check_inputs_have_data(ctx, params, cases)
    references = _references(ctx, folder, data.get("references", []))
    oracle, python_oracle = _expected(ctx, data["expected"], references, folder)
    tolerance = _tolerance(ctx, data.get("tolerance", {}), params)
    limits = _limits(ctx, data.get("limits", {}))
    timing = _timing(ctx, data["timing"], cases) if "timing" in data else None
    scoring = _scoring(ctx, data.get("scoring", {}), references, timing)

    _check_oracle_fits(ctx, oracle, python_oracle, params, references)
    _check_timed_inputs(ctx, params, cases, timing)
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
        kernel=kernels[0],
        kernels=kernels,
        python_oracle=python_oracle,
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
        work=_work(ctx, data["work"]) if "work" in data else None,
        profile=_profile(ctx, data.get("profile", {}), cases, references),
        sanitizer_hazard_points=hazard_points,
        digest=content_digest(folder, _named_files(page_name, references, python_oracle, cases)),
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


def _kernels(ctx: FieldReader, lab: dict[str, Any]) -> tuple[str, ...]:
    """`kernel = "name"`, or `kernels = [...]` for a lab whose submission defines several."""
    if "kernel" in lab and "kernels" in lab:
        ctx.fail("lab", "takes `kernel` or `kernels` (a list), not both")
    if "kernel" not in lab and "kernels" not in lab:
        ctx.fail(
            "lab",
            "'kernel' is missing (the kernel students define; or `kernels`, a list, for a lab "
            "whose launches run several kernels)",
        )
    if "kernel" in lab:
        return (ctx.string(lab["kernel"], "lab.kernel", pattern=IDENTIFIER),)
    names = ctx.list_of(
        lab["kernels"],
        "lab.kernels",
        lambda v, p: ctx.string(v, p, pattern=IDENTIFIER),
        min_len=1,
        max_len=16,
    )
    _unique(ctx, "lab.kernels", names, "")
    return tuple(names)


def _check_inputs_have_data(
    ctx: FieldReader, params: list[ParamSpec], cases: list[CaseSpec]
) -> None:
    for i, p in enumerate(params):
        if p.init is not None or p.kind not in ("in", "inout"):
            continue
        without = [c.name for c in cases if p.name not in c.inputs]
        if without:
            ctx.fail(
                f"params[{i}]",
                f"'init' is missing (an {p.kind!r} array needs generated contents, or "
                f"hand-written values in every case; case {without[0]!r} gives none)",
            )


def _check_timed_inputs(
    ctx: FieldReader, params: list[ParamSpec], cases: list[CaseSpec], timing: TimingSpec | None
) -> None:
    """Every timed repetition gets new inputs: a hand-written input of the timed case is then
    generated from its init, so it needs one."""
    if timing is None:
        return
    case = next(c for c in cases if c.name == timing.case)
    by_name = {p.name: p for p in params}
    for name in case.inputs:
        if by_name[name].init is None:
            ctx.fail(
                "timing.case",
                f"case {case.name!r} writes {name!r} by hand, and {name!r} has no init: every "
                "timed repetition runs on new data (a kernel could otherwise remember its "
                f"answer), made from the init; give {name!r} one, or time another case",
            )


def _unique(ctx: FieldReader, path: str, names: list[str], key: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            ctx.fail(f"{path}[{i}]{'.' + key if key else ''}", f"{name!r} is used twice")
        seen.add(name)


def _declares(ctx: FieldReader, value: Any) -> dict[str, DeclareSpec]:
    table = ctx.table(value, "declare", optional=set(value) if isinstance(value, dict) else ())
    out: dict[str, DeclareSpec] = {}
    for name, item in table.items():
        path = f"declare.{name}"
        ctx.string(name, path, pattern=IDENTIFIER)
        d = ctx.table(
            item,
            path,
            required={"names", "default", "min", "max"},
            optional={"multiple_of", "power_of_two"},
        )
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
        multiple = (
            ctx.integer(d["multiple_of"], f"{path}.multiple_of", minimum=1)
            if "multiple_of" in d
            else None
        )
        power = ctx.boolean(d.get("power_of_two", False), f"{path}.power_of_two")
        spec = DeclareSpec(name, tuple(names), default, low, high, multiple, power)
        # The extremes are what every expression is checked with, so they must be allowed.
        for key, v in (("default", default), ("min", low), ("max", high)):
            problem = spec.problem(v)
            if problem:
                ctx.fail(f"{path}.{key}", f"is {v}, but {problem}")
        out[name] = spec
    return out


def _derived(ctx: FieldReader, value: Any) -> dict[str, str | Number]:
    table = ctx.table(value, "derived", optional=set(value) if isinstance(value, dict) else ())
    for name, expr in table.items():
        ctx.string(name, f"derived.{name}", pattern=IDENTIFIER)
        ctx.expr(expr, f"derived.{name}")
    return dict(table)


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


def _expected(
    ctx: FieldReader, value: Any, references: list[ReferenceSpec], folder: Path
) -> tuple[str, PythonOracleSpec | None]:
    table = ctx.table(value, "expected", required={"oracle"}, optional={"file"})
    oracle = ctx.string(table["oracle"], "expected.oracle")
    if "file" in table and oracle != PYTHON_ORACLE:
        ctx.fail("expected.file", f"names the Python oracle's file; oracle is {oracle!r}")
    if oracle == PYTHON_ORACLE:
        name = ctx.string(table.get("file", DEFAULT_ORACLE_FILE), "expected.file")
        return oracle, read_oracle_file(ctx, folder, name, "expected.file")
    if oracle.startswith("reference:"):
        name = oracle.removeprefix("reference:")
        if not any(r.name == name and r.file for r in references):
            ctx.fail("expected.oracle", f"no reference kernel (with a file) is named {name!r}")
    elif oracle not in BUILTIN_ORACLES:
        ctx.fail(
            "expected.oracle",
            f"unknown oracle {oracle!r} (python, one of {', '.join(BUILTIN_ORACLES)}, or "
            "reference:<name>)",
        )
    return oracle, None


def _check_oracle_fits(
    ctx: FieldReader,
    oracle: str,
    python_oracle: PythonOracleSpec | None,
    params: list[ParamSpec],
    references: list[ReferenceSpec],
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
    for i, p in enumerate(params):
        judged_by_python = p.is_output and p.check == "none" and not p.properties
        if judged_by_python and (python_oracle is None or not python_oracle.has_check):
            where = python_oracle.file if python_oracle else "a Python oracle"
            ctx.fail(
                f"params[{i}].check",
                f"'python' needs a check(outputs, expected, inputs, sizes) function in {where} "
                '(oracle = "python"); without it nothing would check this output',
            )
    if oracle not in ORACLE_OPERANDS:
        return
    arrays, floats = ORACLE_OPERANDS[oracle]
    inputs = [p for p in params if p.is_array and p.is_input]
    float_scalars = [p for p in params if not p.is_array and p.dtype in FLOAT_DTYPES]
    answered = [p.name for p in params if p.needs_answer]
    if len(inputs) < arrays:
        ctx.fail(
            "expected.oracle",
            f"{oracle!r} needs {arrays} input array{'s' if arrays > 1 else ''}; "
            f"the params have {len(inputs)}",
        )
    if len(float_scalars) < floats:
        ctx.fail("expected.oracle", f"{oracle!r} needs a float scalar (the factor); there is none")
    for i, p in enumerate(params):
        if p.needs_answer and p.check == "sum" and oracle not in ONE_NUMBER_ORACLES:
            ctx.fail(
                f"params[{i}].check",
                f"'sum' compares the output's total with one number, but {oracle!r} computes an "
                'array; use check = "elementwise"',
            )
    if len(answered) > 1:
        ctx.fail(
            "expected.oracle",
            f"{oracle!r} computes one answer, but the params have {len(answered)} outputs "
            f'({", ".join(answered)}); the others would go unchecked. Use oracle = "python", '
            'a reference kernel (oracle = "reference:<name>") or make the others "scratch"',
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
        uses = p.needs_answer or "rows_sum_to_one" in p.properties
        if uses and p.dtype in FLOAT_DTYPES and p.dtype not in out:
            ctx.fail(
                "tolerance",
                f"[tolerance.{p.dtype}] is missing (params[{i}] {p.name!r} is a {p.dtype} output)",
            )
    return out


def _limits(ctx: FieldReader, value: Any) -> LimitsSpec:
    t = ctx.table(
        value,
        "limits",
        optional={
            "compile_seconds",
            "case_seconds",
            "memory_mb",
            "gpu_seconds",
            "device_globals_mb",
            "local_memory_mb",
        },
    )
    d = LimitsSpec()
    limits = LimitsSpec(
        ctx.number(
            t.get("compile_seconds", d.compile_seconds), "limits.compile_seconds", positive=True
        ),
        ctx.number(t.get("case_seconds", d.case_seconds), "limits.case_seconds", positive=True),
        ctx.integer(t.get("memory_mb", d.memory_mb), "limits.memory_mb", minimum=256),
        ctx.number(t.get("gpu_seconds", d.gpu_seconds), "limits.gpu_seconds", positive=True),
        device_globals_mb=ctx.integer(
            t.get("device_globals_mb", d.device_globals_mb), "limits.device_globals_mb", minimum=1
        ),
        local_memory_mb=ctx.integer(
            t.get("local_memory_mb", d.local_memory_mb), "limits.local_memory_mb", minimum=1
        ),
    )
    if limits.gpu_seconds < limits.case_seconds:
        ctx.fail(
            "limits.gpu_seconds",
            f"{limits.gpu_seconds:g} is less than limits.case_seconds "
            f"({limits.case_seconds:g}): one case could spend the whole submission's GPU time",
        )
    return limits


def _timing(ctx: FieldReader, value: Any, cases: list[CaseSpec]) -> TimingSpec:
    t = ctx.table(
        value,
        "timing",
        required={"case"},
        optional={
            "budget_seconds",
            "target_rse",
            "min_reps",
            "max_reps",
            "gpu_model",
            "flag_speedup",
        },
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
    gpu_model = ctx.string(t["gpu_model"], "timing.gpu_model").strip() if "gpu_model" in t else ""
    flag = ctx.number(t.get("flag_speedup", d.flag_speedup), "timing.flag_speedup")
    if flag < 1:
        ctx.fail("timing.flag_speedup", f"is a factor of at least 1, got {flag}")
    return TimingSpec(case, budget, rse, min_reps, max_reps, gpu_model, flag)


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


def _named_files(
    page: str,
    references: list[ReferenceSpec],
    python_oracle: PythonOracleSpec | None,
    cases: list[CaseSpec],
) -> list[str]:
    """Every file of the folder the spec names: what the lab's content digest covers."""
    names = [page, *(r.file for r in references if r.file)]
    if python_oracle is not None:
        names.append(python_oracle.file)
    names += [i.source for c in cases for i in c.inputs.values() if i.source != "literal"]
    return names


def _profile(
    ctx: FieldReader, value: Any, cases: list[CaseSpec], references: list[ReferenceSpec]
) -> ProfileSpec:
    t = ctx.table(value, "profile", optional={"enabled", "case", "report_download", "expect"})
    enabled = ctx.boolean(t.get("enabled", True), "profile.enabled")
    case = ""
    if "case" in t:
        case = ctx.string(t["case"], "profile.case")
        if case not in {c.name for c in cases}:
            ctx.fail("profile.case", f"no case is named {case!r}")
    download = ctx.string(t.get("report_download", "staff"), "profile.report_download")
    if download not in REPORT_DOWNLOADS:
        allowed = ", ".join(REPORT_DOWNLOADS)
        ctx.fail("profile.report_download", f"is one of {allowed}, got {download!r}")
    names = {r.name for r in references}
    expect_table = ctx.table(t.get("expect", {}), "profile.expect", optional=names)
    expect: dict[str, tuple[str, ...]] = {}
    for name, kinds in expect_table.items():
        path = f"profile.expect.{name}"
        listed = ctx.list_of(kinds, path, ctx.string)
        for i, kind in enumerate(listed):
            if kind not in PROFILE_FINDINGS:
                kinds_text = ", ".join(PROFILE_FINDINGS)
                ctx.fail(f"{path}[{i}]", f"{kind!r} is not a finding ({kinds_text})")
        expect[name] = tuple(listed)
    return ProfileSpec(enabled=enabled, case=case, report_download=download, expect=expect)


def _work(ctx: FieldReader, value: Any) -> WorkSpec:
    t = ctx.table(value, "work", required={"flops", "bytes"})
    return WorkSpec(ctx.expr(t["flops"], "work.flops"), ctx.expr(t["bytes"], "work.bytes"))


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
