"""How graphtune builds TIR: TVM's ``s_tir`` pipeline, then small buffers put on the stack and
lane gathers turned into shuffles (:mod:`graphtune.x86.shuffles`).

TVM lowers every buffer a PrimFunc allocates to a ``TVMBackendAllocWorkspace`` /
``TVMBackendFreeWorkspace`` pair unless it is in ``global`` scope and under 1 KB. A register
tile's accumulators are such a buffer (scope ``local``, e.g. 28 pixels x 16 lanes of float32,
1.8 KB), allocated inside the parallel loop: each tile paid two calls into the runtime and a
``memset``, and LLVM could not keep the tile in registers across its write-back, because the
buffer's address came from an opaque call. :func:`stack_buffers` marks every buffer of constant
size up to :data:`STACK_LIMIT` bytes ``disable_lower_builtin``, so LLVM gets an ``alloca`` (at
the function's entry, whatever loop the buffer sits in) and promotes it to registers
(``docs/candidates.md``, "Buffers on the stack", has the measurements).

:data:`PIPELINE` names the pipeline for ``tvm.compile(..., tir_pipeline=PIPELINE)``; it is
registered when this module is imported, and every graphtune build (a compiled model's
functions, a measured candidate) uses it, so a kernel is timed as the model runs it.

Examples
--------
>>> import tvm
>>> from tvm import te
>>> x = te.placeholder((64,), "float32")
>>> y = te.compute((64,), lambda i: x[i] * 2.0, name="y")
>>> sch = tvm.s_tir.Schedule(te.create_prim_func([x, y]))
>>> _ = sch.cache_write(sch.get_sblock("y"), 0, "local")  # a 256-byte local buffer
>>> lib = tvm.compile(sch.mod, target="llvm", tir_pipeline=PIPELINE)
>>> "TVMBackendAllocWorkspace" in lib.mod.inspect_source("ll")
False
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.s_tir.pipeline import default_s_tir_pipeline

from .shuffles import lane_shuffles
from .statements import with_children

__all__ = ["PIPELINE", "STACK_LIMIT", "stack_buffers"]

PIPELINE = "graphtune-stack-buffers-lane-shuffles"
"""The name of graphtune's TIR pipeline (``tvm.compile``'s ``tir_pipeline``): part of every record
key (:func:`graphtune.measure.task.tvm_version`), so it names what the pipeline adds to TVM's, and a
change to that renames it."""

STACK_LIMIT = 16384
"""Largest buffer, in bytes, :func:`stack_buffers` puts on the stack (register tiles are a few KB;
a thread's stack is megabytes)."""

_ON_STACK = "disable_lower_builtin"  # TVM's annotation: LowerTVMBuiltin leaves the allocation alone


def _constant_bytes(buffer: tirx.Buffer) -> int | None:
    """The bytes ``buffer`` holds, or None when its shape is not constant."""
    count = 1
    for extent in buffer.shape:
        if not isinstance(extent, tirx.IntImm):
            return None
        count *= int(extent)
    dtype = tvm.runtime.DataType(buffer.dtype)
    return count * dtype.lanes * dtype.bits // 8


def _on_stack(stmt: tirx.Stmt) -> tirx.Stmt:
    """``stmt`` with every small constant-size allocation in it marked for the stack."""
    if isinstance(stmt, tirx.AllocBuffer):
        size = _constant_bytes(stmt.buffer)
        if size is None or size > STACK_LIMIT or _ON_STACK in stmt.annotations:
            return stmt
        return tirx.AllocBuffer(stmt.buffer, {**stmt.annotations, _ON_STACK: tirx.IntImm("int32", 1)})
    return with_children(stmt, _on_stack)


@tirx.transform.prim_func_pass(opt_level=0, name="graphtune.StackBuffers")
def stack_buffers(func: tirx.PrimFunc, mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tirx.PrimFunc:
    """Mark every buffer of constant size up to :data:`STACK_LIMIT` bytes that ``func`` allocates
    for the stack (TVM's ``disable_lower_builtin``: no workspace calls)."""
    body = _on_stack(func.body)
    return func if body.same_as(func.body) else func.with_body(body)


def _pipeline() -> tuple:
    lower, finalize_host, finalize_device = default_s_tir_pipeline()
    return tvm.transform.Sequential([lower, stack_buffers, lane_shuffles]), finalize_host, finalize_device


tirx.register_tir_pipeline(PIPELINE, _pipeline)
