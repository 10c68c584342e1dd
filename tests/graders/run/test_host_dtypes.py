"""bfloat16 on the host: uint16 bits, rounded to nearest even, read back as float32 exactly."""

from __future__ import annotations

import numpy as np

from graders.run.host_dtypes import bfloat16_bits, bfloat16_values, host_dtype, readable


def test_host_dtypes() -> None:
    assert host_dtype("bfloat16") == np.uint16
    assert host_dtype("float16") == np.float16 and host_dtype("uint8") == np.uint8


def test_exact_values_round_trip() -> None:
    values = np.array([0.0, -0.0, 1.0, -2.5, 3.140625, 65280.0, np.inf, -np.inf], np.float32)
    bits = bfloat16_bits(values)
    assert bits.dtype == np.uint16
    assert bits[2] == 0x3F80 and bits[3] == 0xC020
    back = bfloat16_values(bits)
    assert back.dtype == np.float32
    assert np.array_equal(back, values) and np.signbit(back[1])


def test_rounding_is_to_nearest_even() -> None:
    one = np.float32(1.0).view(np.uint32)
    # bfloat16 steps are 2^-7 near 1. 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: it rounds
    # to the one with an even last bit (1); 1 + 3 * 2^-8 rounds up to the even 1 + 2^-6.
    halfway = np.array([one + 0x8000, one + 0x18000, one + 0x8001], np.uint32).view(np.float32)
    got = bfloat16_values(bfloat16_bits(halfway))
    assert got[0] == 1.0
    assert got[1] == np.float32(1 + 2**-6)
    assert got[2] == np.float32(1 + 2**-7)  # just past halfway rounds up


def test_nan_stays_nan_and_overflow_becomes_infinity() -> None:
    bits = bfloat16_bits(np.array([np.nan, np.finfo(np.float32).max], np.float32))
    values = bfloat16_values(bits)
    assert np.isnan(values[0]) and values[1] == np.inf


def test_readable_turns_only_bfloat16_into_values() -> None:
    data = np.array([0x3F80], np.uint16)
    assert readable("bfloat16", data)[0] == 1.0
    assert readable("float16", np.array([1.5], np.float16))[0] == 1.5
