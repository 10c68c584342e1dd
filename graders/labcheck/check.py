"""`kernelgrader lab check FOLDER`: everything about a lab folder that can be known before
students submit to it.

Without a GPU: the spec loads; its page renders; the Python oracle (if any) runs on sample
data and answers in the outputs' shapes, and its check() accepts that answer; every reference
compiles (the compile stage checks that it defines every kernel the lab names with the right
parameter sizes; a static warning on one is reported, not failed); every faulty kernel's
header is well formed and the kernel compiles, or stops at the compile stage with the verdict
its header expects.

On a GPU (`run=True`): every reference passes every case, and every faulty kernel gets the
verdict its header expects, through `graders.grade.run_submission`; with `profile=True` (the
default there), every slow kernel in `slow/` passes every case and Nsight Compute finds on its
line what its header expects, and the references show the findings the lab's
`[profile.expect]` lists and no other (graders.labcheck.slow).

Tile forms (graders.labcheck.tile_forms), for a lab that declares names: the reference that
declares them, rewritten as careful students write it (the value chosen by a platform macro,
two constants in one declaration), must compile to the same declared values and, on a GPU,
pass every case.

Shortcut probes (graders.labcheck.probes): kernels made from a reference that do less than the
whole work (a constant answer, half the work plus an estimate, sampled work), and any the lab
writes by hand in probes/. Without a GPU they are compiled (one generated probe stands for the
three, which differ in one constant); on a GPU each must fail the lab, the timed case included,
or the check names the lab's weakness.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from graders.config import DEFAULTS, EngineSettings
from graders.labcheck.faults import (
    FaultExpectation,
    FaultHeaderError,
    Outcome,
    compile_problem,
    faulty_files,
    read_fault_header,
)
from graders.labcheck.probes import (
    PROBE_KINDS,
    PROBES_FOLDER,
    Probe,
    ProbeError,
    generated_probes,
    hand_written_probes,
)
from graders.labcheck.report import FAIL, OK, SKIP, WARN, CheckItem, LabCheckReport
from graders.labcheck.sample import sample_case, sample_outputs
from graders.labcheck.slow import SlowExpectation, SlowHeaderError, read_slow_header, slow_files
from graders.labcheck.tile_forms import TileForm, tile_forms
from graders.results import CompileResult
from graders.run import properties, python_oracle
from graders.run.python_oracle import OracleCodeError
from graders.spec import CaseSpec, LabSpec, LabSpecError, load_lab

# The oracle dry run uses cases up to this many elements in all (the smallest first).
DRY_RUN_ELEMENTS = 1 << 22
DRY_RUN_CASES = 3


def check_lab(
    folder: Path | str,
    *,
    run: bool = False,
    secret: str = "kernelgrader-lab-check",
    arch: str | None = None,
    progress: Callable[[CheckItem], None] | None = None,
    profile: bool = True,
    engine: EngineSettings = DEFAULTS,
) -> LabCheckReport:
    """Check a lab folder (see the module docstring); never raises for a broken lab.

    `engine` is what a worker of this install would be told (graders.config): the architecture
    to compile for where no GPU says its own and `arch` names none, and the GPU's admission."""
    report = LabCheckReport(Path(folder), progress=progress)
    try:
        lab = load_lab(folder)
    except LabSpecError as exc:
        report.add(FAIL, "spec", str(exc))
        return report
    report.lab_id = lab.id
    expectations = _read_headers(lab, report)
    report.add(
        OK,
        "spec",
        f"lab.toml loads ({len(lab.cases)} cases, {len(lab.references)} references, "
        f"{len(expectations)} faulty kernels)",
    )
    _check_page(lab, report)
    if lab.python_oracle is not None:
        _dry_run_oracle(lab, report)
    arch = arch or _default_arch(engine.default_arch)
    compiled = _compile_references(lab, report, arch)
    faulty = _compile_faulty(lab, expectations, report, arch)
    slow = _compile_slow(lab, report, arch)
    probes = _compile_probes(lab, compiled, report, arch, every_kind=run)
    forms = _compile_tile_forms(lab, compiled, report, arch)
    if run:
        from graders.labcheck.gpu import profile_on_gpu, run_on_gpu

        run_on_gpu(
            lab,
            compiled,
            faulty,
            report,
            secret=secret,
            probes=probes,
            forms=forms,
            engine=engine,
        )
        if profile:
            profile_on_gpu(lab, slow, report, secret=secret, arch=arch, engine=engine)
    elif probes:
        report.add(
            SKIP,
            "probes",
            "not run: each must fail the lab on a GPU (`lab check` without --no-gpu on a GPU "
            "host runs them)",
        )
    return report


