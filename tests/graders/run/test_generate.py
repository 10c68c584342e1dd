"""The input generator's NumPy twin, pinned: a case stays reproducible from its seed for staff.

The device half is checked against this twin in tests/graders/gpu/test_generate_gpu.py.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from graders.run import generate, host_dtypes, normal
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


def test_pinned_values_of_the_newer_kinds() -> None:
    # As above: a normal's deviates, bytes, and the two half-width floats (as their bits).
    key = generate.stream_key(20261121, "A")
    z = generate.host_values(InitSpec("normal", mean=0.0, std=1.0), "float64", (4,), {}, key)
    assert z.tolist() == PINNED_NORMAL
    skewed = generate.host_values(InitSpec("normal", mean=128, std=40), "uint8", (8,), {}, key)
    assert skewed.dtype == np.uint8 and skewed.tolist() == PINNED_BYTES
    half = generate.host_values(InitSpec("uniform", -1.0, 1.0), "float16", (4,), {}, key)
    assert half.dtype == np.float16 and half.view(np.uint16).tolist() == PINNED_F16_BITS
    brain = generate.host_values(InitSpec("uniform", -1.0, 1.0), "bfloat16", (4,), {}, key)
    assert brain.dtype == np.uint16 and brain.tolist() == PINNED_BF16_BITS


PINNED_NORMAL = [-2.2438862820484955, 1.1674792800460956, 0.06315799984572978, -0.8180359601581363]
PINNED_BYTES = [38, 175, 131, 95, 146, 137, 88, 108]
PINNED_F16_BITS = [48077, 14862, 10866, 47281]
PINNED_BF16_BITS = [49018, 16194, 15694, 48918]


def test_normal_deviates_follow_the_normal_distribution() -> None:
    z = generate.host_values(InitSpec("normal", mean=0.0, std=1.0), "float64", (400_000,), {}, 3)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    assert 0.0445 < (np.abs(z) > 2.0).mean() < 0.0465  # 4.55 % beyond two deviations
    assert np.abs(z).max() < normal.STD_REACH
    # The inverse CDF behind them is Acklam's, within 1.2e-9 of the exact one.
    bits = generate.host_bits(11, 20_000)
    p = ((bits >> np.uint64(12)).astype(np.float64) + 0.5) * 2.0**-52
    exact = np.array([statistics.NormalDist().inv_cdf(float(x)) for x in p])
    got = normal.normal_deviates(bits)
    assert np.max(np.abs(got - exact) / np.maximum(np.abs(exact), 1e-3)) < 1.2e-9


def test_the_series_logarithm_is_a_logarithm() -> None:
    x = np.geomspace(2.0**-60, 0.999, 10_000)
    exact = np.log(x)
    assert np.max(np.abs(normal.series_log(x) - exact) / np.abs(exact)) < 1e-15


def test_normal_integers_round_and_clip_to_the_dtype() -> None:
    wide = InitSpec("normal", mean=128, std=500)  # most values beyond 0..255
    data = generate.host_values(wide, "uint8", (10_000,), {}, 4)
    assert data.min() == 0 and data.max() == 255
    assert ((data == 0) | (data == 255)).mean() > 0.7
    exact = 128 + 500 * normal.normal_deviates(generate.host_bits(4, 10_000))
    assert np.array_equal(data, np.clip(np.rint(exact), 0, 255).astype(np.uint8))
    huge = generate.host_values(InitSpec("normal", mean=0, std=1e30), "int64", (1000,), {}, 5)
    assert huge.min() == -(2**63) and huge.max() == 2**63 - 1024  # clipped, never wrapped


def test_half_width_floats_round_through_float32() -> None:
    init = InitSpec("uniform", -1e-5, 1e-5)  # float16 subnormals
    key = 21
    wide = generate.host_values(init, "float64", (5000,), {}, key)
    half = generate.host_values(init, "float16", (5000,), {}, key)
    assert np.array_equal(half, wide.astype(np.float32).astype(np.float16))
    brain = generate.host_values(init, "bfloat16", (5000,), {}, key)
    assert np.array_equal(brain, host_dtypes.bfloat16_bits(wide.astype(np.float32)))
    assert generate.host_values(
        InitSpec("constant", value=1.5), "bfloat16", (2,), {}, 0
    ).tolist() == [
        0x3FC0,
        0x3FC0,
    ]
