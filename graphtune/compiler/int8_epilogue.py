"""Fold the quantized model's bias and requantization scale into the int8 kernels' own constants.

An int8 node's kernel writes ``float32(acc + B) * S`` (:mod:`graphtune.compiler.int8`: ``B`` the
int32 zero-point correction, ``S = sx * sw`` per output channel), and what the QDQ model does
next stays in Relax: the conv's fp32 bias ``add(k, C)`` and, where the output is quantized, the
multiplication by the output scale's reciprocal that ``round`` reads
(:mod:`graphtune.compiler.reciprocal`). Both fuse into the kernel's epilogue as one vector
instruction per 16 outputs each, and in an AMX conv the epilogue is most of the instructions.
:func:`fold_into_kernels` folds them into the call's arguments instead:

- ``add(k, C)`` where ``C`` holds one value per output channel that is an integer multiple of
  ``S`` (a QDQ model's bias is ``DequantizeLinear(int32 b_q, sx * sw)``): ``B + b_q``, exact in
  int32 (checked);
- then ``multiply(., r)`` by a positive scalar constant that only ``round`` reads: ``S * r``.

The call keeps its PrimFunc (the constants are its arguments) and its packed kernel (the
node's anchor). The values differ from the unfolded epilogue's by fp32 roundings only -- one
rounding of ``S * r`` in place of one of the product and one of the sum -- so a quantized
output moves by one step only where it lies within that of ``k + 0.5``: the requantization
ONNX Runtime's own int8 kernels compute (``(acc + b_q) * (sx * sw / sy)``). Calls whose output
anything else reads are left alone.

Examples
--------
>>> import numpy as np
>>> from tvm import relax, te, tirx
>>> bb = relax.BlockBuilder()
>>> x = relax.Var("x", relax.TensorType([1, 4], "float32"))
>>> def kernel(d, b, s):
...     return te.compute((1, 4), lambda i, j: (d[i, j].astype("int32") + b[0, j]).astype("float32")
...                       * s[0, j])
>>> with bb.function("main", [x]):
...     with bb.dataflow():
...         q = bb.emit(relax.op.astype(x, "uint8"))
...         k = bb.emit(bb.call_te(kernel, q, relax.const(np.zeros((1, 4), "int32")),
...                                relax.const(np.full((1, 4), 0.5, "float32")),
...                                primfunc_attrs={"graphtune.node": "k"}))
...         a = bb.emit(relax.op.add(k, relax.const(np.float32([[1.0, 2.0, 0.5, 0.0]]))))
...         m = bb.emit(relax.op.multiply(a, relax.const(4.0, "float32")))
...         out = bb.emit_output(relax.op.round(m))
...     _ = bb.emit_func_output(out)
>>> main = fold_into_kernels(bb.get())["main"]
>>> [op_name(b.value) for b in bindings(main)]
['relax.astype', 'relax.call_tir', 'relax.round']
>>> call = bindings(main)[1].value
>>> const_value(call.args[1].fields[1]).tolist(), const_value(call.args[1].fields[2]).tolist()
([[2, 4, 1, 0]], [[2.0, 2.0, 2.0, 2.0]])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

from ..frontend.walk import bindings, const_value, op_name, static_shape, vars_read
from .plan import NODE_ATTR
from .rebind import rebind, rewritten_main

__all__ = ["fold_into_kernels"]

_INT32 = 2**31


@dataclass(frozen=True)
class _Fold:
    """One kernel call's fold: its binding, the bindings it replaces, and the new constants."""

    call: relax.VarBinding
    dropped: tuple[relax.Var, ...]
    last: relax.Var
    bias: np.ndarray
    scale: np.ndarray


