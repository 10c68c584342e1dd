"""The expected inclusive prefix sum (the inputs are small, so int32 never overflows)."""

import numpy as np


def expected(inputs, sizes, scalars):
    return {"out": np.cumsum(inputs["in"], dtype=np.int64)}
