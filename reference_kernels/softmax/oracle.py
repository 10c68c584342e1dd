"""The expected softmax, in float64: subtracting each row's maximum first keeps exp finite."""

import numpy as np


def expected(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}
