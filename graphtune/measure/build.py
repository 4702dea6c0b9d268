"""Build one task into a shared library (runs inside a build worker process).

The kernel or transform itself comes from :mod:`graphtune.x86`
(:func:`prim_func_of`); a runner may be given another function of the same
signature (e.g. to measure a kernel family graphtune.x86 does not define).

Examples
--------
>>> import tempfile, graphtune.x86 as x86
>>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
...                        "dtype": "float32"})
>>> built = build_task(prim_func_of, t, x86.host_target(), tempfile.mkdtemp())
>>> built["args"]
[[[1, 16, 4, 4], 'float32'], [[1, 2, 4, 4, 8], 'float32']]
"""

from __future__ import annotations

import hashlib
import os
from typing import Callable

from ..ops import Op
from .task import Task

__all__ = ["prim_func_of", "build_task", "arg_specs"]


def prim_func_of(task: Task, target) -> "tvm.tirx.PrimFunc":  # noqa: F821
    """The scheduled PrimFunc graphtune.x86 defines for ``task`` on ``target``.

    Kernels come from :func:`graphtune.x86.kernel_func` (whose op must match
    ``task.kind``), transforms from :func:`graphtune.x86.transform_func`, segments
    from their payload (:func:`graphtune.measure.segments.segment_func`).

    Raises
    ------
    graphtune.errors.KnobError
        If the knobs are invalid for the workload (nothing is built).
    graphtune.errors.ModelError
        If the workload's op is not ``task.kind``.

    Examples
    --------
    >>> import graphtune.x86 as x86
    >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
    ...                        "dtype": "float32"})
    >>> len(prim_func_of(t, x86.host_target()).params)
    2
    """
    from .. import x86

    if task.kind == Op.SEGMENT:
        from .segments import segment_func

        return segment_func(task)
    if task.kind == Op.TRANSFORM:
        w = task.workload
        return x86.transform_func(w["shape"], w["src"], w["dst"], w["dtype"], target)
    return x86.kernel_func(task.workload, task.knobs, target, op=task.kind)


def arg_specs(func) -> list:
    """``[[shape, dtype], ...]`` of the parameters of a PrimFunc with static shapes.

    Examples
    --------
    >>> from tvm import te
    >>> a = te.placeholder((2, 3), name="a")
    >>> arg_specs(te.create_prim_func([a, te.compute((2, 3), lambda i, j: a[i, j] * 2)]))
    [[[2, 3], 'float32'], [[2, 3], 'float32']]
    """
    specs = []
    for param in func.params:
        try:
            shape = [int(dim) for dim in param.shape]
        except TypeError:
            raise ValueError(f"parameter {param.name} has a dynamic shape {param.shape}") from None
        specs.append([shape, str(param.dtype)])
    return specs


def build_task(func_of: Callable, task: Task, target, out_dir: str) -> dict:
    """Compile ``func_of(task, target)`` and export it to a library in ``out_dir``.

    Returns
    -------
    dict
        ``{"path": library path, "args": arg_specs}``.

    Examples
    --------
    >>> import os, tempfile, graphtune.x86 as x86
    >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW8c", "dst": "NCHW",
    ...                        "dtype": "float32"})
    >>> os.path.exists(build_task(prim_func_of, t, x86.host_target(), tempfile.mkdtemp())["path"])
    True
    """
    import tvm

    func = func_of(task, target).with_attr("global_symbol", "main")
    specs = arg_specs(func)
    executable = tvm.compile(func, target=target)
    name = hashlib.sha1(task.key.encode()).hexdigest()[:20]
    path = os.path.join(out_dir, f"{name}-{os.getpid()}.so")
    executable.export_library(path)
    return {"path": path, "args": specs}
