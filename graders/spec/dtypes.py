"""The dtypes a lab's arrays and scalars may have: C type, size, range, and host representation.

NumPy has no bfloat16, so on the host a bfloat16 array is held as uint16 bits (the upper half
of a float32, rounded to nearest even): `HOST_DTYPES` names the NumPy dtype that holds each
dtype's data. A Python oracle sees bfloat16 inputs as float32 values (exact, since every
bfloat16 is a float32), never as bits.
"""

from __future__ import annotations

# dtype name -> C type, for arrays and for scalars. float16 and bfloat16 are the types of
# cuda_fp16.h and cuda_bf16.h; a kernel may also take them as `unsigned short*` (same size).
ARRAY_DTYPES: dict[str, str] = {
    "float32": "float",
    "float64": "double",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint8": "unsigned char",
}
# int64 and uint64 are 8 bytes on the device, as are `long`, `size_t` and `ptrdiff_t`.
SCALAR_DTYPES: dict[str, str] = {
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
    "float32": "float",
    "float64": "double",
}
DTYPE_BYTES: dict[str, int] = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
}
FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
INTEGER_DTYPES = frozenset({"uint8", "int32", "uint32", "int64", "uint64"})
# What an integer can hold; a value outside it would wrap when cast.
INT_RANGES: dict[str, tuple[int, int]] = {
    "uint8": (0, 2**8 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}
# The largest finite value of each float dtype; a generated value beyond it is an infinity.
FLOAT_MAX: dict[str, float] = {
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
    "float32": 3.4028234663852886e38,
    "float64": 1.7976931348623157e308,
}
# The NumPy dtype (by name) that holds each dtype's data on the host.
HOST_DTYPES: dict[str, str] = {name: name for name in DTYPE_BYTES} | {"bfloat16": "uint16"}