def fold_into_kernels(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each int8 kernel call's bias add and requantizing multiplication folded into
    its constants (module docstring); ``mod`` itself when there is none."""
    folds = _folds(mod)
    if not folds:
        return mod
    return rewritten_main(mod, _Refold(mod, folds))


def _kernel_params(mod: tvm.IRModule, call: relax.Expr) -> tuple[np.ndarray, np.ndarray] | None:
    """``(B, S)`` of a call of an int8 kernel: ``call_tir`` of a PrimFunc tagged with its node
    whose last two inputs are an int32 and a float32 constant of one shape."""
    if op_name(call) != "relax.call_tir" or not isinstance(call.args[1], relax.Tuple):
        return None
    func = mod[call.args[0]]
    inputs = list(call.args[1].fields)
    if not isinstance(func, tvm.tirx.PrimFunc) or NODE_ATTR not in (func.attrs or {}) or len(inputs) < 3:
        return None
    bias, scale = const_value(inputs[-2]), const_value(inputs[-1])
    if bias is None or scale is None or bias.dtype != np.int32 or scale.dtype != np.float32 \
            or bias.shape != scale.shape:
        return None
    return bias, scale


def _per_channel(value: np.ndarray, out_shape: tuple, params: tuple) -> np.ndarray | None:
    """``value`` (a constant added to a kernel's output of ``out_shape``) as one number per output
    channel in the kernel's ``[O/block, block]`` order, or None if it varies along any other axis
    (a conv's blocked ``[N, O/b, H, W, b]``: axes 1 and 4; a dense's ``[1, M]``: axis 1)."""
    channels = (1, 4) if len(out_shape) == 5 else (len(out_shape) - 1,)
    if value.ndim != len(out_shape) or value.size != int(np.prod(params)):
        return None
    if any(value.shape[axis] != 1 for axis in range(value.ndim) if axis not in channels):
        return None
    return value.reshape(params)


def _folded_bias(bias: np.ndarray, scale: np.ndarray, added: np.ndarray) -> np.ndarray | None:
    """``bias + added / scale`` as int32 if ``added`` (per channel) is an integer multiple of
    ``scale`` and the sum fits, else None."""
    steps = added.astype(np.float64) / scale.astype(np.float64)
    integers = np.rint(steps)
    folded = bias.astype(np.int64) + integers.astype(np.int64)
    if np.abs(steps - integers).max(initial=0) > 1e-3 or np.abs(folded).max(initial=0) >= _INT32:
        return None
    return folded.astype(np.int32)


def _positive_scalar(expr: relax.Expr) -> np.float32 | None:
    """The value of a one-element float32 constant if it is finite and positive, else None."""
    value = const_value(expr)
    if value is None or value.size != 1 or value.dtype != np.float32:
        return None
    factor = np.float32(value.reshape(()))
    return factor if np.isfinite(factor) and factor > 0 else None


def _folds(mod: tvm.IRModule) -> list[_Fold]:
    """Every foldable chain of ``main`` (module docstring)."""
    func = mod["main"]
    binds = [b for b in bindings(func) if isinstance(b, relax.VarBinding)]
    readers: dict[relax.Var, list[relax.VarBinding]] = {}
    for binding in binds:
        for var in vars_read(binding.value):
            readers.setdefault(var, []).append(binding)
    outputs = vars_read(func.body.body)

    def only_reader(var: relax.Var, op: str) -> relax.VarBinding | None:
        found = readers.get(var, [])
        if var in outputs or len(found) != 1 or op_name(found[0].value) != op:
            return None
        return found[0]

    folds = []
    for binding in binds:
        params = _kernel_params(mod, binding.value)
        add = only_reader(binding.var, "relax.add") if params is not None else None
        shape = static_shape(binding.var)
        if params is None or add is None or not shape:
            continue
        bias, scale = params
        other = [arg for arg in add.value.args if not arg.same_as(binding.var)]
        value = const_value(other[0]) if len(other) == 1 else None
        added = _per_channel(value, tuple(shape), bias.shape) if value is not None else None
        folded = _folded_bias(bias, scale, added) if added is not None else None
        if folded is None:
            continue
        multiply = only_reader(add.var, "relax.multiply")
        rounded = multiply is not None and multiply.var not in outputs and all(
            op_name(reader.value) == "relax.round" for reader in readers.get(multiply.var, []))
        factor = _positive_scalar(multiply.value.args[1]) if multiply is not None and rounded else None
        if multiply is None or factor is None:
            folds.append(_Fold(binding, (binding.var,), add.var, folded, scale))
        else:
            folds.append(_Fold(binding, (binding.var, add.var), multiply.var, folded,
                               (scale * factor).astype(np.float32)))
    return folds


@relax.expr_functor.mutator
class _Refold(relax.PyExprMutator):
    """Re-emit ``main`` with each folded chain as one kernel call with new constants."""

    def __init__(self, mod: tvm.IRModule, folds: list[_Fold]) -> None:
        super().__init__(mod)
        self.dropped = {var for fold in folds for var in fold.dropped}
        self.last = {fold.last: fold for fold in folds}

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        if binding.var in self.dropped:
            return
        fold = self.last.get(binding.var)
        if fold is None:
            super().visit_var_binding_(binding)
            return
        call = fold.call.value
        inputs = [self.visit_expr(arg) for arg in call.args[1].fields[:-2]]
        new = relax.call_tir(call.args[0], relax.Tuple(inputs + [relax.const(fold.bias),
                                                                 relax.const(fold.scale)]),
                             out_ty=fold.call.var.ty)
        rebind(self, binding.var, new, fold.call.var.name)  # the node's call keeps its name

