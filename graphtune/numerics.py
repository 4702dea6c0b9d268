"""Comparing a compiled model's outputs with a reference's.

:func:`accuracy` reports how far a model compiled in lower precision (bfloat16 nodes) moves
from ONNX Runtime's float32 outputs on seeded inputs: the numbers a user weighs the speed-up
against, measured, never assumed.

Examples
--------
>>> import numpy as np
>>> max_abs_diff(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
0.5
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["max_abs_diff", "Accuracy", "accuracy"]


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


@dataclass(frozen=True)
class Accuracy:
    """A compiled model's first output against a reference's on seeded inputs.

    Attributes
    ----------
    reference : str
        What computed the reference (``"onnxruntime float32"``).
    inputs : int
        Seeded random inputs compared.
    max_rel_diff : float
        The largest ``|got - want|`` over the largest ``|want|``, over all inputs.
    top1_agree : int or None
        For a classifier's output (``[N, classes]``): the inputs whose top-1 class is the same
        for every row; None for other outputs.
    """

    reference: str
    inputs: int
    max_rel_diff: float
    top1_agree: int | None

    def summary(self) -> str:
        """One line.

        Examples
        --------
        >>> print(Accuracy("onnxruntime float32", 4, 0.0031, 4).summary())  # doctest: +NORMALIZE_WHITESPACE
        outputs vs onnxruntime float32 on 4 seeded inputs: max |diff| 3.1e-03 of max |output|,
        top-1 agrees on 4/4
        """
        top1 = "" if self.top1_agree is None else f", top-1 agrees on {self.top1_agree}/{self.inputs}"
        return (f"outputs vs {self.reference} on {self.inputs} seeded inputs: max |diff| "
                f"{self.max_rel_diff:.1e} of max |output|{top1}")


def accuracy(run: Callable[[list[np.ndarray]], Any], reference: Callable[[list[np.ndarray]], Any],
             inputs: Sequence[list[np.ndarray]], name: str) -> Accuracy:
    """:class:`Accuracy` of ``run`` against ``reference`` (both: input arrays -> output or outputs;
    the first output is compared) on ``inputs``.

    Examples
    --------
    >>> logits = [[np.array([[1.0, 3.0, 2.0]])], [np.array([[0.0, 1.0, 4.0]])]]
    >>> acc = accuracy(lambda a: a[0] * 1.01, lambda a: a[0], logits, "x1")
    >>> acc.inputs, round(acc.max_rel_diff, 4), acc.top1_agree
    (2, 0.01, 2)
    >>> accuracy(lambda a: a[0], lambda a: a[0], [[np.ones((1, 2, 3))]], "same").top1_agree is None
    True
    """
    worst, agree, classifier = 0.0, 0, True
    for arrays in inputs:
        got, want = (np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
                     for out in (run(arrays), reference(arrays)))
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        worst = max(worst, max_abs_diff(got, want) / (scale or 1.0))
        classifier = classifier and want.ndim == 2 and want.size > 0
        agree += bool(got.shape == want.shape and classifier
                      and np.array_equal(np.argmax(got, axis=-1), np.argmax(want, axis=-1)))
    return Accuracy(name, len(inputs), worst, agree if classifier else None)
