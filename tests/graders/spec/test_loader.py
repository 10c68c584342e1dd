"""Lab specs: a good spec loads with its helpers; each kind of mistake is refused by field."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.spec import (
    LabSpecError,
    builtin_labs_dir,
    list_builtin_labs,
    load_builtin_lab,
    load_lab,
)
from tests.graders.spec_samples import GOOD_SPEC, NAIVE, TWO_PASS_SPEC, write_lab


def test_good_spec_loads(tmp_path: Path) -> None:
    lab = load_lab(write_lab(tmp_path, GOOD_SPEC))
    assert lab.id == "matmul-tiled" and lab.kernel == "matmul"
    assert lab.page_markdown == "# The lab\n"
    assert [c.name for c in lab.cases] == ["square-64", "square-1023"]
    assert lab.cases[1].hidden and not lab.cases[0].hidden
    assert lab.correctness_points == 25 and lab.max_score == 45
    assert lab.requires == ["__shared__"] and lab.sanitizer_case == "square-64"
    assert lab.reference("naive").source == NAIVE
    assert lab.timing is not None and lab.timing.case == "square-1023"
    assert lab.timing.min_reps == 10  # a default
    assert lab.timing.gpu_model == ""  # any GPU, unless the lab names one
    assert lab.declares["TILE"].names == ("TILE_WIDTH", "TILE")
    assert [p.c_type for p in lab.signature] == [
        "const float*",
        "const float*",
        "float*",
        "int",
        "int",
        "int",
    ]


def test_timing_may_name_the_gpu_model_it_belongs_to(tmp_path: Path) -> None:
    text = GOOD_SPEC.replace('case = "square-1023"', 'case = "square-1023"\ngpu_model = " H100 "')
    lab = load_lab(write_lab(tmp_path, text))
    assert lab.timing is not None and lab.timing.gpu_model == "H100"
    empty = GOOD_SPEC.replace('case = "square-1023"', 'case = "square-1023"\ngpu_model = ""')
    with pytest.raises(LabSpecError, match="timing.gpu_model: expected non-empty text"):
        load_lab(write_lab(tmp_path / "empty", empty))


def test_a_lab_sets_how_much_gpu_memory_global_variables_may_take(tmp_path: Path) -> None:
    assert load_lab(write_lab(tmp_path, GOOD_SPEC)).limits.device_globals_mb == 1024
    text = GOOD_SPEC.replace("memory_mb = 4096", "memory_mb = 4096\ndevice_globals_mb = 64")
    assert load_lab(write_lab(tmp_path / "small", text)).limits.device_globals_mb == 64


def test_local_memory_mb_defaults_to_8_gib_and_can_be_set(tmp_path: Path) -> None:
    assert load_lab(write_lab(tmp_path, GOOD_SPEC)).limits.local_memory_mb == 8192
    text = GOOD_SPEC.replace("memory_mb = 4096", "memory_mb = 4096\nlocal_memory_mb = 512")
    assert load_lab(write_lab(tmp_path / "small", text)).limits.local_memory_mb == 512


def test_sizes_geometry_and_shapes(tmp_path: Path) -> None:
    lab = load_lab(write_lab(tmp_path, GOOD_SPEC))
    names = lab.sizes_for("square-1023", {"TILE": 16})
    assert names == {"M": 1023, "N": 1023, "K": 1023, "TILE": 16, "tiles": 64}
    assert lab.sizes_for(lab.cases[0])["TILE"] == 32  # the default when nothing is declared
    grid, block, shared = lab.launches[0].geometry(names)
    assert grid == (64, 64, 1) and block == (16, 16, 1) and shared == 0
    assert lab.param("A").shape_for(names) == (1023, 1023)
    atol, rtol = lab.tolerance["float32"].for_case(names)
    assert atol == pytest.approx(1e-5 * 1023**0.5) and rtol == 1e-4
    args = lab.launch_args(0, names)
    assert [a.param.name for a in args if a.param] == ["A", "B", "C", "M", "N", "K"]
    assert [a.value for a in args if not a.is_array] == [1023, 1023, 1023]


def test_two_pass_lab_binds_expressions(tmp_path: Path) -> None:
    lab = load_lab(write_lab(tmp_path, TWO_PASS_SPEC, "array-sum"))
    names = lab.sizes_for("n-big")
    assert names["nblocks"] == 1024
    second = lab.launch_args(1, names)
    assert [a.param.name if a.param else None for a in second] == ["partial", "total", None]
    assert second[2].dtype == "uint32" and second[2].value == 1024
    assert lab.launches[0].geometry(names) == ((1024, 1, 1), (1024, 1, 1), 4096)
    assert lab.param("partial").shape_for(lab.sizes_for("n-1")) == (1,)


BAD_SPECS = [
    # (what to replace, with what, the field the message must name, a fragment of the reason)
    ('id = "matmul-tiled"', 'id = "matmul"', "lab.id", "folder name"),
    ('kernel = "matmul"', 'kernel = "mat mul"', "lab.kernel", "does not match"),
    ('kernel = "matmul"\n', "", "lab", "'kernel' is missing"),
    ('page = "lab.md"', 'page = "missing.md"', "lab.page", "does not exist"),
    ('page = "lab.md"', 'page = "../../etc/passwd"', "lab.page", "outside the lab folder"),
    ("sanitizer = true", 'sanitizer = "yes"', "lab.sanitizer", "true or false"),
    (
        'sanitizer_case = "square-64"',
        'sanitizer_case = "square-65"',
        "lab.sanitizer_case",
        "no case",
    ),
    ('sanitizer_case = "square-64"\n', "", "lab.sanitizer_case", "is missing"),
    (
        'nvrtc_options = ["-std=c++17"]',
        'nvrtc_options = ["-I/etc"]',
        "lab.nvrtc_options[0]",
        "not allowed",
    ),
    ('requires = ["__shared__"]', "requires = [3]", "lab.requires[0]", "non-empty text"),
    ("title =", "titel =", "lab", "unknown key 'titel'"),
    ("[lab]", "[lab]\nhiden = true", "lab", "unknown key 'hiden'"),
    ('kind = "in"', 'kind = "input"', "params[0].kind", "unknown kind"),
    ('dtype = "float32"', 'dtype = "float8"', "params[0].dtype", "unknown array dtype"),
    ('dtype = "int32"', 'dtype = "uint8"', "params[3].dtype", "unknown scalar dtype"),
    ('shape = ["M", "N"]', 'shape = "M"', "params[0].shape", "expected a list"),
    ('shape = ["M", "N"]', 'shape = ["M", "N << 2"]', "params[0].shape[1]", "`<<`"),
    ('shape = ["M", "N"]', 'shape = ["M", "open(N)"]', "params[0].shape[1]", "unknown function"),
    ('shape = ["M", "N"]', 'shape = ["M", "N - 64"]', "params[0].shape", "empty dimension"),
    ('shape = ["M", "N"]', 'shape = ["M", "N * 100000000"]', "cases[0].sizes", "GiB"),
    (
        'init = { dist = "uniform", low = -1.0, high = 1.0 }\n\n[[params]]\nname = "B"',
        'init = { dist = "poisson", low = -1.0, high = 1.0 }\n\n[[params]]\nname = "B"',
        "params[0].init.dist",
        "unknown distribution",
    ),
    (
        'init = { dist = "uniform", low = -1.0, high = 1.0 }\n\n[[params]]\nname = "B"',
        'init = { dist = "uniform", low = -1.0 }\n\n[[params]]\nname = "B"',
        "params[0].init",
        "'high' is missing",
    ),
    (
        'init = { dist = "uniform", low = -1.0, high = 1.0 }\n\n[[params]]\nname = "B"',
        '\n[[params]]\nname = "B"',
        "params[0]",
        "'init' is missing",
    ),
    (
        'shape = ["M", "K"]',
        'shape = ["M", "K"]\ninit = { dist = "constant", value = 0 }',
        "params[2].init",
        "filled by the grader",
    ),
    ('shape = ["M", "K"]', 'shape = ["M", "K"]\ncheck = "max"', "params[2].check", "unknown check"),
    ('name = "B"', 'name = "A"', "params[1].name", "used twice"),
    (
        'value = "M"',
        'value = "M"\ninit = { dist = "integers", low = 0, high = 3 }',
        "params[3]",
        "exactly one of `value` or `init`",
    ),
    ('value = "M"', 'value = "M"\nshape = [1]', "params[3].shape", "no shape"),
    # Values NumPy cannot hold in the scalar's dtype would raise for every submission.
    ('value = "M"', 'value = "M * 100000000"', "params[3].value", "does not fit in int32"),
    (
        'value = "M"',
        'init = { dist = "integers", low = 0, high = 5000000000 }',
        "params[3].init.high",
        "does not fit in int32",
    ),
    # cuBLAS multiplies matrices; as the reference of another oracle it would fail when timed.
    ('oracle = "matmul"', 'oracle = "hadamard"', "references[1].builtin", "fits only"),
    ('kind = "out"', 'kind = "scratch"', "params", "nothing to check"),
    ("default = 32", "default = 64", "declare.TILE", "min <= default <= max"),
    ("max = 32", "max = 32\nstep = 2", "declare.TILE", "unknown key 'step'"),
    ('names = ["TILE_WIDTH", "TILE"]', "names = []", "declare.TILE.names", "at least 1"),
    (
        'tiles = "ceil(N / TILE)"',
        'tiles = "ceil(N / TILES)"',
        "cases[0].sizes",
        "size 'TILES' is missing",
    ),
    ('tiles = "ceil(N / TILE)"', 'tiles = "N // (TILE - TILE)"', "derived", "division by zero"),
    (
        'block = ["TILE", "TILE"]',
        'block = ["TILE", "TILE", "2"]',
        "launch[0].block",
        "2048 threads",
    ),
    (
        'block = ["TILE", "TILE"]',
        'block = ["TILE", "TILE", 1, 1]',
        "launch[0].block",
        "1 to 3 entries",
    ),
    (
        'grid = ["ceil(K / TILE)", "ceil(M / TILE)"]',
        'grid = ["K / TILE", "ceil(M / TILE)"]',
        "launch[0]",
        "not a whole number",
    ),
    (
        'grid = ["ceil(K / TILE)", "ceil(M / TILE)"]',
        'grid = ["ceil(K / TILE)", "M * 100"]',
        "launch[0].grid[1]",
        "outside 1..65535",
    ),
    ("shared_bytes = 0", "shared_bytes = -4", "launch[0].shared_bytes", "negative"),
    (
        "shared_bytes = 0",
        'shared_bytes = 0\nargs = ["A", "B", "C", "M", "N"]',
        "params[5]",
        "not passed to any launch",
    ),
    (
        "shared_bytes = 0",
        'shared_bytes = 0\nargs = ["A", "B", "C", "M", "N", "K + 1"]',
        "launch[0].args[5]",
        "must name a param",
    ),
    ('oracle = "matmul"', 'oracle = "matmult"', "expected.oracle", "unknown oracle"),
    ('shape = ["M", "K"]', 'shape = ["M", "K"]\ncheck = "sum"', "params[2].check", "an array"),
    ('oracle = "matmul"', 'oracle = "reference:cublas"', "expected.oracle", "with a file"),
    ('oracle = "matmul"', 'oracle = "reference:naive"\nseed = 3', "expected", "unknown key"),
    ("[tolerance.float32]", "[tolerance.int32]", "tolerance", "unknown key 'int32'"),
    ("[tolerance.float32]", "[tolerance.float64]", "tolerance", "[tolerance.float32] is missing"),
    ("rtol = 1e-4", "", "tolerance.float32", "'rtol' is missing"),
    ('atol = "1e-5 * sqrt(N)"', 'atol = "1e-5 * sqrt(Q)"', "cases[0].sizes", "size 'Q' is missing"),
    ('atol = "1e-5 * sqrt(N)"', 'atol = "0 - 1e-5"', "tolerance.float32.atol", "negative"),
    (
        "sizes = { M = 64, N = 64, K = 64 }",
        "sizes = { M = 64, N = 64 }",
        "cases[0].sizes",
        "size 'K' is missing",
    ),
    (
        "sizes = { M = 64, N = 64, K = 64 }",
        "sizes = { M = 64, N = 64, K = 64, Q = 1 }",
        "cases[0].sizes",
        "size 'Q' is not used",
    ),
    (
        "sizes = { M = 64, N = 64, K = 64 }",
        "sizes = { M = 64, N = 64, K = 64.5 }",
        "cases[0].sizes.K",
        "whole number",
    ),
    (
        "sizes = { M = 64, N = 64, K = 64 }",
        "sizes = { M = 64, N = 64, K = -1 }",
        "cases[0].sizes.K",
        "at least 0",
    ),
    (
        "sizes = { M = 64, N = 64, K = 64 }",
        "sizes = { M = 64, N = 64, K = 64, TILE = 8 }",
        "cases[0].sizes",
        "declaration or derived name",
    ),
    ("points = 10", "points = -1", "cases[0].points", "non-negative"),
    ("hidden = true", 'hidden = "yes"', "cases[1].hidden", "true or false"),
    ("hidden = true", "hiden = true", "cases[1]", "unknown key 'hiden'"),
    ('name = "square-1023"', 'name = "square-64"', "cases[1].name", "used twice"),
    ('name = "square-1023"', 'name = "square 1023"', "cases[1].name", "does not match"),
    ('file = "naive.cu"', 'file = "tiled.cu"', "references[0].file", "does not exist"),
    ('file = "naive.cu"', 'file = "lab.md"', "references[0].file", "not a .cu file"),
    ('builtin = "cublas"', 'builtin = "cutlass"', "references[1].builtin", "unknown builtin"),
    ('builtin = "cublas"', 'builtin = "cublas"\nfile = "naive.cu"', "references[1]", "exactly one"),
    ("compile_seconds = 20", "compile_seconds = 0", "limits.compile_seconds", "positive"),
    ("memory_mb = 4096", "memory_mb = 64", "limits.memory_mb", "at least 256"),
    ("memory_mb = 4096", 'memory_mb = "4 GB"', "limits.memory_mb", "whole number"),
    (
        "memory_mb = 4096",
        "memory_mb = 4096\ndevice_globals_mb = 0",
        "limits.device_globals_mb",
        "at least 1",
    ),
    (
        "memory_mb = 4096",
        "memory_mb = 4096\nlocal_memory_mb = 0",
        "limits.local_memory_mb",
        "at least 1",
    ),
    (
        "memory_mb = 4096",
        "memory_mb = 4096\ndevice_globals_mb = 1.5",
        "limits.device_globals_mb",
        "whole number",
    ),
    ('case = "square-1023"', 'case = "square-2048"', "timing.case", "no case"),
    (
        'case = "square-1023"',
        'case = "square-1023"\ntarget_rse = 1.5',
        "timing.target_rse",
        "fraction",
    ),
    (
        'case = "square-1023"',
        'case = "square-1023"\nmin_reps = 20\nmax_reps = 5',
        "timing.max_reps",
        "at least 20",
    ),
    (
        'case = "square-1023"',
        'case = "square-1023"\nmin_reps = 1\nmax_reps = 1',
        "timing.max_reps",
        "at least 2",
    ),
    ('[timing]\ncase = "square-1023"\n', "", "timing", "performance points need a timed case"),
    ('baseline = "naive"', 'baseline = "naïve"', "scoring.baseline", "no reference"),
    ('target = "cublas"', 'target = "naive"', "scoring.target", "must differ"),
    ('target = "cublas"\n', "", "scoring.target", "is missing"),
    (
        "performance_points = 20",
        "performance_points = -5",
        "scoring.performance_points",
        "non-negative",
    ),
    ("[scoring]", "[scorring]", "(top level)", "unknown key 'scorring'"),
    ("[expected]", "[expected]\n[expected2]", "(top level)", "unknown key 'expected2'"),
    ("[[cases]]", "[[case]]", "(top level)", "unknown key 'case'"),
    ("[timing]", "[timing]\nflag_speedup = 0.5", "timing.flag_speedup", "at least 1"),
    (
        "sanitizer = true",
        "sanitizer = true\nsanitizer_hazard_points = -2",
        "lab.sanitizer_hazard_points",
        "non-negative",
    ),
    ('title = "Tiled', "title = Tiled", "", "not valid TOML"),
]


@pytest.mark.parametrize(("old", "new", "field", "fragment"), BAD_SPECS)
def test_malformed_spec_is_refused_naming_the_field(
    tmp_path: Path, old: str, new: str, field: str, fragment: str
) -> None:
    assert old in GOOD_SPEC, f"the mutation's anchor {old!r} is not in the good spec"
    folder = write_lab(tmp_path, GOOD_SPEC.replace(old, new, 1))
    with pytest.raises(LabSpecError) as info:
        load_lab(folder)
    message = str(info.value)
    prefix = f"matmul-tiled/lab.toml: {field}: " if field else "matmul-tiled/lab.toml: "
    assert message.startswith(prefix), message
    assert fragment in message, message


@pytest.mark.parametrize(
    ("old", "new", "field", "fragment"),
    [
        (
            'args = ["partial", "total", "nblocks"]',
            'args = ["partial", "total"]',
            "launch[1].args",
            "the kernel block_sum takes 3",
        ),
        (
            'args = ["partial", "total", "nblocks"]',
            'args = ["partial", "n", "nblocks"]',
            "launch[1].args[1]",
            "float32 array",
        ),
        (
            'args = ["partial", "total", "nblocks"]',
            'args = ["partial", "total", "src"]',
            "launch[1].args[2]",
            "scalar or an expression",
        ),
        (
            'args = ["partial", "total", "nblocks"]',
            'args = ["partial", "total", "nblocks / 3"]',
            "launch[1].args",
            "not a whole number",
        ),
        ('value = "n"', 'value = "n - 2"', "params[3].value", "-1 does not fit in uint32"),
        (
            'args = ["partial", "total", "nblocks"]',
            'args = ["partial", "total", "nblocks * 10000000"]',
            "launch[1].args[2]",
            "does not fit in uint32",
        ),
        # A built-in oracle that does not fit the params, or leaves an output unchecked.
        ('oracle = "sum"', 'oracle = "dot"', "expected.oracle", "needs 2 input arrays"),
        ('oracle = "sum"', 'oracle = "scale"', "expected.oracle", "needs a float scalar"),
        ('kind = "scratch"', 'kind = "out"', "expected.oracle", "2 outputs (partial, total)"),
        # A histogram of 256 bins against `sum` would compare one element (issue 12).
        ("shape = [1]", "shape = [256]", "params[2].check", "so only its first would be compared"),
        (
            'nblocks = "min(1024, ceil(n / 1024))"',
            'nblocks = "min(1024, ceil(n / 1024)"',
            "derived.nblocks",
            "not a valid expression",
        ),
    ],
)
def test_malformed_two_pass_spec(
    tmp_path: Path, old: str, new: str, field: str, fragment: str
) -> None:
    assert old in TWO_PASS_SPEC
    folder = write_lab(tmp_path, TWO_PASS_SPEC.replace(old, new, 1), "array-sum")
    with pytest.raises(LabSpecError) as info:
        load_lab(folder)
    assert str(info.value).startswith(f"array-sum/lab.toml: {field}: "), str(info.value)
    assert fragment in str(info.value)


def test_missing_folder_and_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(LabSpecError, match="does not exist"):
        load_lab(tmp_path / "nothing-here")
    folder = write_lab(tmp_path, GOOD_SPEC)
    (folder / "lab.toml").write_bytes(b"\xff\xfe[lab]")
    with pytest.raises(LabSpecError, match="not UTF-8"):
        load_lab(folder)


@pytest.mark.parametrize("lab_id", ["../etc", "/etc/passwd", "Matmul", "", "no-such-lab"])
def test_load_builtin_lab_refuses_unknown_ids(lab_id: str) -> None:
    with pytest.raises(LabSpecError):
        load_builtin_lab(lab_id)


def test_builtin_labs_exist() -> None:
    assert (builtin_labs_dir() / "SPEC_FORMAT.md").is_file()
    assert list_builtin_labs(), "reference_kernels/ has no lab folders"


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_builtin_lab_loads(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    assert lab.id == lab_id
    assert lab.page_markdown.strip(), f"{lab_id}: the lab page is empty"
    assert lab.max_score > 0
    for case in lab.cases:
        names = lab.sizes_for(case)
        for launch in lab.launches:
            launch.geometry(names)


def test_work_states_flops_and_bytes_per_case(tmp_path: Path) -> None:
    work = '\n[work]\nflops = "2 * M * N * K"\nbytes = "4 * (M * N + N * K + M * K)"\n'
    lab = load_lab(write_lab(tmp_path, GOOD_SPEC + work))
    assert lab.work is not None
    assert lab.work.for_case(lab.sizes_for("square-64")) == (2 * 64**3, 4 * 3 * 64**2)
    assert load_lab(write_lab(tmp_path / "plain", GOOD_SPEC)).work is None


@pytest.mark.parametrize(
    ("work", "field", "fragment"),
    [
        ('flops = "2 * M"', "work", "'bytes' is missing"),
        ('flops = "M"\nbytes = "M"\nbandwidth = 1', "work", "unknown key 'bandwidth'"),
        ('flops = "M - 100"\nbytes = "M"', "work.flops", "negative"),
        ('flops = "2 * M"\nbytes = "4 * (M"', "work.bytes", "not a valid expression"),
    ],
)
def test_malformed_work_is_refused_naming_the_field(
    tmp_path: Path, work: str, field: str, fragment: str
) -> None:
    with pytest.raises(LabSpecError) as info:
        load_lab(write_lab(tmp_path, GOOD_SPEC + "\n[work]\n" + work + "\n"))
    assert str(info.value).startswith(f"matmul-tiled/lab.toml: {field}: "), str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_builtin_labs_state_their_work(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    assert lab.work is not None, f"{lab_id}: no [work] table"
    flops, traffic = lab.work.for_case(lab.sizes_for(lab.cases[-1]))
    assert flops >= 0 and traffic > 0  # a transpose does no arithmetic


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_builtin_lab_pages_speak_to_the_student(lab_id: str) -> None:
    # The pages were written from a course's material; a student of another course reads
    # them without its seeds, lab numbers, homework numbers or Slovak phrases.
    page = load_builtin_lab(lab_id).page_markdown
    for cited in ("seed ", "Seed ", "Lab 14", "homework", "presnosti", "lecture"):
        assert cited not in page, f"{lab_id}/lab.md cites course material: {cited!r}"


def test_the_content_digest_follows_the_files_not_the_folder(tmp_path: Path) -> None:
    one = load_lab(write_lab(tmp_path / "one", GOOD_SPEC))
    two = load_lab(write_lab(tmp_path / "two", GOOD_SPEC))
    assert len(one.digest) == 64 and one.digest == two.digest
    (tmp_path / "two" / "matmul-tiled" / "naive.cu").write_text(NAIVE + "// edited\n")
    assert load_lab(tmp_path / "two" / "matmul-tiled").digest != one.digest
    (tmp_path / "one" / "matmul-tiled" / "lab.md").write_text("# Another page\n")
    assert load_lab(tmp_path / "one" / "matmul-tiled").digest != one.digest


def test_flag_speedup_and_hazard_points_are_read(tmp_path: Path) -> None:
    text = GOOD_SPEC.replace("[timing]", "[timing]\nflag_speedup = 3", 1).replace(
        "sanitizer = true", "sanitizer = true\nsanitizer_hazard_points = 4", 1
    )
    lab = load_lab(write_lab(tmp_path, text))
    assert lab.timing is not None and lab.timing.flag_speedup == 3
    assert lab.sanitizer_hazard_points == 4
    plain = load_lab(write_lab(tmp_path / "plain", GOOD_SPEC))
    assert plain.timing is not None and plain.timing.flag_speedup == 2.0
    assert plain.sanitizer_hazard_points is None
