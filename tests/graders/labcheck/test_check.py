"""`lab check` without a GPU: every built-in lab passes; each kind of broken lab fails with a
sentence naming what to fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graders.labcheck import check_lab
from graders.spec import builtin_labs_dir, list_builtin_labs
from tests.conftest import gpu_unavailable_reason
from tests.graders.labcheck.test_tile_forms import assert_tile_forms_read_as_the_reference
from tests.graders.spec_samples import DEVICE_STUB, MULTI_SPEC, ORACLE, write_multi_lab

ARCH = "sm_90"


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_every_builtin_lab_passes_the_checks_that_need_no_gpu(lab_id: str) -> None:
    report = check_lab(builtin_labs_dir() / lab_id, arch=ARCH)
    assert report.ok, "\n".join(report.lines())
    assert report.lab_id == lab_id
    assert not [i for i in report.items if i.status == "warn"], report.lines()
    assert_tile_forms_read_as_the_reference(report, lab_id)


def _copy(lab_id: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(builtin_labs_dir() / lab_id, tmp_path / lab_id))


def _failure(folder: Path) -> str:
    report = check_lab(folder, arch=ARCH)
    assert not report.ok, report.lines()
    assert "check failed" in report.summary() or "checks failed" in report.summary()
    return "\n".join(f"{i.subject}: {i.message}" for i in report.failures)


def test_a_reference_that_does_not_compile_fails(tmp_path: Path) -> None:
    folder = _copy("vector-scale", tmp_path)
    (folder / "grid_stride.cu").write_text(
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor) { dst[0] = undeclared; }\n"
    )
    text = _failure(folder)
    assert text.startswith("reference grid_stride.cu: does not compile: The compiler reported 1")
    assert "undeclared" in text


def test_a_malformed_spec_fails_with_the_loaders_sentence(tmp_path: Path) -> None:
    folder = _copy("vector-scale", tmp_path)
    spec = (folder / "lab.toml").read_text().replace('oracle = "scale"', 'oracle = "scales"')
    (folder / "lab.toml").write_text(spec)
    assert _failure(folder).startswith("spec: vector-scale/lab.toml: expected.oracle: unknown")


def test_a_faulty_kernel_that_compiles_against_its_header_fails(tmp_path: Path) -> None:
    folder = _copy("matmul-naive", tmp_path)
    faulty = folder / "faulty" / "missing_extern_c.cu"
    faulty.write_text(faulty.read_text().replace("__global__ void", 'extern "C" __global__ void'))
    text = _failure(folder)
    assert "faulty/missing_extern_c.cu: it compiled, but its header expects" in text


def test_a_faulty_kernel_that_must_run_but_does_not_compile_fails(tmp_path: Path) -> None:
    folder = _copy("vector-scale", tmp_path)
    faulty = folder / "faulty" / "off_by_one.cu"
    faulty.write_text(faulty.read_text().replace("dst[i] = src[i]", "dst[i] = srcc[i]"))
    assert "faulty/off_by_one.cu: it must compile (its header expects out_of_bounds_write" in (
        _failure(folder)
    )


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        ("// expect-verdict: wrong_answer\n", "has no why line"),
        ("// expect-verdict: pass\n// why: x\n", "a faulty kernel must fail somewhere"),
        ("// expect-verdict: wrong_answer\n// expect-fail-case: n-7\n// why: x\n", "'n-7'"),
        (
            "// expect-verdict: wrong_answer\n// expected-case: n-1\n// why: x\n",
            "unknown header key",
        ),
        (
            "// expect-verdict: wrong_answer\n// expect-finding: shared_memory_race\n// why: x\n",
            "needs compute-sanitizer",
        ),
        (
            "// expect-verdict: missing_kernel\n// expect-fail-case: n-1\n// why: x\n",
            "no case runs",
        ),
    ],
)
def test_a_bad_faulty_header_fails(tmp_path: Path, header: str, fragment: str) -> None:
    folder = _copy("vector-scale", tmp_path)
    faulty = folder / "faulty" / "writes_nothing.cu"
    body = "\n".join(line for line in faulty.read_text().splitlines() if not line.startswith("// "))
    faulty.write_text(header + body + "\n")
    text = _failure(folder)
    assert text.startswith("faulty/writes_nothing.cu"), text
    assert fragment in text


def test_a_multi_kernel_reference_must_define_every_kernel(tmp_path: Path) -> None:
    spec = MULTI_SPEC.replace(
        "[expected]", '[[references]]\nname = "stub"\nfile = "stub.cu"\n\n[expected]'
    )
    folder = write_multi_lab(tmp_path, spec)
    (folder / "stub.cu").write_text(DEVICE_STUB)
    report = check_lab(folder, arch=ARCH)
    assert report.ok, report.lines()
    (folder / "stub.cu").write_text(DEVICE_STUB.splitlines()[0] + "\n")  # `count` only
    text = _failure(folder)
    assert "reference stub.cu: does not compile: No kernel named `finish` was found" in text
    assert "defines 2 kernels: count, finish" in text
    wrong = DEVICE_STUB.replace("float alpha", "double alpha")
    (folder / "stub.cu").write_text(wrong)
    assert "Your kernel `finish` takes 3 parameters of 8, 8, 8 bytes" in _failure(folder)


def test_the_python_oracle_runs_on_sample_data(tmp_path: Path) -> None:
    report = check_lab(write_multi_lab(tmp_path / "good"), arch=ARCH)
    assert report.ok, report.lines()
    item = next(i for i in report.items if i.subject == "oracle.py")
    assert item.status == "ok" and item.message == "expected() ran on sample data for tiny, big"
    broken = ORACLE.replace("minlength=256", "minlength=255")
    text = _failure(write_multi_lab(tmp_path / "broken", oracle=broken))
    assert "oracle.py: oracle.py: expected() returned for 'out' an array of shape [255]" in text


def test_a_check_that_rejects_the_oracles_own_answer_fails(tmp_path: Path) -> None:
    oracle = (
        "import numpy as np\n"
        "def expected(inputs, sizes, scalars):\n"
        "    return {'out': np.bincount(inputs['data'], minlength=256) / 3}\n"
        "def check(outputs, expected, inputs, sizes):\n"
        "    return bool((outputs['out'] == expected['out']).all()), 'not bit-exact'\n"
    )
    # Exact float64 equality fails once the answer is rounded to float32, as a kernel's is.
    text = _failure(write_multi_lab(tmp_path, oracle=oracle))
    assert "case tiny: check() rejects expected()'s own answer" in text
    assert "not bit-exact" in text


def test_a_property_the_oracles_answer_lacks_fails(tmp_path: Path) -> None:
    spec = MULTI_SPEC.replace(
        'shape = [256]\n\n[[params]]\nname = "n"',
        'shape = [256]\ncheck = ["elementwise", "rows_sum_to_one"]\n\n[[params]]\nname = "n"',
    )
    text = _failure(write_multi_lab(tmp_path, spec))
    assert "expected()'s own answer fails rows_sum_to_one: 1 of 1 rows of out" in text


def test_running_without_a_gpu_is_skipped_with_the_reason(tmp_path: Path) -> None:
    if gpu_unavailable_reason() is None:
        pytest.skip(
            "a GPU is usable here: the kernels run (tests/graders/gpu/test_lab_check_gpu.py)"
        )
    report = check_lab(builtin_labs_dir() / "hadamard", arch=ARCH, run=True)
    gpu = [i for i in report.items if i.subject == "GPU"]
    assert len(gpu) == 1, report.items
    assert gpu[0].status == "skip" and "kernels were not run" in gpu[0].message
    assert report.ok and "need no GPU" in report.summary()
