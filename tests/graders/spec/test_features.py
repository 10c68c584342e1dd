"""The spec features of issue 12: several kernels, new dtypes and distributions, zeroed scratch,
float case parameters, hand-written inputs, declaration constraints, output checks and a Python
oracle; each loads as documented, and each mistake is refused naming its field."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.spec import LabSpecError, load_lab
from tests.graders.spec_samples import GOOD_SPEC, MULTI_SPEC, write_lab, write_multi_lab


def test_multi_kernel_lab_loads_with_each_kernels_signature(tmp_path: Path) -> None:
    lab = load_lab(write_multi_lab(tmp_path))
    assert lab.kernels == ("count", "finish") and lab.kernel == "count"
    assert [launch.kernel for launch in lab.launches] == ["count", "finish"]
    assert lab.c_signature() == (
        'extern "C" __global__ void count(const unsigned char* data, unsigned int* counts, '
        "unsigned long long n)"
    )
    assert lab.c_signature("finish") == (
        'extern "C" __global__ void finish(unsigned int* counts, float* out, float alpha)'
    )
    assert lab.signature_sizes() == [8, 8, 8] and lab.signature_sizes("finish") == [8, 8, 4]
    names = lab.sizes_for("big")
    second = lab.launch_args(1, names)
    assert [a.dtype for a in second] == ["uint32", "float32", "float32"]
    assert second[2].value == -0.25  # a float case parameter, passed as the float scalar


def test_single_kernel_labs_keep_their_one_kernel(tmp_path: Path) -> None:
    lab = load_lab(write_lab(tmp_path, GOOD_SPEC))
    assert lab.kernels == ("matmul",)
    assert {launch.kernel for launch in lab.launches} == {"matmul"}


def test_new_dtypes_distributions_and_scratch_init(tmp_path: Path) -> None:
    lab = load_lab(write_multi_lab(tmp_path))
    data, counts = lab.param("data"), lab.param("counts")
    assert data.dtype == "uint8" and data.c_type == "const unsigned char*"
    assert data.init is not None and data.init.dist == "normal"
    assert data.init.expressions == {"mean": 128, "std": "spread"}
    assert counts.kind == "scratch" and counts.init is not None and counts.init.dist == "zeros"
    assert lab.param("n").dtype == "uint64" and lab.param("n").value_for(lab.sizes_for("big")) == (
        1000000
    )


def test_float_case_parameters_and_literal_inputs(tmp_path: Path) -> None:
    lab = load_lab(write_multi_lab(tmp_path))
    tiny = lab.case("tiny")
    assert tiny.sizes == {"n": 5, "spread": 1.0, "alpha": 0.5}
    literal = tiny.inputs["data"]
    assert literal.values == (1, 2, 3, 255, 0) and literal.source == "literal"
    assert literal.shape is None
    assert lab.case("big").inputs == {}


def test_python_oracle_is_read_not_run(tmp_path: Path) -> None:
    folder = write_multi_lab(
        tmp_path, oracle="import sys\nsys.exit(3)\n" + "def expected(a, b, c): pass\n"
    )
    lab = load_lab(folder)  # loading never executes the file
    assert lab.expected_oracle == "python"
    assert lab.python_oracle is not None
    assert lab.python_oracle.file == "oracle.py" and not lab.python_oracle.has_check


def test_declaration_constraints(tmp_path: Path) -> None:
    lab = load_lab(write_multi_lab(tmp_path))
    block = lab.declares["BLOCK"]
    assert block.power_of_two and block.problem(256) is None
    assert "power of two" in (block.problem(96) or "")
    assert "from 32 to 1024" in (block.problem(2048) or "")


def _multi(tmp_path: Path, old: str, new: str, oracle: str | None = None) -> LabSpecError:
    assert old in MULTI_SPEC, f"the mutation's anchor {old!r} is not in the spec"
    text = MULTI_SPEC.replace(old, new, 1)
    folder = (
        write_multi_lab(tmp_path, text)
        if oracle is None
        else write_multi_lab(tmp_path, text, oracle)
    )
    with pytest.raises(LabSpecError) as info:
        load_lab(folder)
    return info.value


BAD = [
    # several kernels
    ('kernels = ["count", "finish"]', 'kernels = ["count", "finish"]\nkernel = "count"', "lab",
     "not both"),
    ('kernels = ["count", "finish"]', 'kernels = ["count", "count"]', "lab.kernels[1]",
     "used twice"),
    ('kernels = ["count", "finish"]', 'kernels = ["count", "finish", "spare"]', "launch",
     "no launch runs the kernel 'spare'"),
    ('kernel = "finish"\n', "", "launch[1]", "'kernel' is missing"),
    ('kernel = "finish"', 'kernel = "finnish"', "launch[1].kernel", "not one of the lab's"),
    ('args = ["counts", "out", "alpha"]', 'args = ["counts", "out", "alpha * 2"]',
     "launch[1].args[2]", "first launch of finish fixes its signature"),
    # dtypes and distributions
    ("mean = 128, std = \"spread\"", "mean = 128", "params[0].init", "'std' is missing"),
    ("mean = 128, std = \"spread\"", "mean = 128, std = \"spread\", low = 0",
     "params[0].init.low", "is not used by dist = 'normal'"),
    ('init = { dist = "zeros" }', 'init = { dist = "zeros", value = 0 }', "params[1].init.value",
     "takes nothing else"),
    ('name = "out"\nkind = "out"\ndtype = "float32"\nshape = [256]',
     'name = "out"\nkind = "out"\ndtype = "float32"\nshape = [256]\ninit = { dist = "zeros" }',
     "params[2].init", "use kind = 'inout'"),
    ("spread = 8.0", "spread = -8.0", "params[0].init.std", "negative"),
    # float case parameters: whole numbers where a shape or launch needs them
    ("n = 1000000,", "n = 1000000.5,", "cases[1].sizes.n", "must be a whole number"),
    ("n = 1000000,", "n = 1e6,", "cases[1].sizes.n", "params[0].shape[0]"),
    ("alpha = 0.5", 'alpha = "half"', "cases[0].sizes.alpha", "expected a number"),
    ("alpha = 0.5", "alpha = inf", "cases[0].sizes.alpha", "finite"),
    # hand-written inputs
    ("inputs = { data = [1, 2, 3, 255, 0] }", "inputs = { data = [1, 2, 3, 256, 0] }",
     "cases[0].inputs.data", "value 3 is 256, which does not fit in uint8"),
    ("inputs = { data = [1, 2, 3, 255, 0] }", "inputs = { data = [1, 2, 3, 255] }",
     "cases[0].inputs.data", "4 values given; data has shape [5], 5 elements"),
    ("inputs = { data = [1, 2, 3, 255, 0] }", "inputs = { data = [1, 2, 3.5, 255, 0] }",
     "cases[0].inputs.data", "takes whole numbers"),
    ("inputs = { data = [1, 2, 3, 255, 0] }", "inputs = { counts = [1, 2, 3, 255, 0] }",
     "cases[0].inputs.counts", "not an input array"),
    ("inputs = { data = [1, 2, 3, 255, 0] }", "inputs = { data = [[1, 2], [3]] }",
     "cases[0].inputs.data", "rows of different lengths"),
    ("inputs = { data = [1, 2, 3, 255, 0] }", "inputs = { data = [] }",
     "cases[0].inputs.data", "has no values"),
    ("inputs = { data = [1, 2, 3, 255, 0] }", 'inputs = { data = { file = "nope.txt" } }',
     "cases[0].inputs.data.file", "does not exist"),
    ("inputs = { data = [1, 2, 3, 255, 0] }", 'inputs = { data = { file = "../x.txt" } }',
     "cases[0].inputs.data.file", "outside the lab folder"),
    # declaration constraints
    ("power_of_two = true", "power_of_two = true\nmultiple_of = 3", "declare.BLOCK.default",
     "multiple of 3"),
    ("max = 1024", "max = 1000", "declare.BLOCK.max", "power of two"),
    ("power_of_two = true", "power_of_two = 1", "declare.BLOCK.power_of_two", "true or false"),
    ("power_of_two = true", "multiple_of = 0", "declare.BLOCK.multiple_of", "at least 1"),
    # the Python oracle
    ('oracle = "python"', 'oracle = "python"\nfile = "answers.py"', "expected.file",
     "does not exist"),
    ('oracle = "python"', 'oracle = "python"\nfile = "lab.md"', "expected.file",
     "not a .py file"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "field", "fragment"), BAD)
def test_feature_mistakes_are_refused_naming_the_field(
    tmp_path: Path, old: str, new: str, field: str, fragment: str
) -> None:
    message = str(_multi(tmp_path, old, new))
    assert message.startswith(f"two-kernels/lab.toml: {field}: "), message
    assert fragment in message, message


@pytest.mark.parametrize(
    ("oracle", "fragment"),
    [
        ("def expect(inputs, sizes, scalars):\n    return {}\n", "defines no top-level function"),
        ("def expected(inputs, sizes):\n    return {}\n", "must take 3 positional arguments"),
        ("async def expected(inputs, sizes, scalars):\n    return {}\n", "must not be async"),
        ("def expected(inputs, sizes, scalars):\n    return {\n", "line 2"),
        (
            "def expected(i, s, c):\n    return {}\ndef check(outputs, expected):\n    pass\n",
            "check() must take 4 positional arguments",
        ),
        ("def expected(i, s, c, *, strict):\n    return {}\n", "must take 3"),
    ],
)
def test_a_broken_oracle_file_is_refused_by_line(
    tmp_path: Path, oracle: str, fragment: str
) -> None:
    folder = write_multi_lab(tmp_path, oracle=oracle)
    with pytest.raises(LabSpecError) as info:
        load_lab(folder)
    message = str(info.value)
    assert message.startswith("two-kernels/lab.toml: expected.file: 'oracle.py'"), message
    assert fragment in message, message


def test_an_oracle_may_take_defaults_and_star_args(tmp_path: Path) -> None:
    oracle = (
        "def expected(inputs, sizes, scalars=None, *rest):\n    return {}\n"
        "def check(*args, verbose=False):\n    return True\n"
    )
    lab = load_lab(write_multi_lab(tmp_path, oracle=oracle))
    assert lab.python_oracle is not None and lab.python_oracle.has_check


def test_input_values_from_a_file(tmp_path: Path) -> None:
    spec = MULTI_SPEC.replace(
        "inputs = { data = [1, 2, 3, 255, 0] }", 'inputs = { data = { file = "in/tiny.txt" } }'
    )
    folder = write_multi_lab(tmp_path, spec)
    (folder / "in").mkdir()
    (folder / "in" / "tiny.txt").write_text("# five bytes\n1, 2 3\n255\t0  # the end\n")
    literal = load_lab(folder).case("tiny").inputs["data"]
    assert literal.values == (1, 2, 3, 255, 0) and literal.source == "in/tiny.txt"
    (folder / "in" / "tiny.txt").write_text("1 2 three 4 5\n")
    with pytest.raises(LabSpecError, match="'in/tiny.txt' line 1: 'three' is not a number"):
        load_lab(folder)


def test_nested_literal_inputs_must_nest_as_the_shape(tmp_path: Path) -> None:
    base = GOOD_SPEC.replace(
        'name = "square-64"\nsizes = { M = 64, N = 64, K = 64 }',
        'name = "square-64"\nsizes = { M = 2, N = 3, K = 64 }\n'
        "inputs = { A = [[1, 2, 3], [4, 5, 6]] }",
    )
    lab = load_lab(write_lab(tmp_path / "a", base))
    literal = lab.case("square-64").inputs["A"]
    assert literal.values == (1, 2, 3, 4, 5, 6) and literal.shape == (2, 3)
    flat = base.replace("[[1, 2, 3], [4, 5, 6]]", "[1, 2, 3, 4, 5, 6]")
    assert load_lab(write_lab(tmp_path / "b", flat)).case("square-64").inputs["A"].shape is None
    wrong = base.replace("[[1, 2, 3], [4, 5, 6]]", "[[1, 2], [3, 4], [5, 6]]")
    with pytest.raises(LabSpecError, match=r"nest as \[3, 2\], but A has shape \[2, 3\]"):
        load_lab(write_lab(tmp_path / "c", wrong))


def test_init_may_be_left_out_when_every_case_writes_the_input(tmp_path: Path) -> None:
    one_case = MULTI_SPEC.split('[[cases]]\nname = "big"')[0]
    text = one_case.replace('init = { dist = "normal", mean = 128, std = "spread" }\n', "")
    text = text.replace("spread = 1.0, ", "")
    lab = load_lab(write_multi_lab(tmp_path / "a", text))
    assert lab.param("data").init is None
    both = MULTI_SPEC.replace('init = { dist = "normal", mean = 128, std = "spread" }\n', "")
    both = both.replace("spread = 1.0, ", "").replace("spread = 8.0, ", "")
    with pytest.raises(LabSpecError, match=r"params\[0\]: 'init' is missing .* case 'big'"):
        load_lab(write_multi_lab(tmp_path / "b", both))


def test_float16_and_bfloat16_arrays_need_their_tolerance(tmp_path: Path) -> None:
    text = GOOD_SPEC.replace(
        'name = "C"\nkind = "out"\ndtype = "float32"', 'name = "C"\nkind = "out"\ndtype = "float16"'
    )
    with pytest.raises(LabSpecError, match=r"\[tolerance.float16\] is missing"):
        load_lab(write_lab(tmp_path / "a", text))
    text += "\n[tolerance.float16]\natol = 1e-2\nrtol = 1e-2\n"
    lab = load_lab(write_lab(tmp_path / "b", text))
    assert lab.param("C").c_type == "__half*"
    bf = GOOD_SPEC.replace(
        'name = "A"\nkind = "in"\ndtype = "float32"', 'name = "A"\nkind = "in"\ndtype = "bfloat16"'
    )
    assert load_lab(write_lab(tmp_path / "c", bf)).param("A").c_type == "const __nv_bfloat16*"


def test_float16_inputs_must_fit(tmp_path: Path) -> None:
    text = GOOD_SPEC.replace(
        'name = "A"\nkind = "in"\ndtype = "float32"\nshape = ["M", "N"]\n'
        'init = { dist = "uniform", low = -1.0, high = 1.0 }',
        'name = "A"\nkind = "in"\ndtype = "float16"\nshape = ["M", "N"]\n'
        'init = { dist = "uniform", low = -1.0, high = 70000.0 }',
    )
    with pytest.raises(LabSpecError, match=r"params\[0\].init.high: .*beyond the largest float16"):
        load_lab(write_lab(tmp_path, text))


C_PARAM = 'name = "C"\nkind = "out"\ndtype = "float32"\nshape = ["M", "K"]'


def _with_c(tmp_path: Path, extra: str) -> Path:
    return write_lab(tmp_path, GOOD_SPEC.replace(C_PARAM, C_PARAM + "\n" + extra))


def test_output_checks_split_into_comparison_and_properties(tmp_path: Path) -> None:
    lab = load_lab(_with_c(tmp_path / "a", 'check = ["elementwise", "rows_sum_to_one"]'))
    c = lab.param("C")
    assert c.check == "elementwise" and c.properties == ("rows_sum_to_one",)
    lab = load_lab(_with_c(tmp_path / "b", 'check = "sorted_permutation"\nof = "A"'))
    c = lab.param("C")
    assert c.check == "none" and c.properties == ("sorted_permutation",) and c.of == "A"
    assert not c.needs_answer


@pytest.mark.parametrize(
    ("extra", "field", "fragment"),
    [
        ('check = ["elementwise", "sum"]', "params[2].check", "pick one"),
        ('check = ["elementwise", "elementwise"]', "params[2].check[1]", "listed twice"),
        ('check = ["python", "elementwise"]', "params[2].check", "stands alone"),
        ('check = "python"', "params[2].check", "needs a check(outputs, expected, inputs, sizes)"),
        ('check = "sorted"', "params[2].check", "unknown check 'sorted'"),
        ("check = []", "params[2].check", "at least 1"),
        ('check = "sorted_permutation"', "params[2].of", "the float32 inputs are A, B"),
        ('check = "sorted_permutation"\nof = "C"', "params[2].of", "not an input array"),
        ('of = "A"', "params[2].of", "there is none"),
    ],
)
def test_output_check_mistakes(tmp_path: Path, extra: str, field: str, fragment: str) -> None:
    with pytest.raises(LabSpecError) as info:
        load_lab(_with_c(tmp_path, extra))
    message = str(info.value)
    assert message.startswith(f"matmul-tiled/lab.toml: {field}: "), message
    assert fragment in message, message


def test_property_checks_need_fitting_outputs(tmp_path: Path) -> None:
    ints = GOOD_SPEC.replace(
        C_PARAM, C_PARAM.replace("float32", "int32") + '\ncheck = "rows_sum_to_one"'
    )
    with pytest.raises(LabSpecError, match=r"params\[2\].check: 'rows_sum_to_one' needs a float"):
        load_lab(write_lab(tmp_path / "a", ints))
    # A permutation has as many elements as its input, in every case.
    text = GOOD_SPEC.replace(C_PARAM, C_PARAM + '\ncheck = "sorted_permutation"\nof = "A"')
    text = text.replace("sizes = { M = 64, N = 64, K = 64 }", "sizes = { M = 64, N = 32, K = 64 }")
    with pytest.raises(LabSpecError, match=r"params\[2\].of: case 'square-64'.*4096 elements"):
        load_lab(write_lab(tmp_path / "b", text))


def test_a_built_in_oracle_answers_one_output_and_properties_need_no_answer(
    tmp_path: Path,
) -> None:
    text = GOOD_SPEC.replace(
        C_PARAM,
        C_PARAM + '\n\n[[params]]\nname = "D"\nkind = "out"\ndtype = "float32"\n'
        'shape = ["M", "K"]\ncheck = "rows_sum_to_one"',
    ).replace(
        'grid = ["ceil(K / TILE)", "ceil(M / TILE)"]',
        'grid = ["ceil(K / TILE)", "ceil(M / TILE)"]\nargs = ["A", "B", "C", "D", "M", "N", "K"]',
    )
    lab = load_lab(write_lab(tmp_path / "a", text))
    assert [p.name for p in lab.params if p.needs_answer] == ["C"]
    both = text.replace('check = "rows_sum_to_one"', 'check = "elementwise"')
    with pytest.raises(LabSpecError, match=r"'matmul' computes one answer.*\(C, D\)"):
        load_lab(write_lab(tmp_path / "b", both))


def test_python_check_alone_judges_an_output(tmp_path: Path) -> None:
    text = MULTI_SPEC.replace(
        'shape = [256]\n\n[[params]]\nname = "n"',
        'shape = [256]\ncheck = "python"\n\n[[params]]\nname = "n"',
    )
    assert text != MULTI_SPEC
    with pytest.raises(LabSpecError, match=r"params\[2\].check: 'python' needs a check"):
        load_lab(write_multi_lab(tmp_path / "a", text))
    oracle = "def expected(i, s, c):\n    return {}\n\ndef check(o, e, i, s):\n    return True\n"
    lab = load_lab(write_multi_lab(tmp_path / "b", text, oracle))
    out = lab.param("out")
    assert out.check == "none" and out.properties == () and not out.needs_answer


def test_a_timed_case_may_write_by_hand_only_inputs_that_have_an_init(tmp_path: Path) -> None:
    timed = MULTI_SPEC + '\n[timing]\ncase = "tiny"\n'
    lab = load_lab(write_multi_lab(tmp_path / "a", timed))  # data has an init: timed on new data
    assert lab.timing is not None and lab.timing.case == "tiny"
    one_case = timed.split('[[cases]]\nname = "big"')[0] + '\n[timing]\ncase = "tiny"\n'
    without = one_case.replace('init = { dist = "normal", mean = 128, std = "spread" }\n', "")
    without = without.replace("spread = 1.0, ", "")
    with pytest.raises(LabSpecError, match="timing.case: case 'tiny' writes 'data' by hand, and"):
        load_lab(write_multi_lab(tmp_path / "b", without))