def _compile_slow(
    lab: LabSpec, report: LabCheckReport, arch: str | None
) -> list[tuple[SlowExpectation, CompileResult]]:
    """Each slow kernel's header, and the kernel compiled as a submission."""
    out = []
    for path in slow_files(lab.folder):
        try:
            exp = read_slow_header(path)
        except SlowHeaderError as exc:
            report.add(FAIL, f"slow/{path.name}", str(exc))
            continue
        source = path.read_text(encoding="utf-8")
        result = _compiled(lab, source, path.name, arch, report, exp.label)
        if result is None:
            continue
        report.add(OK, exp.label, f"compiles (expects the profiler to find {exp.describe()})")
        out.append((exp, result))
    return out


def _read_headers(lab: LabSpec, report: LabCheckReport) -> list[FaultExpectation]:
    names = {c.name for c in lab.cases}
    out = []
    for path in faulty_files(lab.folder):
        try:
            out.append(read_fault_header(path, names, sanitizer=lab.sanitizer))
        except FaultHeaderError as exc:
            report.add(FAIL, f"faulty/{path.name}", str(exc))
    return out


def _check_page(lab: LabSpec, report: LabCheckReport) -> None:
    from graders.spec.page import spec_markdown

    try:
        spec_markdown(lab)
    except Exception as exc:  # a renderer bug must not hide the other checks
        report.add(FAIL, "page", f"the spec part of the lab page could not be made ({exc})")
        return
    if not lab.page_markdown.strip():
        report.add(WARN, "page", f"{lab.folder.name}/lab.md is empty; say what to compute there")


def _dry_run_oracle(lab: LabSpec, report: LabCheckReport) -> None:
    assert lab.python_oracle is not None
    subject = lab.python_oracle.file

    def size(case_name: str) -> int:
        names = lab.sizes_for(case_name)
        return sum(p.numel_for(names) for p in lab.params if p.is_array)

    small = sorted(
        (c for c in lab.cases if size(c.name) <= DRY_RUN_ELEMENTS), key=lambda c: size(c.name)
    )
    if not small:
        report.add(SKIP, subject, "every case is too large to try the oracle on sample data here")
        return
    tried = []
    checked = False
    for case in small[:DRY_RUN_CASES]:
        host, scalars = sample_case(lab, case)
        inputs = python_oracle.oracle_inputs(lab, host)
        try:
            answers = python_oracle.expected_outputs(
                lab, case, inputs, python_oracle.oracle_scalars(lab, scalars)
            )
            outputs = sample_outputs(lab, answers, case)
            problem = _properties_of_answer(lab, case, outputs, inputs)
            if problem:
                report.add(FAIL, subject, f"case {case.name}: expected()'s own answer {problem}")
                return
            if lab.python_oracle.has_check and outputs is not None:
                verdict = python_oracle.run_check(lab, case, outputs, answers, inputs)
                checked = True
                if not verdict.passed:
                    report.add(
                        FAIL,
                        subject,
                        f"case {case.name}: check() rejects expected()'s own answer (rounded to "
                        f"the outputs' dtypes): {verdict.message}",
                    )
                    return
        except OracleCodeError as exc:
            report.add(FAIL, subject, str(exc))
            return
        tried.append(case.name)
    what = "expected() and check()" if checked else "expected()"
    report.add(OK, subject, f"{what} ran on sample data for {', '.join(tried)}")


