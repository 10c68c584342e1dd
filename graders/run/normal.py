"""Normal deviates from uniform bits, the same bit for bit on the device and in NumPy.

The generator's twin must be exact, and the math libraries are not: CUDA's `log` and glibc's
may differ in the last bit. So nothing here calls a library function but the correctly rounded
ones (`sqrt`, and `frexp`, which is exact): the inverse of the normal CDF is P. J. Acklam's
rational approximation (relative error below 1.2e-9, far finer than test data needs), and its
tails take a logarithm written out as a series in basic arithmetic. Every step is one
operation rounded to float64 (NumPy ufuncs, separately; on the device `--fmad=false` keeps the
compiler from fusing a multiply and an add), in the same order on both sides.

From a 64-bit word: p = ((bits >> 12) + 0.5) / 2**52, exact and strictly inside (0, 1), so
|z| < 8.3 for every element.
"""

from __future__ import annotations

import math

import numpy as np

# Acklam's coefficients: the central region (a, b) and the tails (c, d).
_A = (
    -3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
    -3.066479806614716e01, 2.506628277459239e00,
)  # fmt: skip
_B = (
    -5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
    -1.328068155288572e01,
)  # fmt: skip
_C = (
    -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
    4.374664141464968e00, 2.938163982698783e00,
)  # fmt: skip
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
P_LOW = 0.02425
P_HIGH = 1.0 - P_LOW
# log(m) = 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...), s = (m - 1) / (m + 1), |s| < 0.172:
# eleven terms leave a truncation error below 3e-17.
_SERIES = tuple(1.0 / (2 * k + 1) for k in range(11))
_SQRT_HALF = math.sqrt(0.5)
_LN2 = math.log(2.0)
# The largest value below 2**63 and 2**64 that float64 holds: a clip bound a cast cannot wrap.
_TOP = {"int64": float(2**63 - 1024), "uint64": float(2**64 - 2048)}
STD_REACH = 9.0  # |z| < 8.3: the data lie within mean +- 9 std


def whole_bounds(low: int, high: int, dtype: str) -> tuple[float, float]:
    """The clip range of an integer dtype as float64 values a cast takes without wrapping."""
    return float(low), _TOP.get(dtype, float(high))


def _c(value: float) -> str:
    """A float64 constant as C source that the compiler reads back as exactly this value."""
    return repr(float(value))


def _horner_c(coeffs: tuple[float, ...], x: str) -> str:
    text = _c(coeffs[0])
    for coeff in coeffs[1:]:
        text = f"__dadd_rn(__dmul_rn({text}, {x}), {_c(coeff)})"
    return text


KERNEL_SOURCE = f"""
__device__ double kg_log(double x) {{
    int e;
    double m = frexp(x, &e);
    if (m < {_c(_SQRT_HALF)}) {{
        m = __dmul_rn(m, 2.0);
        e -= 1;
    }}
    double f = __dsub_rn(m, 1.0);
    double s = __ddiv_rn(f, __dadd_rn(2.0, f));
    double z = __dmul_rn(s, s);
    double poly = {_horner_c(_SERIES[::-1], "z")};
    return __dadd_rn(__dmul_rn((double)e, {_c(_LN2)}), __dmul_rn(__dmul_rn(2.0, s), poly));
}}
__device__ double kg_tail(double p) {{
    double q = __dsqrt_rn(__dmul_rn(-2.0, kg_log(p)));
    double num = {_horner_c(_C, "q")};
    double den = __dadd_rn(__dmul_rn({_horner_c(_D, "q")}, q), 1.0);
    return __ddiv_rn(num, den);
}}
__device__ double kg_normal_deviate(kg_u64 bits) {{
    double p = __dmul_rn(__dadd_rn((double)(bits >> 12), 0.5), {_c(2.0**-52)});
    if (p < {_c(P_LOW)}) {{
        return kg_tail(p);
    }}
    if (p > {_c(P_HIGH)}) {{
        return -kg_tail(__dsub_rn(1.0, p));
    }}
    double q = __dsub_rn(p, 0.5);
    double r = __dmul_rn(q, q);
    double num = __dmul_rn({_horner_c(_A, "r")}, q);
    double den = __dadd_rn(__dmul_rn({_horner_c(_B, "r")}, r), 1.0);
    return __ddiv_rn(num, den);
}}
"""


def _horner(coeffs: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    acc = np.full(x.shape, coeffs[0])
    for coeff in coeffs[1:]:
        acc = np.multiply(acc, x)
        acc = np.add(acc, coeff)
    return acc


def series_log(x: np.ndarray) -> np.ndarray:
    """log(x) for x > 0, by the device's steps (not NumPy's log, which may round otherwise)."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)
    e = np.where(low, e - 1, e).astype(np.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    poly = _horner(_SERIES[::-1], z)
    return np.add(np.multiply(e, _LN2), np.multiply(np.multiply(2.0, s), poly))


def _tail(p: np.ndarray) -> np.ndarray:
    q = np.sqrt(np.multiply(-2.0, series_log(p)))
    num = _horner(_C, q)
    den = np.add(np.multiply(_horner(_D, q), q), 1.0)
    return num / den


def normal_deviates(bits: np.ndarray) -> np.ndarray:
    """The standard normal value of each 64-bit word, exactly as `kg_normal_deviate` makes it."""
    p = np.multiply(np.add((bits >> np.uint64(12)).astype(np.float64), 0.5), 2.0**-52)
    out = np.empty(p.shape, dtype=np.float64)
    lower, upper = p < P_LOW, p > P_HIGH
    middle = ~(lower | upper)
    out[lower] = _tail(p[lower])
    out[upper] = -_tail(np.subtract(1.0, p[upper]))
    q = np.subtract(p[middle], 0.5)
    r = np.multiply(q, q)
    num = np.multiply(_horner(_A, r), q)
    den = np.add(np.multiply(_horner(_B, r), r), 1.0)
    out[middle] = num / den
    return out
