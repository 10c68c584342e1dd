"""The input generator's NumPy twin, pinned: a case stays reproducible from its seed for staff.

The device half is checked against this twin in tests/graders/gpu/test_generate_gpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from graders.run import generate
from graders.spec import InitSpec


def test_the_raw_words_are_splitmix64() -> None:
    # SplitMix64's published first outputs for the seed 0: element i of key 0 is output i.
    words = generate.host_bits(0, 3)
    assert [int(w) for w in words] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


def test_keys_differ_by_seed_name_and_repetition() -> None:
    base = generate.stream_key(7, "A")
    assert base == generate.stream_key(7, "A")
    others = {
        generate.stream_key(8, "A"),
        generate.stream_key(7, "B"),
        generate.stream_key(7, "A", nonce=1, rep=0),
        generate.stream_key(7, "A", nonce=1, rep=1),
        generate.stream_key(7, "A", nonce=2, rep=0),
    }
    assert base not in others and len(others) == 5


def test_pinned_values_of_each_kind() -> None:
    # Changing any of these numbers changes every stored case's data: keep them.
    key = generate.stream_key(20261121, "A")
    f32 = generate.host_values(InitSpec("uniform", -1.0, 1.0), np.float32, (4,), {}, key)
    assert f32.dtype == np.float32
    assert f32.tolist() == pytest.approx(PINNED_F32, abs=0)
    ints = generate.host_values(InitSpec("integers", -3, 3), np.int32, (6,), {}, key)
    assert ints.tolist() == PINNED_INT
    f64 = generate.host_values(InitSpec("uniform", 1.5, 4.0), np.float64, (2,), {}, key)
    assert f64.tolist() == PINNED_F64


PINNED_F32 = [-0.9751603007316589, 0.7569831013679504, 0.05035931244492531, -0.5866633653640747]
PINNED_INT = [-3, 3, 0, -2, 1, 1]
PINNED_F64 = [1.5310496486562615, 3.6962289112328754]


def test_ranges_shapes_and_constants() -> None:
    names = {"n": 1000}
    u = generate.host_values(InitSpec("uniform", "-n", "n"), np.float32, (10, 100), names, 5)
    assert u.shape == (10, 100) and u.min() >= -1000 and u.max() <= 1000 and u.std() > 100
    i = generate.host_values(InitSpec("integers", 0, 1), np.uint32, (1000,), names, 5)
    assert set(np.unique(i).tolist()) == {0, 1}
    c = generate.host_values(InitSpec("constant", value=0), np.float64, (3,), names, 5)
    assert c.tolist() == [0.0, 0.0, 0.0]
    # Uniform into an integer dtype draws integers low..high, as the old generator did.
    k = generate.host_values(InitSpec("uniform", -2, 2), np.int64, (500,), names, 9)
    assert set(np.unique(k).tolist()) == {-2, -1, 0, 1, 2}


def test_an_integer_range_too_wide_is_refused_with_a_sentence() -> None:
    with pytest.raises(ValueError, match="at most"):
        generate.host_values(InitSpec("integers", 0, 2**40), np.int64, (2,), {}, 1)


def test_uniform_values_are_spread_evenly() -> None:
    u = generate.host_values(InitSpec("uniform", 0.0, 1.0), np.float64, (100_000,), {}, 3)
    counts, _ = np.histogram(u, bins=10, range=(0, 1))
    assert counts.min() > 9_500 and counts.max() < 10_500