def _properties_of_answer(
    lab: LabSpec,
    case: CaseSpec,
    outputs: Mapping[str, np.ndarray] | None,
    inputs: Mapping[str, np.ndarray],
) -> str | None:
    """The oracle's answer, rounded to the output dtype, must have the properties it checks."""
    if outputs is None:
        return None
    names = lab.sizes_for(case)
    for p in lab.params:
        if not p.is_output or p.name not in outputs:
            continue
        got = np.asarray(outputs[p.name])
        if "rows_sum_to_one" in p.properties and p.dtype in lab.tolerance:
            atol, rtol = lab.tolerance[p.dtype].for_case(names)
            result = properties.rows_sum_to_one(
                got.astype(np.float64), name=p.name, atol=atol, rtol=rtol
            )
            if not result.ok:
                return f"fails rows_sum_to_one: {result.message}"
        if "sorted_permutation" in p.properties and p.of is not None:
            result = properties.sorted_permutation(got, inputs[p.of], name=p.name, of=p.of)
            if not result.ok:
                return f"fails sorted_permutation: {result.message}"
    return None


_COMPILED: dict[tuple[str, ...], CompileResult] = {}


def compile_cached(lab: LabSpec, source: str, filename: str, arch: str | None) -> CompileResult:
    """compile_submission, remembered in this process for the same lab file, rules and source
    (the test suite checks the built-in labs both kernel by kernel and through check_lab)."""
    from graders.compile.compiler import compile_submission

    spec_text = (lab.folder / "lab.toml").read_bytes()
    key = (
        str(lab.folder),
        hashlib.sha256(spec_text).hexdigest(),
        "\0".join(lab.requires),
        filename,
        hashlib.sha256(source.encode()).hexdigest(),
        arch or "",
    )
    if key not in _COMPILED:
        _COMPILED[key] = compile_submission(lab, source, arch=arch, filename=filename)
    return _COMPILED[key]


def _compile(lab: LabSpec, source: str, filename: str, arch: str | None) -> CompileResult:
    return compile_cached(lab, source, filename, arch)


def _default_arch(fallback: str) -> str:
    from graders.compile.compiler import default_arch

    return default_arch(fallback)


def _compiled(
    lab: LabSpec,
    source: str,
    filename: str,
    arch: str | None,
    report: LabCheckReport,
    label: str,
) -> CompileResult | None:
    """The source compiled; or None, the compiler's message and log reported under `label`."""
    result = _compile(lab, source, filename, arch)
    if result.ok:
        return result
    log = f"\n{result.log}" if result.log else ""
    report.add(FAIL, label, f"does not compile: {result.message}{log}")
    return None


def _compile_references(
    lab: LabSpec, report: LabCheckReport, arch: str | None
) -> dict[str, CompileResult]:
    # Compiled as the run stage compiles them: without the submissions' `requires`.
    ref_lab = lab.for_references()
    out: dict[str, CompileResult] = {}
    for ref in lab.references:
        if ref.file is None:
            continue
        subject = f"reference {ref.file}"
        result = _compiled(ref_lab, ref.source, ref.file, arch, report, subject)
        if result is None:
            continue
        out[ref.name] = result
        for warning in result.warnings:
            report.add(WARN, subject, f"students would be warned about their copy of it: {warning}")
        report.add(OK, subject, f"compiles for {result.arch}")
    return out


def outcome_of_compile(result: CompileResult) -> Outcome:
    """A compile result as a faulty kernel's header speaks of it."""
    warnings = tuple(result.warnings)
    if not result.ok:
        return Outcome(result.reason, f"{result.message}\n{result.log}".strip(), warnings)
    return Outcome("", "", warnings)


def _compile_faulty(
    lab: LabSpec,
    expectations: list[FaultExpectation],
    report: LabCheckReport,
    arch: str | None,
) -> list[tuple[FaultExpectation, CompileResult]]:
    """Each faulty kernel compiled as a submission; those that must run, with their results."""
    to_run = []
    for exp in expectations:
        source = exp.path.read_text(encoding="utf-8")
        result = _compile(lab, source, exp.path.name, arch)
        outcome = outcome_of_compile(result)
        problem = compile_problem(exp, outcome)
        if problem:
            report.add(FAIL, exp.label, problem)
        elif exp.compile_stage:
            report.add(OK, exp.label, f"stops at the compile stage with {exp.verdict}, as expected")
        else:
            report.add(OK, exp.label, f"compiles (expects {exp.describe()} when run)")
            to_run.append((exp, result))
    return to_run


