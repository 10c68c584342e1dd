"""The built-in labs (reference_kernels/<lab-id>/): specs load, kernels compile, faults labelled.

Runs without a GPU (NVRTC compiles here). Running the kernels is the GPU tests' job; these
tests make sure that what they will run is well-formed: every lab of the catalogue exists
with the exact signature of the catalogue, every reference and every known-faulty kernel
compiles for sm_90 (or, for a compile-stage fault, gets its verdict), and every faulty
kernel's header says what it must get in terms the GPU tests can check.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from graders.labcheck.check import compile_cached, outcome_of_compile
from graders.labcheck.faults import FaultExpectation, compile_problem, read_fault_header
from graders.results import CompileResult
from graders.run.inputs import case_seed, generate_arrays
from graders.spec import LabSpec, builtin_labs_dir, list_builtin_labs, load_builtin_lab
from graders.spec.page import spec_markdown

# The catalogue (shared/LABS.md): lab id -> the kernel's exact extern "C" signature.
CATALOGUE: dict[str, str] = {
    "vector-scale": "void scale(const float* src, float* dst, unsigned int n, float factor)",
    "hadamard": "void hadamard(const float* a, const float* b, float* c, unsigned int n)",
    "array-sum": "void block_sum(const float* src, float* partial, unsigned int n)",
    "array-sum-atomic": "void atomic_sum(const float* src, float* out, unsigned int n)",
    "dot-product": "void dot(const double* a, const double* b, double* partial, int n)",
    "matmul-naive": ("void matmul(const float* A, const float* B, float* C, int M, int N, int K)"),
    "matmul-tiled": ("void matmul(const float* A, const float* B, float* C, int M, int N, int K)"),
    "matmul-tiled-int": "void matmul(const int* A, const int* B, int* C, int M, int N, int K)",
    "matmul-tiled-f64": (
        "void matmul(const double* A, const double* B, double* C, int M, int N, int K)"
    ),
    "matmul-coarsened": (
        "void matmul(const float* A, const float* B, float* C, int M, int N, int K)"
    ),
    "conv2d": "void conv2d(const float* in, const float* mask, float* out, int H, int W, int R)",
    "conv1d-tiled": "void conv1d(const float* in, const float* mask, float* out, int n, int R)",
    # Issue 12's labs, written as an instructor would: a Python oracle, new types, several kernels.
    "matrix-transpose": "void transpose(const float* in, float* out, int rows, int cols)",
    "softmax": "void softmax(const float* x, float* y, int rows, int cols)",
    "histogram": (
        "void histogram(const unsigned char* data, unsigned int* bins, unsigned long long n)"
    ),
    "prefix-sum": "void scan_blocks(const int* in, int* out, int* block_sums, unsigned int n)",
}
# The other kernels of a lab with several (the first is in CATALOGUE).
MORE_KERNELS: dict[str, list[str]] = {
    "prefix-sum": [
        "void scan_block_sums(int* block_sums, unsigned int nblocks)",
        "void add_block_offsets(int* out, int* block_sums, unsigned int n)",
    ],
}
LAB_IDS = sorted(CATALOGUE)

# Sizes the catalogue names for each lab; each must be a case of that lab.
CATALOGUE_CASES: dict[str, list[str]] = {
    "vector-scale": ["n-1", "n-1000", "n-1048579", "n-67108864"],
    "hadamard": ["n-1", "n-1000", "n-1048579", "n-67108864"],
    "array-sum": ["n-1", "n-1000", "n-1048579", "n-8388608"],
    "array-sum-atomic": ["n-1", "n-1000", "n-1048579", "n-8388608"],
    "dot-product": ["n-1", "n-10000", "n-1048583"],
    **{
        lab: [
            "square-1",
            "square-64",
            "square-1023",
            "square-1024",
            "square-2048",
            "rect-4x2x3",
            "rect-64x62x64",
            "rect-1000x777x1025",
        ]
        for lab in (
            "matmul-naive",
            "matmul-tiled",
            "matmul-tiled-int",
            "matmul-tiled-f64",
            "matmul-coarsened",
        )
    },
    "conv2d": ["1x1-r1", "31x33-r2", "1023x1023-r3", "2048x2048-r1"],
    "conv1d-tiled": ["n-1-r1", "n-1000-r3", "n-1048579-r8"],
    "matrix-transpose": ["one-1x1", "row-1x1000", "column-1000x1", "rect-31x33", "square-1024"],
    "softmax": ["one-1x1", "overflow-512x1000", "shifted-256x4096", "negative-256x999"],
    "histogram": ["by-hand-12", "n-1", "skewed-1048579", "clipped-300000"],
    "prefix-sum": ["by-hand-10", "n-1", "n-1024", "n-1025", "n-1048576", "n-4194309"],
}

ARCH = "sm_90"


def reference_files(lab_id: str) -> list[tuple[str, str]]:
    if not (builtin_labs_dir() / lab_id / "lab.toml").is_file():
        return []  # test_lab_folder_exists reports it; collection must not break
    return [(lab_id, r.file) for r in load_builtin_lab(lab_id).references if r.file]


def faulty_files(lab_id: str) -> list[tuple[str, str]]:
    folder = builtin_labs_dir() / lab_id / "faulty"
    return [(lab_id, p.name) for p in sorted(folder.glob("*.cu"))] if folder.is_dir() else []


ALL_REFERENCES = [pair for lab in LAB_IDS for pair in reference_files(lab)]
ALL_FAULTY = [pair for lab in LAB_IDS for pair in faulty_files(lab)]


def compile_for_test(lab: LabSpec, source: str, filename: str) -> CompileResult:
    """Compile exactly as a submission is compiled (sandboxed NVRTC, declarations, checks),
    once per process: tests/graders/labcheck checks every lab folder with the same results."""
    return compile_cached(lab, source, filename, ARCH)


def test_the_catalogue_has_sixteen_labs() -> None:
    assert len(LAB_IDS) == 16


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_lab_folder_exists(lab_id: str) -> None:
    folder = builtin_labs_dir() / lab_id
    assert (folder / "lab.toml").is_file()
    assert (folder / "lab.md").is_file()
    assert any(folder.glob("*.cu")), f"{lab_id} has no reference kernel"


def test_builtin_labs_are_the_catalogue() -> None:
    assert list_builtin_labs() == LAB_IDS


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_spec_has_the_catalogue_signature(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    signatures = [lab.c_signature(k).removeprefix('extern "C" __global__ ') for k in lab.kernels]
    assert signatures == [CATALOGUE[lab_id], *MORE_KERNELS.get(lab_id, [])]


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_spec_cases(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    names = {c.name for c in lab.cases}
    missing = [c for c in CATALOGUE_CASES[lab_id] if c not in names]
    assert not missing, f"{lab_id} lacks the catalogue's cases {missing}"
    hidden = [c for c in lab.cases if c.hidden]
    assert 1 <= len(hidden) <= 3
    assert all(c.points > 0 for c in lab.cases)
    assert lab.timing is not None
    # The timed case is the largest one, so the time means something.
    largest = max(lab.cases, key=lambda c: _elements(lab, c.name))
    assert _elements(lab, lab.timing.case) == _elements(lab, largest.name)


def _elements(lab: LabSpec, case: str) -> int:
    names = lab.sizes_for(case)
    return sum(p.numel_for(names) for p in lab.params if p.is_array)


def _page(lab: LabSpec) -> str:
    """The lab page as shown: the prose of lab.md and the part generated from lab.toml."""
    return lab.page_markdown + "\n" + spec_markdown(lab)


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_page_states_the_signature_and_hides_hidden_sizes(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    page = _page(lab)
    assert 'extern "C" __global__' in page
    assert f"void {lab.kernel}(" in page
    visible = {v for c in lab.cases if not c.hidden for v in c.sizes.values()}
    for case in (c for c in lab.cases if c.hidden):
        assert case.name not in page
        for value in case.sizes.values():
            if value >= 100 and value not in visible:
                assert not re.search(rf"\b{value}\b", page), (
                    f"{lab_id}: the page shows {value}, a size of hidden case {case.name}"
                )


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_page_states_the_cases_and_points(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    page = _page(lab)
    for case in lab.cases:
        if not case.hidden:
            assert case.name in page, f"{lab_id}: the page does not list case {case.name}"
    assert f"Correctness: {lab.correctness_points:g} points" in page
    if lab.scoring.performance_points:
        assert f"Performance: {lab.scoring.performance_points:g} points" in page


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_lab_md_holds_only_prose_and_leaves_the_spec_to_the_generated_part(lab_id: str) -> None:
    # What lab.toml says is shown once, from lab.toml, so it cannot drift from what the
    # grader does (issue 12): no signature, launch, case table, tolerance or points in lab.md.
    prose = load_builtin_lab(lab_id).page_markdown
    for heading in ("## What you submit", "## How the grader launches it", "## Test cases",
                    "## How answers are checked", "## Points"):  # fmt: skip
        assert heading not in prose, f"{lab_id}/lab.md repeats the generated {heading!r}"
    assert 'extern "C" __global__ void' not in prose
    assert "| case |" not in prose and "<<<" not in prose
    assert not re.search(r"<= [0-9.e-]+ \*", prose), f"{lab_id}/lab.md states a tolerance"


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_tiled_labs_run_the_sanitizer(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    tiled = lab_id.startswith("matmul-") and lab_id != "matmul-naive"
    if tiled:
        assert lab.sanitizer
        assert "__shared__" in lab.requires
    if lab.sanitizer:
        assert lab.sanitizer_case is not None
        assert _elements(lab, lab.sanitizer_case) < 100_000, "the sanitizer case must be small"


@pytest.mark.parametrize("lab_id", [lab for lab in LAB_IDS if lab.startswith("matmul-")])
def test_matmul_labs_score_against_naive_tiled_and_cublas(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    assert lab.scoring.performance_points > 0
    assert lab.scoring.baseline == "naive"
    assert {r.name for r in lab.references} >= {"naive", "tiled", "cublas"}
    assert lab.timing is not None and lab.timing.case == "square-2048"


@pytest.mark.parametrize(("lab_id", "file"), ALL_REFERENCES)
def test_reference_compiles(lab_id: str, file: str) -> None:
    lab = load_builtin_lab(lab_id)
    source = (lab.folder / file).read_text(encoding="utf-8")
    # References are trusted and compiled without the lab's `requires`, as the grader compiles
    # them (graders.grade.compile_reference): the naive baseline of a tiled lab breaks it.
    result = compile_for_test(dataclasses.replace(lab, requires=[]), source, file)
    assert result.ok, f"{lab_id}/{file} did not compile: {result.message}\n{result.log}"
    # A reference is what students are told to write: no static warning may fire on it.
    assert not result.warnings, result.warnings
    for name, spec in lab.declares.items():
        assert spec.min <= result.declarations.get(name, spec.default) <= spec.max


def _header(lab: LabSpec, file: str) -> FaultExpectation:
    """The header as `lab check` reads it (graders.labcheck.faults: the one reader)."""
    names = {c.name for c in lab.cases}
    return read_fault_header(lab.folder / "faulty" / file, names, sanitizer=lab.sanitizer)


@pytest.mark.parametrize(("lab_id", "file"), ALL_FAULTY)
def test_faulty_header_is_well_formed(lab_id: str, file: str) -> None:
    _header(load_builtin_lab(lab_id), file)  # raises FaultHeaderError with a sentence


@pytest.mark.parametrize(("lab_id", "file"), ALL_FAULTY)
def test_faulty_kernel_compiles_or_gets_its_compile_verdict(lab_id: str, file: str) -> None:
    lab = load_builtin_lab(lab_id)
    header = _header(lab, file)
    result = compile_for_test(lab, header.path.read_text(encoding="utf-8"), file)
    # Every kernel of a lab with several is looked for, by the compile stage itself; a kernel
    # that must run compiles, and one whose header expects the barrier warning gets it.
    problem = compile_problem(header, outcome_of_compile(result))
    assert problem is None, f"{lab_id}/faulty/{file}: {problem}\n{result.log}"


def test_every_lab_has_a_faulty_kernel() -> None:
    without = [lab for lab in LAB_IDS if not faulty_files(lab)]
    assert not without, f"labs without a known-faulty kernel: {without}"


def _case_data(lab_id: str, case: str) -> tuple[LabSpec, dict[str, float], dict[str, np.ndarray]]:
    lab = load_builtin_lab(lab_id)
    names = lab.sizes_for(case)
    seed = case_seed(lab.id, case, hidden=False)
    return lab, names, generate_arrays(lab.params, names, seed)


def _float32_row_products(a_row: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One row of A times B, summed one product after another in float32 (a naive kernel)."""
    products = (a_row[:, None] * b).astype(np.float32)
    return np.cumsum(products, axis=0, dtype=np.float32)[-1]


