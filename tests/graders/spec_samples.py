"""Lab specs shared by the spec and compile tests: a tiled matmul lab and a two-pass sum lab."""

from __future__ import annotations

from pathlib import Path

GOOD_SPEC = """\
[lab]
id = "matmul-tiled"
title = "Tiled matrix multiplication"
kernel = "matmul"
page = "lab.md"
requires = ["__shared__"]
sanitizer = true
sanitizer_case = "square-64"
nvrtc_options = ["-std=c++17"]

[[params]]
name = "A"
kind = "in"
dtype = "float32"
shape = ["M", "N"]
init = { dist = "uniform", low = -1.0, high = 1.0 }

[[params]]
name = "B"
kind = "in"
dtype = "float32"
shape = ["N", "K"]
init = { dist = "uniform", low = -1.0, high = 1.0 }

[[params]]
name = "C"
kind = "out"
dtype = "float32"
shape = ["M", "K"]

[[params]]
name = "M"
kind = "scalar"
dtype = "int32"
value = "M"

[[params]]
name = "N"
kind = "scalar"
dtype = "int32"
value = "N"

[[params]]
name = "K"
kind = "scalar"
dtype = "int32"
value = "K"

[derived]
tiles = "ceil(N / TILE)"

[declare.TILE]
names = ["TILE_WIDTH", "TILE"]
default = 32
min = 1
max = 32

[[launch]]
block = ["TILE", "TILE"]
grid = ["ceil(K / TILE)", "ceil(M / TILE)"]
shared_bytes = 0

[expected]
oracle = "matmul"

[tolerance.float32]
atol = "1e-5 * sqrt(N)"
rtol = 1e-4

[[cases]]
name = "square-64"
sizes = { M = 64, N = 64, K = 64 }
points = 10

[[cases]]
name = "square-1023"
sizes = { M = 1023, N = 1023, K = 1023 }
points = 15
hidden = true

[[references]]
name = "naive"
file = "naive.cu"

[[references]]
name = "cublas"
builtin = "cublas"

[limits]
compile_seconds = 20
case_seconds = 10
memory_mb = 4096

[timing]
case = "square-1023"

[scoring]
performance_points = 20
baseline = "naive"
target = "cublas"
"""

NAIVE = (
    'extern "C" __global__ void matmul(const float* A, const float* B, float* C, '
    "int M, int N, int K) {}\n"
)

# A two-pass lab, as array-sum: the second launch reduces the partial sums.
TWO_PASS_SPEC = """\
[lab]
id = "array-sum"
title = "Array sum"
kernel = "block_sum"

[[params]]
name = "src"
kind = "in"
dtype = "float32"
shape = ["n"]
init = { dist = "uniform", low = 0.0, high = 1.0 }

[[params]]
name = "partial"
kind = "scratch"
dtype = "float32"
shape = ["nblocks"]

[[params]]
name = "total"
kind = "out"
dtype = "float32"
shape = [1]

[[params]]
name = "n"
kind = "scalar"
dtype = "uint32"
value = "n"

[derived]
nblocks = "min(1024, ceil(n / 1024))"

[[launch]]
args = ["src", "partial", "n"]
block = [1024]
grid = ["nblocks"]
shared_bytes = "4 * 1024"

[[launch]]
args = ["partial", "total", "nblocks"]
block = [1024]
grid = [1]
shared_bytes = 4096

[expected]
oracle = "sum"

[tolerance.float32]
atol = "1e-6 * n"
rtol = 1e-5

[[cases]]
name = "n-1"
sizes = { n = 1 }
points = 5

[[cases]]
name = "n-big"
sizes = { n = 8388608 }
points = 5
"""


def write_lab(root: Path, text: str, lab_id: str = "matmul-tiled") -> Path:
    folder = root / lab_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lab.toml").write_text(text, encoding="utf-8")
    (folder / "lab.md").write_text("# The lab\n", encoding="utf-8")
    (folder / "naive.cu").write_text(NAIVE, encoding="utf-8")
    return folder


# A lab that uses the newer features: two kernels, a zeroed scratch array, a uint8 input with
# a normal distribution, a float case parameter, hand-written inputs and a Python oracle.
MULTI_SPEC = """\
[lab]
id = "two-kernels"
title = "Two kernels"
kernels = ["count", "finish"]

[[params]]
name = "data"
kind = "in"
dtype = "uint8"
shape = ["n"]
init = { dist = "normal", mean = 128, std = "spread" }

[[params]]
name = "counts"
kind = "scratch"
dtype = "uint32"
shape = [256]
init = { dist = "zeros" }

[[params]]
name = "out"
kind = "out"
dtype = "float32"
shape = [256]

[[params]]
name = "n"
kind = "scalar"
dtype = "uint64"
value = "n"

[[params]]
name = "alpha"
kind = "scalar"
dtype = "float32"
value = "alpha"

[declare.BLOCK]
names = ["BLOCK_SIZE"]
default = 256
min = 32
max = 1024
power_of_two = true

[[launch]]
kernel = "count"
args = ["data", "counts", "n"]
block = ["BLOCK"]
grid = ["min(1024, ceil(n / BLOCK))"]

[[launch]]
kernel = "finish"
args = ["counts", "out", "alpha"]
block = [256]
grid = [1]

[expected]
oracle = "python"

[tolerance.float32]
atol = 0
rtol = "2 ** -20"

[[cases]]
name = "tiny"
sizes = { n = 5, spread = 1.0, alpha = 0.5 }
points = 1
inputs = { data = [1, 2, 3, 255, 0] }

[[cases]]
name = "big"
sizes = { n = 1000000, spread = 8.0, alpha = -0.25 }
points = 2
"""

ORACLE = """\
import numpy as np


def expected(inputs, sizes, scalars):
    counts = np.bincount(inputs["data"], minlength=256)
    return {"out": counts * scalars["alpha"]}
"""

DEVICE_STUB = (
    'extern "C" __global__ void count(const unsigned char* data, unsigned int* counts, '
    "unsigned long long n) {}\n"
    'extern "C" __global__ void finish(unsigned int* counts, float* out, float alpha) {}\n'
)


def write_multi_lab(root: Path, text: str = MULTI_SPEC, oracle: str = ORACLE) -> Path:
    folder = root / "two-kernels"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lab.toml").write_text(text, encoding="utf-8")
    (folder / "lab.md").write_text("# Two kernels\n", encoding="utf-8")
    (folder / "oracle.py").write_text(oracle, encoding="utf-8")
    return folder
