"""Comparing a compiled model's outputs with a reference's.

Examples
--------
>>> import numpy as np
>>> max_abs_diff(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
0.5
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["max_abs_diff"]


def max_abs_diff(got: Any, want: Any) -> float:
    """The largest ``|got - want|`` of two outputs, in float64 (boolean and integer outputs
    too: a detector's masks, indices); 0 for empty outputs; infinite when the shapes differ
    (a data-dependent output of another length).

    Examples
    --------
    >>> max_abs_diff(np.array([True, False]), np.array([True, True]))
    1.0
    >>> max_abs_diff(np.zeros((0, 4)), np.zeros((0, 4))), max_abs_diff(np.zeros(2), np.zeros(3))
    (0.0, inf)
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return float("inf")
    if not got.size:
        return 0.0
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