def test_matmul_tolerance_admits_float32_accumulation() -> None:
    lab, names, data = _case_data("matmul-tiled", "square-2048")
    atol, rtol = lab.tolerance["float32"].for_case(names)
    a, b = data["A"], data["B"]
    for row in range(0, names["M"], 256):
        got = _float32_row_products(a[row], b)
        exact = a[row].astype(np.float64) @ b.astype(np.float64)
        # A margin: other summation orders must pass too (tests/graders/test_tolerances.py).
        assert (np.abs(got - exact) <= 0.6 * (atol + rtol * np.abs(exact))).all()


def test_int_matmul_inputs_catch_float_accumulation_without_overflow() -> None:
    lab, names, data = _case_data("matmul-tiled-int", "square-1023")
    init = lab.param("A").init
    assert init is not None
    largest = max(abs(int(init.low)), abs(int(init.high)))
    assert 2048 * largest * largest < 2**31  # no int32 sum can overflow, at any size here
    a, b = data["A"].astype(np.int64), data["B"].astype(np.int64)
    wrong = sum(
        int((_float32_row_products(a[r], b).astype(np.int64) != a[r] @ b).sum())
        for r in range(0, names["M"], 64)
    )
    assert wrong > 0  # faulty/float_accumulation.cu must fail this case


def test_atomic_tolerance_admits_one_float_accumulator() -> None:
    lab, names, data = _case_data("array-sum-atomic", "n-8388608")
    atol, rtol = lab.tolerance["float32"].for_case(names)
    src = data["src"]
    one_by_one = float(np.cumsum(src, dtype=np.float32)[-1])  # seed 002's atomic kernel
    exact = float(src.astype(np.float64).sum())
    assert abs(one_by_one - exact) <= 0.25 * (atol + rtol * abs(exact))
    # ...while losing one block of 256 elements on the 1000-element case is caught.
    lab, names, data = _case_data("array-sum-atomic", "n-1000")
    atol, rtol = lab.tolerance["float32"].for_case(names)
    exact = float(data["src"].astype(np.float64).sum())
    lost = float(data["src"][256:].astype(np.float64).sum())
    assert abs(lost - exact) > 100 * (atol + rtol * abs(exact))
