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
from typing import TYPE_CHECKING, Callable

from ..errors import MeasureError, ModelError
from ..ops import INT8_OPS, Op
from .task import Task

if TYPE_CHECKING:
    import tvm

__all__ = ["prim_func_of", "payload_func", "register_builder", "build_task", "arg_specs"]


def _transform_func(task: Task, target) -> "tvm.tirx.PrimFunc":
    from .. import x86

    w = task.workload
    return x86.transform_func(w["shape"], w["src"], w["dst"], w["dtype"], target)


def payload_func(task: Task, target=None) -> "tvm.tirx.PrimFunc":
    """The PrimFunc a task carries as TVM JSON in its payload (an op group's scheduled function).

    Raises
    ------
    MeasureError
        If the task has no payload (a task rebuilt from a record: op-group
        tasks are made by :mod:`graphtune.opgroups` from a compiled model).

    Examples
    --------
    >>> import tvm
    >>> from tvm import te
    >>> x = te.placeholder((4,), name="x")
    >>> f = te.create_prim_func([x, te.compute((4,), lambda i: x[i] + 1.0)])
    >>> t = Task(Op.OP_GROUP, {"ops": "add", "args": [], "sha": "0"}, payload=tvm.ir.save_json(f))
    >>> len(payload_func(t).params)
    2
    """
    import tvm

    if not task.payload:
        raise MeasureError(f"{task.kind} task {task.workload.get('ops', '')} "
                           f"(sha {task.workload.get('sha', '?')}) carries no PrimFunc; op-group "
                           "tasks are made from a compiled model by graphtune.tune")
    return tvm.ir.load_json(task.payload)


def _int8_func(task: Task, target) -> "tvm.tirx.PrimFunc":
    """An int8 candidate: its accumulation and requantization (zero points 0, no ReLU: the
    constants of the epilogue do not change its time), :func:`graphtune.x86.conv2d_int8_func`."""
    from .. import x86

    return x86.conv2d_int8_func(task.workload, task.knobs, target)


_BUILDERS: dict[str, Callable] = {Op.TRANSFORM: _transform_func, Op.OP_GROUP: payload_func,
                                  **dict.fromkeys(INT8_OPS, _int8_func)}


def register_builder(kind: str, func_of: Callable) -> None:
    """Make :func:`prim_func_of` build tasks of ``kind`` with ``func_of(task, target)``.

    Kinds without a registered builder are kernels of :mod:`graphtune.x86`.
    A builder must be a module-level function (build workers receive it by name).

    Examples
    --------
    >>> register_builder("transform", _transform_func)
    """
    _BUILDERS[kind] = func_of


def prim_func_of(task: Task, target) -> "tvm.tirx.PrimFunc":
    """The scheduled PrimFunc of ``task`` on ``target``.

    Transforms come from :func:`graphtune.x86.transform_func`, op groups from
    their payload (:func:`payload_func`), int8 ops from :func:`graphtune.x86.conv2d_int8_func`
    (with their epilogue's bias and scale parameters), other registered kinds from their
    builder (:func:`register_builder`), and every other kind is a kernel of
    :func:`graphtune.x86.kernel_func` (whose op must match ``task.kind``).

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
    builder = _BUILDERS.get(task.kind)
    if builder is not None:
        return builder(task, target)
    from .. import x86

    return x86.kernel_func(task.workload, task.knobs, target, op=task.kind)


def arg_specs(func) -> list:
    """``[[shape, dtype], ...]`` of the parameters of a PrimFunc with static shapes.

    Raises
    ------
    ModelError
        A parameter has a symbolic (data-dependent) shape: such a function cannot be
        timed alone (op-group pricing leaves them out, :mod:`graphtune.opgroups.pricing`).

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
            raise ModelError(f"PrimFunc parameter {param.name} has a data-dependent shape "
                             f"{tuple(str(d) for d in param.shape)}: graphtune builds and times "
                             "only functions of static shapes") from None
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

    from ..x86.lowering import PIPELINE

    func = func_of(task, target).with_attr("global_symbol", "main")
    specs = arg_specs(func)
    executable = tvm.compile(func, target=target, tir_pipeline=PIPELINE)
    name = hashlib.sha1(task.key.encode()).hexdigest()[:20]
    path = os.path.join(out_dir, f"{name}-{os.getpid()}.so")
    executable.export_library(path)
    return {"path": path, "args": specs}
