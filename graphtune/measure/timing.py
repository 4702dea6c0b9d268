"""Time a built kernel: random inputs, warm-up, calls per repeat chosen from a probe, repeats.

:func:`time_module` works on any TVM module and device (local or an RPC
session's); :func:`time_library` is what the local timing worker runs.

Examples
--------
>>> import tempfile, graphtune.x86 as x86
>>> from graphtune.measure import Task
>>> from graphtune.measure.build import build_task, prim_func_of
>>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
...                        "dtype": "float32"})
>>> built = build_task(prim_func_of, t, x86.host_target(), tempfile.mkdtemp())
>>> out = time_library(built["path"], built["args"], repeat=3, min_repeat_ms=5)
>>> len(out["ms"]), all(m > 0 for m in out["ms"]), out["number"] >= 1
(3, True, True)
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["random_array", "time_module", "time_library"]

_FLUSH = "cache_flush_cpu_non_first_arg"
"""TVM runtime function flushing the CPU caches of every argument but the first."""

_INPUTS: dict = {}  # (position, shape, dtype) -> device tensor, reused by later kernels
_MAX_CACHED = 16


def random_array(shape: Sequence[int], dtype: str, seed: int = 0) -> np.ndarray:
    """Random values of ``shape`` and ``dtype`` (uniform in [-1, 1) for floats), never empty.

    Examples
    --------
    >>> a = random_array([2, 3], "float32")
    >>> a.shape, a.dtype.name, bool((a != 0).any())
    ((2, 3), 'float32', True)
    """
    rng = np.random.default_rng(seed)
    if np.issubdtype(np.dtype(dtype), np.floating):
        return rng.uniform(-1.0, 1.0, size=tuple(shape)).astype(dtype)
    return rng.integers(-4, 5, size=tuple(shape)).astype(dtype)


def time_module(module, dev, args: Sequence, repeat: int, min_repeat_ms: float) -> dict:
    """Time ``module["main"](*args)`` on ``dev`` the :data:`~graphtune.measure.task.TIMING` way.

    Two probe calls estimate the run time, then ``repeat`` repeats of
    ``number`` calls each, ``number`` chosen so that a repeat lasts at least
    ``min_repeat_ms``. Before every timed call the caches are flushed of every
    argument but the first (the data input stays hot, as its producer just
    wrote it), so weights come from memory as inside a model.

    Returns
    -------
    dict
        ``{"ms": [mean ms per call of each repeat], "number": calls per repeat}``.

    Examples
    --------
    >>> import numpy as np, tvm
    >>> from tvm import te
    >>> x = te.placeholder((64,), name="x")
    >>> f = te.create_prim_func([x, te.compute((64,), lambda i: x[i] + 1.0)])
    >>> mod = tvm.compile(f.with_attr("global_symbol", "main"), target={"kind": "llvm"}).jit()
    >>> dev = tvm.cpu(0)
    >>> args = [tvm.runtime.tensor(random_array([64], "float32"), dev) for _ in range(2)]
    >>> out = time_module(mod, dev, args, repeat=3, min_repeat_ms=1)
    >>> len(out["ms"]), out["number"] >= 1
    (3, True)
    """
    probe = module.time_evaluator("main", dev, number=1, repeat=2, f_preproc=_FLUSH)
    seconds = max(min(probe(*args).results), 1e-7)
    number = max(1, math.ceil(min_repeat_ms / 1000.0 / seconds))
    # f_preproc runs once per repeat: one call per TVM repeat, grouped into ours.
    timer = module.time_evaluator("main", dev, number=1, repeat=number * repeat,
                                  f_preproc=_FLUSH)
    calls = [t * 1000.0 for t in timer(*args).results]
    return {"ms": [sum(calls[i:i + number]) / number for i in range(0, len(calls), number)],
            "number": number}


def time_library(path: str, specs: Sequence, repeat: int, min_repeat_ms: float) -> dict:
    """Load the library at ``path`` and time it on the local CPU with random arguments.

    Parameters
    ----------
    path : str
        Library exported by :func:`graphtune.measure.build.build_task`.
    specs : list of [shape, dtype]
        The kernel's parameters (inputs, then outputs).
    repeat, min_repeat_ms
        See :func:`time_module`.

    Returns
    -------
    dict
        :func:`time_module`'s result plus ``"threads"`` (runtime threads used).

    Examples
    --------
    See the module docstring (a library built by ``build_task``, then timed).
    """
    import tvm

    module = tvm.runtime.load_module(path)
    dev = tvm.cpu(0)
    args = []
    for position, (shape, dtype) in enumerate(specs):
        key = (position, tuple(shape), dtype)  # never the same tensor twice in one call
        if key not in _INPUTS:
            if len(_INPUTS) >= _MAX_CACHED:
                _INPUTS.clear()
            _INPUTS[key] = tvm.runtime.tensor(random_array(shape, dtype, seed=position), dev)
        args.append(_INPUTS[key])
    result = time_module(module, dev, args, repeat, min_repeat_ms)
    result["threads"] = int(tvm.runtime.num_threads())
    return result
