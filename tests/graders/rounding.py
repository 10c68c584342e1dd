"""Honest float evaluations of the built-in labs, simulated with NumPy, and the shortcuts.

A kernel may add in any reasonable order: one value after another in a thread, a pairwise
tree (shared memory, warp shuffles), atomics in whatever order the hardware takes them. Each
`honest_*` function computes a lab's answer the way such kernels round (float32 arithmetic,
one rounding per operation; float64 for the double labs) and returns the largest error of
each order as a fraction of the lab's tolerance on that case: under 1 passes.

`shortcut_miss` does the same for the shortcut probes of `lab check`
(graders.labcheck.probes.probe_inputs): the oracle's answer on what a probe reads, against
the oracle's answer on the data, as a multiple of the tolerance (inf: an integer answer off).

tests/graders/test_tolerances.py asserts the figures the labs' lab.toml comments quote;
bench/honest_error.py prints them for every case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from graders.labcheck.probes import probe_inputs
from graders.run import oracles, python_oracle
from graders.run.inputs import DTYPES, case_seed, generate_arrays, scalar_values
from graders.spec import LabSpec

F32, F64 = np.float32, np.float64
U32, U64 = 2.0**-24, 2.0**-53


# ---------------------------------------------------------------------------------------------
# Orders of addition.


def sequential(values: np.ndarray, dtype: Any = F32) -> np.ndarray:
    """One value after another into one accumulator, along the last axis."""
    return np.cumsum(np.asarray(values, dtype=dtype), axis=-1, dtype=dtype)[..., -1]


def random_order(values: np.ndarray, rng: np.random.Generator, dtype: Any = F32) -> np.ndarray:
    """One accumulator, each row's values in a random order (atomics as the hardware takes
    them)."""
    v = np.asarray(values, dtype=dtype)
    order = np.argsort(rng.random(v.shape), axis=-1)
    return sequential(np.take_along_axis(v, order, axis=-1), dtype)


def tree(values: np.ndarray, dtype: Any = F32) -> np.ndarray:
    """Pairwise halving along the last axis (padded with zeros to a power of two)."""
    v = np.asarray(values, dtype=dtype)
    width = 1 << max(0, (v.shape[-1] - 1).bit_length())
    pad = np.zeros((*v.shape[:-1], width), dtype=dtype)
    pad[..., : v.shape[-1]] = v
    half = width // 2
    while half:
        pad[..., :half] += pad[..., half : 2 * half]
        half //= 2
    return pad[..., 0]


def grid_stride(src: np.ndarray, threads: int, dtype: Any = F32) -> np.ndarray:
    """Each thread's sum of its grid-stride share (elements t, t + threads, ...), in order."""
    per = -(-src.size // threads)
    pad = np.zeros(per * threads, dtype=dtype)
    pad[: src.size] = src
    acc = np.zeros(threads, dtype=dtype)
    for row in pad.reshape(per, threads):
        acc += row
    return acc


def exact_sum(values: np.ndarray) -> float:
    """The correctly rounded sum of float64 values (of float32 data: exact)."""
    return math.fsum(np.asarray(values, dtype=F64).ravel().tolist())


def two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p, e with p + e = a * b exactly (Dekker's split; float64, no overflow)."""
    a, b = np.asarray(a, dtype=F64), np.asarray(b, dtype=F64)
    p = a * b
    split = 134217729.0  # 2^27 + 1
    a_hi = a * split - (a * split - a)
    b_hi = b * split - (b * split - b)
    a_lo, b_lo = a - a_hi, b - b_hi
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def exact_dot(a: np.ndarray, b: np.ndarray) -> float:
    p, e = two_product(a, b)
    return math.fsum(np.concatenate([p.ravel(), e.ravel()]).tolist())


# ---------------------------------------------------------------------------------------------
# A case's data, tolerance and oracle.


# Hidden cases' data depend on the deployment's secret; these figures use this one.
SECRET = "kernelgrader-tolerance-bench"


def case_data(lab: LabSpec, case: str, *, secret: str = SECRET) -> tuple[dict, dict, dict]:
    """(names, arrays, scalars) of a case, as the device makes them (hidden: with `secret`)."""
    spec = lab.case(case)
    names = lab.sizes_for(case)
    seed = case_seed(lab.id, case, hidden=spec.hidden, secret=secret)
    arrays = generate_arrays(lab.params, names, seed, literals=spec.inputs)
    return names, arrays, scalar_values(lab.params, names, seed)


def bound(lab: LabSpec, dtype: str, names: Mapping[str, Any], exact: Any) -> np.ndarray:
    atol, rtol = lab.tolerance[dtype].for_case(names)
    return atol + rtol * np.abs(np.asarray(exact, dtype=F64))


def ratio(lab: LabSpec, dtype: str, names: Mapping[str, Any], got: Any, exact: Any) -> float:
    """The largest |got - exact| / tolerance over the elements."""
    got, exact = np.asarray(got, dtype=F64), np.asarray(exact, dtype=F64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(got - exact) / bound(lab, dtype, names, exact)
    r = np.where(np.abs(got - exact) == 0, 0.0, r)
    return float(np.nanmax(r)) if r.size else 0.0


def oracle_answer(
    lab: LabSpec,
    case: str,
    arrays: Mapping[str, np.ndarray],
    scalars: Mapping[str, Any],
    names: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Each compared output's expected answer (float64, or int64 for integers)."""
    spec = lab.case(case)
    names = names or lab.sizes_for(case)
    if lab.expected_oracle == "python":
        inputs = python_oracle.oracle_inputs(lab, arrays)
        answers = python_oracle.expected_outputs(
            lab, spec, inputs, python_oracle.oracle_scalars(lab, scalars)
        )
        return {p.name: answers[p.name] for p in lab.params if p.needs_answer}
    compared = next(p for p in lab.params if p.needs_answer)
    ins = [np.array(arrays[p.name]) for p in lab.params if p.is_array and p.is_input]
    floats = [
        float(scalars[p.name])
        for p in lab.params
        if p.kind == "scalar" and p.dtype in ("float32", "float64")
    ]
    answer = oracles.compute(
        lab.expected_oracle,
        ins,
        floats,
        compared.shape_for(names),
        np.dtype(DTYPES[compared.dtype]),
    )
    return {compared.name: np.asarray(answer)}


def shortcut_miss(lab: LabSpec, case: str, kind: str, *, rows: int | None = None) -> float:
    """How far the probe `kind` misses on a case, in tolerances (its oracle answer on what the
    probe reads against the answer): over 1, the probe fails the case. `rows` keeps only the
    first rows of a matrix lab's first input (matmul: the rows of C are independent)."""
    names, arrays, scalars = case_data(lab, case)
    read = probe_inputs(lab, lab.case(case), arrays, kind)
    if rows is not None:  # matmul: the first rows of A, and of C
        arrays = {**arrays, "A": arrays["A"][:rows]}
        read = {**read, "A": read["A"][:rows]}
        names = {**names, "M": min(rows, int(names["M"]))}
    exact = oracle_answer(lab, case, arrays, scalars, names)
    got = oracle_answer(lab, case, read, scalars, names)
    worst = 0.0
    for p in lab.params:
        if p.name not in exact:
            continue
        if p.dtype not in lab.tolerance:  # integers: compared exactly
            if not np.array_equal(exact[p.name], got[p.name]):
                return math.inf
            continue
        worst = max(worst, ratio(lab, p.dtype, names, got[p.name], exact[p.name]))
    return worst


# ---------------------------------------------------------------------------------------------
# Honest evaluations, lab by lab: {order: largest error / tolerance} for one case.


def honest_elementwise(lab: LabSpec, case: str) -> dict[str, float]:
    """vector-scale and hadamard: one float32 multiply (or a division by the reciprocal)."""
    names, d, s = case_data(lab, case)
    if lab.id == "vector-scale":
        x, f = d["src"].astype(F64), F64(s["factor"])
        exact = x * f  # float32 times float32 is exact in float64
        return {
            "multiply": ratio(lab, "float32", names, (x * f).astype(F32), exact),
            "divide by 1/factor": ratio(
                lab, "float32", names, (d["src"] / (F32(1) / F32(s["factor"]))).astype(F32), exact
            ),
        }
    exact = d["a"].astype(F64) * d["b"].astype(F64)
    return {"multiply": ratio(lab, "float32", names, (d["a"] * d["b"]).astype(F32), exact)}


def honest_array_sum(lab: LabSpec, case: str, rng: np.random.Generator) -> dict[str, float]:
    """array-sum's two launches: grid-stride thread sums, then each block's 1024 values and
    the partial sums in a tree, one after another, or in a random order."""
    names, d, _ = case_data(lab, case)
    src = d["src"]
    exact = exact_sum(src)
    blocks = min(1024, -(-src.size // 1024))
    threads = grid_stride(src, blocks * 1024).reshape(blocks, 1024)
    reducers: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "tree": tree,
        "in order": sequential,
        "random order": lambda v: random_order(v, rng),
    }
    out = {}
    for name, reduce in reducers.items():
        partial = np.zeros((1, 1024), F32)
        partial[0, :blocks] = reduce(threads)
        out[name] = ratio(lab, "float32", names, reduce(partial)[0], exact)
    return out


def honest_atomic_sum(lab: LabSpec, case: str, rng: np.random.Generator) -> dict[str, float]:
    """array-sum-atomic: one accumulator in index or random order; or a tree per block of 256
    then one atomic per block, in a random order."""
    names, d, _ = case_data(lab, case)
    src = d["src"]
    exact = exact_sum(src)
    blocks = -(-src.size // 256)
    pad = np.zeros(blocks * 256, F32)
    pad[: src.size] = src
    return {
        "one accumulator, in order": ratio(lab, "float32", names, sequential(src), exact),
        "one accumulator, random order": ratio(
            lab, "float32", names, random_order(src, rng), exact
        ),
        "block tree, random atomics": ratio(
            lab, "float32", names, random_order(tree(pad.reshape(blocks, 256)), rng), exact
        ),
    }


def honest_dot(lab: LabSpec, case: str, rng: np.random.Generator) -> dict[str, float]:
    """dot-product (float64): each block's 1024 products added as a tree, in order or in a
    random order, the partial sums added by the grader; against the exact dot product."""
    names, d, _ = case_data(lab, case)
    a, b = d["a"], d["b"]
    exact = exact_dot(a, b)
    blocks = -(-a.size // 1024)
    products = np.zeros(blocks * 1024, F64)
    products[: a.size] = a * b
    products = products.reshape(blocks, 1024)
    out = {}
    for name, reduce in {
        "tree": lambda v: tree(v, F64),
        "in order": lambda v: sequential(v, F64),
        "random order": lambda v: random_order(v, rng, F64),
    }.items():
        out[name] = ratio(lab, "float64", names, float(np.sum(reduce(products))), exact)
    out["oracle (float64)"] = ratio(lab, "float64", names, float(np.sum(a * b)), exact)
    return out


def honest_matmul(
    lab: LabSpec, case: str, rng: np.random.Generator, *, rows: int = 32
) -> dict[str, float]:
    """The matmul labs: each element of a few rows of C as one accumulator over the inner
    dimension, the products rounded on their own or fused (FMA), in order or in a random
    order; float64 labs against the exact products' sum."""
    names, d, _ = case_data(lab, case)
    a_all, b = d["A"], d["B"]
    step = max(1, a_all.shape[0] // rows)
    a = a_all[::step][:rows]
    n = a.shape[1]
    dtype = F64 if lab.id.endswith("f64") else F32
    if dtype is F32:
        exact = a.astype(F64) @ b.astype(F64)  # float32 products are exact; the sum errs by 1e-16
    else:
        cols = range(0, b.shape[1], max(1, b.shape[1] // 16))
        exact = np.array([[exact_dot(a[i], b[:, j]) for j in cols] for i in range(a.shape[0])])
        b = b[:, list(cols)]
    order = rng.permutation(n)

    def accumulate(ks: np.ndarray, fused: bool) -> np.ndarray:
        acc = np.zeros((a.shape[0], b.shape[1]), dtype)
        for k in ks:
            product = a[:, k : k + 1].astype(F64) * b[k][None, :].astype(F64)
            if fused:  # the exact product added, then one rounding (float32 only)
                acc = (acc.astype(F64) + product).astype(dtype)
            else:
                acc = (acc + product.astype(dtype)).astype(dtype)
        return acc

    dt = "float64" if dtype is F64 else "float32"
    out = {
        "in order": ratio(lab, dt, names, accumulate(np.arange(n), False), exact),
        "random order": ratio(lab, dt, names, accumulate(order, False), exact),
    }
    if dtype is F32:
        out["in order, fused"] = ratio(lab, dt, names, accumulate(np.arange(n), True), exact)
    else:
        out["oracle (float64 matmul)"] = ratio(lab, dt, names, a @ b, exact)
    return out


def honest_conv(lab: LabSpec, case: str, rng: np.random.Generator) -> dict[str, float]:
    """conv1d and conv2d: each output one accumulator over the mask's products (zero padding),
    in the mask's order or in a random order."""
    names, d, _ = case_data(lab, case)
    x, mask = d["in"], d["mask"].reshape(-1)
    r = int(names["R"])
    if x.ndim == 1:
        padded = np.pad(x, r)
        terms = np.stack([padded[j : j + x.size] for j in range(2 * r + 1)], axis=-1)
    else:
        h, w = x.shape
        padded = np.pad(x, r)
        side = 2 * r + 1
        terms = np.stack(
            [padded[dy : dy + h, dx : dx + w] for dy in range(side) for dx in range(side)],
            axis=-1,
        )
    products = terms.astype(F64) * mask.astype(F64)  # exact
    exact = products.sum(axis=-1)  # at most 49 exact products: errs by 1e-16
    return {
        "in order": ratio(lab, "float32", names, sequential(products.astype(F32)), exact),
        "random order": ratio(
            lab, "float32", names, random_order(products.astype(F32), rng), exact
        ),
    }


def honest_softmax(
    lab: LabSpec, case: str, rng: np.random.Generator, *, rows: int = 64
) -> dict[str, float]:
    """softmax: float32 differences from the row's maximum, expf within 2 units in the last
    place, the row's sum as a tree of 256 strided thread sums or as one accumulator in a random
    order, and one division."""
    names, d, _ = case_data(lab, case)
    x = d["x"][:rows]
    exact = np.exp(x.astype(F64) - x.max(axis=1, keepdims=True).astype(F64))
    exact /= exact.sum(axis=1, keepdims=True)
    diff = (x - x.max(axis=1, keepdims=True)).astype(F32)
    e = np.exp(diff.astype(F64)).astype(F32)
    wobble = (1 + 2 * U32 * rng.choice([-1.0, 1.0], e.shape)).astype(F64)
    e_off = (e.astype(F64) * wobble).astype(F32)  # expf's 2-ulp error bound
    cols = x.shape[1]
    threads = 256
    strided = np.zeros((x.shape[0], -(-cols // threads) * threads), F32)
    out = {}
    for name, values in {"expf exact": e, "expf 2 ulp off": e_off}.items():
        strided[:, :cols] = values
        per_thread = sequential(strided.reshape(x.shape[0], -1, threads).transpose(0, 2, 1))
        for how, z in {
            "tree": tree(per_thread),
            "random order": random_order(values, rng),
        }.items():
            y = (values / z[:, None]).astype(F32)
            out[f"{name}, {how}"] = ratio(lab, "float32", names, y, exact)
    return out


HONEST: dict[str, Callable[..., dict[str, float]]] = {
    "vector-scale": lambda lab, case, rng: honest_elementwise(lab, case),
    "hadamard": lambda lab, case, rng: honest_elementwise(lab, case),
    "array-sum": honest_array_sum,
    "array-sum-atomic": honest_atomic_sum,
    "dot-product": honest_dot,
    "matmul-naive": honest_matmul,
    "matmul-tiled": honest_matmul,
    "matmul-coarsened": honest_matmul,
    "matmul-tiled-f64": honest_matmul,
    "conv1d-tiled": honest_conv,
    "conv2d": honest_conv,
    "softmax": honest_softmax,
}