def _compile_tile_forms(
    lab: LabSpec, references: dict[str, CompileResult], report: LabCheckReport, arch: str | None
) -> list[tuple[TileForm, CompileResult]]:
    """The lab's declared values in the unusual forms of graders.labcheck.tile_forms, each
    compiled as a submission: the grader must read the values the reference itself gets."""
    if not lab.declares:
        return []
    forms, notes = tile_forms(lab)
    for note in notes:
        report.add(SKIP, "tile forms", note)
    out = []
    by_file = {ref.file: ref.name for ref in lab.references}
    for form in forms:
        reference = references.get(by_file.get(form.origin, ""))
        result = _compiled(lab, form.source, form.filename, arch, report, form.label)
        if result is None or reference is None:
            continue
        read, wanted = _reading(result), _reading(reference)
        if read != wanted:
            report.add(
                FAIL,
                form.label,
                f"the grader reads {read} from {form.origin} written in this form, but "
                f"{wanted} from the reference itself: the launch would not match the kernel",
            )
            continue
        report.add(OK, form.label, f"compiles from {form.origin}; the grader reads {read}")
        out.append((form, result))
    return out


def _reading(result: CompileResult) -> str:
    """What the grader read of a file's declared names: the values it read from the file (the
    compile message names them), the defaults it took, and its notes."""
    named = re.search(r"\(([^()]*)\)", result.message)
    read = named.group(1).split(", ") if named else []
    said = read + [
        f"{name} = {value} by default"
        for name, value in result.declarations.items()
        if f"{name} = {value}" not in read
    ]
    notes = len(result.warnings)
    return ", ".join(said) + (f", with {notes} note{'s' if notes != 1 else ''}" if notes else "")


def _compile_probes(
    lab: LabSpec, references: dict[str, CompileResult], report: LabCheckReport,
    arch: str | None, *, every_kind: bool,
) -> list[tuple[Probe, CompileResult]]:  # fmt: skip
    """The lab's hand-written probes and those generated from the first reference that can
    be wrapped, compiled as references are (trusted: without `requires`). Without
    `every_kind`, one generated probe is compiled for the three."""
    ref_lab = lab.for_references()
    out: list[tuple[Probe, CompileResult]] = []
    written, problems = hand_written_probes(lab.folder)
    for problem in problems:
        report.add(FAIL, "probes", problem)
    for probe in written:
        result = _compiled(ref_lab, probe.source, probe.filename, arch, report, probe.label)
        if result is None:
            continue
        out.append((probe, result))
        report.add(OK, probe.label, f"compiles ({probe.what})")
    skipped: list[str] = []
    for ref in lab.references:
        if ref.file is None or ref.name not in references:
            continue
        try:
            made, notes = generated_probes(lab, ref.file, references[ref.name].declarations)
        except ProbeError as exc:
            skipped.append(f"{ref.file}: {exc}")
            continue
        chosen = made if every_kind else [p for p in made if p.kind == "half"]
        results = [(p, _compile(ref_lab, p.source, p.filename, arch)) for p in chosen]
        broken = next((r for _, r in results if not r.ok), None)
        if broken is not None:
            skipped.append(f"{ref.file}: the wrapped kernel does not compile ({broken.message})")
            continue
        out.extend(results)
        kinds = ", ".join(PROBE_KINDS)
        also = f" (not from {'; '.join(skipped)})" if skipped else ""
        compiled = (
            " compile"
            if every_kind
            else "; the half probe compiles (the others differ from it in one constant)"
        )
        noted = f"; note: {'; '.join(notes)}" if notes else ""
        report.add(
            OK, "probes", f"shortcut probes ({kinds}) generated from {ref.file}{also}{compiled}"
            f"{noted}"
        )  # fmt: skip
        return out
    if written:
        report.add(
            OK, "probes", f"no probe generated ({'; '.join(skipped) or 'no file reference'}); "
            "the hand-written ones stand in"
        )  # fmt: skip
    else:
        report.add(
            WARN,
            "probes",
            "no shortcut probe could be generated from the references ("
            f"{'; '.join(skipped) or 'the lab has no reference file'}): write them by hand in "
            f'{PROBES_FOLDER}/ (SPEC_FORMAT.md, "Shortcut probes")',
        )
    return out
