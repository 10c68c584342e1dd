"""Shortcut probes without a GPU: made from every built-in lab's reference, compiled, read the
inputs as their NumPy twin says, and judged in sentences that name a weak lab."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from graders.labcheck import check_lab
from graders.labcheck.check import compile_cached
from graders.labcheck.probes import (
    PROBE_KINDS,
    CaseOutcome,
    Probe,
    ProbeError,
    data_mean,
    generated_probes,
    hand_written_probes,
    judge_probe,
    probe_inputs,
    probe_source,
)
from graders.spec import builtin_labs_dir, list_builtin_labs, load_builtin_lab, load_lab

ARCH = "sm_90"
LOOSE_LAB = Path(__file__).parent / "samples" / "loose-sum"


def _first_reference(lab_id: str) -> tuple[str, list[Probe]]:
    lab = load_builtin_lab(lab_id)
    ref = next(r for r in lab.references if r.file)
    assert ref.file is not None
    probes, notes = generated_probes(lab, ref.file, lab.declaration_defaults)
    assert not notes, notes
    return ref.file, probes


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_every_builtin_labs_references_can_be_wrapped(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    for ref in lab.references:
        if ref.file is None:
            continue
        probes, _ = generated_probes(lab, ref.file, lab.declaration_defaults)
        assert [p.kind for p in probes] == list(PROBE_KINDS)
        for probe in probes:
            # The lab's kernels keep their extern "C" names; the reference's become helpers.
            for kernel in lab.kernels:
                assert f'extern "C" __global__ void {kernel}(' in probe.source
            assert f"#define KG_PROBE {PROBE_KINDS.index(probe.kind) + 1}" in probe.source


@pytest.mark.parametrize(
    ("lab_id", "kinds", "why"),
    [
        ("array-sum", PROBE_KINDS, "the same kernel is launched twice, then over scratch data"),
        ("softmax", PROBE_KINDS, "its references take row pointers: x + row * cols"),
        # The half probe only (the kinds differ in one constant; test_check compiles it too).
        ("prefix-sum", ("half",), "three kernels, only the first reads an input"),
        ("histogram", ("half",), "byte data and a 64-bit size"),
    ],
)
def test_probes_compile_as_the_grader_compiles_references(
    lab_id: str, kinds: tuple[str, ...], why: str
) -> None:
    lab = load_builtin_lab(lab_id)
    file, probes = _first_reference(lab_id)
    for probe in (p for p in probes if p.kind in kinds):
        result = compile_cached(lab.for_references(), probe.source, probe.filename, ARCH)
        assert result.ok, f"{lab_id} ({why}), {probe.kind} from {file}: {result.message}\n" + (
            result.log
        )


def test_a_kernel_launched_twice_wraps_its_input_only_in_the_first_launch() -> None:
    _, probes = _first_reference("array-sum")
    half = next(p for p in probes if p.kind == "half")
    assert "kg_launch_index(2u)" in half.source and "kg_launch_end();" in half.source
    # Launch 0 (over src) reads through the shortcut, launch 1 (over the partial sums) raw.
    assert "(kg_l == 0u ? KG_PROBE : 0)" in half.source
    # A kernel launched once needs no counter.
    _, probes = _first_reference("vector-scale")
    assert "const unsigned int kg_l" not in probes[0].source


def test_row_pointers_stay_wrapped() -> None:
    _, probes = _first_reference("softmax")
    text = probes[0].source
    assert re.search(r"\bauto in = x \+", text), text
    assert "KgIn<float> x" in text


def test_the_mean_is_the_cases_own() -> None:
    lab = load_builtin_lab("softmax")
    # Normal data with a mean (shift) per case: the probe reads each case's mean.
    means = {c.name: data_mean(lab, lab.param("x"), c) for c in lab.cases}
    assert means["shifted-256x4096"] == 200.0 and means["negative-256x999"] == -120.0
    _, probes = _first_reference("softmax")
    text = probes[0].source
    assert "if (a2 == (int)256ll && a3 == (int)4096ll) return (float)0x1.9000000000000p+7f;" in (
        text
    )
    # Hand-written inputs: the mean of the values written.
    histogram = load_builtin_lab("histogram")
    by_hand = histogram.case("by-hand-12")
    assert data_mean(histogram, histogram.param("data"), by_hand) == pytest.approx(
        np.mean([0, 0, 255, 255, 128, 1, 2, 3, 255, 0, 7, 7])
    )
    # The sum labs' inputs have mean 0: half the work plus the mean adds nothing.
    atomic = load_builtin_lab("array-sum-atomic")
    assert data_mean(atomic, atomic.param("src"), atomic.cases[-1]) == 0.0


def test_probe_inputs_twin_reads_what_the_kernel_reads() -> None:
    lab = load_builtin_lab("array-sum-atomic")
    case = lab.case("n-1000")
    src = np.arange(10, dtype=np.float32) + 1
    assert probe_inputs(lab, case, {"src": src}, "constant")["src"].tolist() == [0.0] * 10
    assert probe_inputs(lab, case, {"src": src}, "half")["src"].tolist() == [
        1, 0, 3, 0, 5, 0, 7, 0, 9, 0,
    ]  # fmt: skip
    assert probe_inputs(lab, case, {"src": src}, "sampled")["src"].tolist() == [
        1, 1, 3, 3, 5, 5, 7, 7, 9, 9,
    ]  # fmt: skip
    # A matrix by its flat index, as `KgIn` counts through `A + row * N`.
    matmul = load_builtin_lab("matmul-tiled")
    a = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    got = probe_inputs(matmul, matmul.case("rect-4x2x3"), {"A": a, "B": a}, "half")
    assert got["A"].tolist() == [[1, 0, 3], [0, 5, 0]]


def _lab_with_reference(tmp_path: Path, body: str) -> Path:
    folder = Path(shutil.copytree(builtin_labs_dir() / "vector-scale", tmp_path / "vector-scale"))
    for name in ("grid_stride.cu", "one_per_thread.cu"):
        (folder / name).write_text(body)
    return folder


def test_a_reference_that_reads_through_an_address_cannot_be_wrapped(tmp_path: Path) -> None:
    folder = _lab_with_reference(
        tmp_path,
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor)\n{\n    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) dst[i] = __ldg(&src[i]) * factor;\n}\n",
    )
    report = check_lab(folder, arch=ARCH)
    assert report.ok, report.lines()  # a warning, not a refusal: lab add still accepts it
    warned = [i for i in report.items if i.status == "warn" and i.subject == "probes"]
    assert len(warned) == 1, report.lines()
    assert "no shortcut probe could be generated" in warned[0].message
    assert "does not compile" in warned[0].message and "probes/" in warned[0].message


def test_a_kernel_defined_through_a_macro_is_named_in_the_reason(tmp_path: Path) -> None:
    lab = load_builtin_lab("vector-scale")
    source = (
        '#define KERNEL extern "C" __global__\nKERNEL void scale(const float* src, float* dst, '
        "unsigned int n, float factor) { }\n"
    )
    with pytest.raises(ProbeError, match="does not say __global__"):
        probe_source(lab, "macro.cu", source, "half", {})
    with pytest.raises(ProbeError, match="defines no kernel named scale"):
        probe_source(lab, "other.cu", 'extern "C" __global__ void scaled() {}\n', "half", {})
    with pytest.raises(ProbeError, match="not a plain pointer"):
        probe_source(
            lab,
            "ref.cu",
            'extern "C" __global__ void scale(const float src[], float* dst, unsigned int n, '
            "float factor) { }\n",
            "half",
            {},
        )


def test_hand_written_probes_are_compiled_and_need_their_header(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(builtin_labs_dir() / "vector-scale", tmp_path / "vector-scale"))
    probes = folder / "probes"
    probes.mkdir()
    (probes / "zeros.cu").write_text(
        "// shortcut: writes 0 without reading src\n"
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor)\n{\n    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) dst[i] = 0.0f;\n}\n"
    )
    written, problems = hand_written_probes(folder)
    assert not problems and [p.what for p in written] == ["writes 0 without reading src"]
    report = check_lab(folder, arch=ARCH)
    assert report.ok, report.lines()
    item = next(i for i in report.items if i.subject == "probe probes/zeros.cu")
    assert item.status == "ok" and "compiles" in item.message
    (probes / "nameless.cu").write_text((probes / "zeros.cu").read_text().split("\n", 1)[1])
    report = check_lab(folder, arch=ARCH)
    assert [i.message for i in report.failures] == [
        "probes/nameless.cu: has no `// shortcut: <what it skips>` line in its first 20 lines"
    ]


def test_without_a_gpu_the_probes_are_compiled_and_said_not_to_have_run() -> None:
    report = check_lab(builtin_labs_dir() / "array-sum", arch=ARCH)
    items = [i for i in report.items if i.subject == "probes"]
    assert [i.status for i in items] == ["ok", "skip"], report.lines()
    assert "generated from shared_tree.cu" in items[0].message
    assert items[1].message.startswith("not run:")


def _outcomes(lab_id: str, passed: dict[str, bool], verdict: str = "wrong_answer") -> list:
    lab = load_builtin_lab(lab_id) if lab_id != "loose-sum" else load_lab(LOOSE_LAB)
    return [
        CaseOutcome(c.name, passed.get(c.name, False), "" if passed.get(c.name) else verdict, "x")
        for c in lab.cases
    ]


def _probe(kind: str = "half") -> Probe:
    return Probe(kind, "half the work plus an estimate (...)", "", "ref.cu")


def test_a_probe_that_passes_every_case_names_the_weak_lab() -> None:
    lab = load_lab(LOOSE_LAB)
    everything = {c.name: True for c in lab.cases}
    status, text = judge_probe(lab, _probe(), _outcomes("loose-sum", everything))
    assert status == "fail"
    assert text.startswith("The lab loose-sum is weak: half the work plus an estimate")
    assert "passes all 4 cases" in text and "zero-mean inputs" in text


def test_a_probe_that_passes_the_timed_case_names_the_weak_lab() -> None:
    lab = load_lab(LOOSE_LAB)
    passed = {"n-1": True, "n-8388608": True, "hidden-large": True}  # caught on n-1000 only
    status, text = judge_probe(lab, _probe(), _outcomes("loose-sum", passed))
    assert status == "fail"
    assert "passes the timed case n-8388608 (it fails only n-1000)" in text
    assert "earn its 10 performance points" in text


def test_a_probe_caught_on_the_timed_case_is_fine() -> None:
    lab = load_builtin_lab("array-sum-atomic")
    status, text = judge_probe(lab, _probe(), _outcomes("array-sum-atomic", {"n-1": True}))
    assert status == "ok"
    assert "fails 5 of 6 cases with a wrong answer, the timed case n-8388608 among them" in text


def test_a_probe_that_only_crashes_is_a_warning() -> None:
    lab = load_builtin_lab("array-sum-atomic")
    outcomes = _outcomes("array-sum-atomic", {}, verdict="kernel_error")
    status, text = judge_probe(lab, _probe(), outcomes)
    assert status == "warn" and "never with a wrong answer" in text
