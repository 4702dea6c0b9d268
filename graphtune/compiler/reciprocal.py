"""Quantize by multiplying with the reciprocal of a constant scale instead of dividing by it.

A QDQ model's ``QuantizeLinear`` reaches Relax as ``round(x / scale)`` (then the zero point,
the clip and the cast to uint8), and after ``FuseOps`` that division sits in the epilogue of
the conv, depthwise conv or pool producing ``x``. A vector division costs several times a
multiplication, and the epilogue of a small conv is a large part of its instructions.
:func:`reciprocal_scales` rewrites every ``divide(x, c)`` whose only readers are ``round``
and whose divisor ``c`` is a one-element float constant into ``multiply(x, 1 / c)``.

The rule it follows: ``x * (1 / c)`` differs from ``x / c`` by at most one fp32 rounding, so
after ``round`` the two differ only where ``x / c`` lies within that of ``k + 0.5``, and then
by one step of the scale -- the difference ONNX Runtime's own requantization makes (it
multiplies by ``x_scale * w_scale / y_scale``). Divisions whose result is used unrounded are
left alone, as are divisors that are tensors (per-channel scales) or not finite and nonzero.

Examples
--------
>>> import numpy as np
>>> from tvm import relax
>>> bb = relax.BlockBuilder()
>>> x = relax.Var("x", relax.TensorType([1, 8], "float32"))
>>> with bb.function("main", [x]):
...     with bb.dataflow():
...         q = bb.emit(relax.op.round(relax.op.divide(x, relax.const(0.25, "float32"))))
...         out = bb.emit_output(relax.op.astype(q, "uint8"))
...     _ = bb.emit_func_output(out)
>>> mod = reciprocal_scales(bb.get())
>>> [op_name(b.value) for b in bindings(mod["main"])]
['relax.multiply', 'relax.round', 'relax.astype']
>>> float(const_value(bindings(mod["main"])[0].value.args[1]))
4.0
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from ..frontend.walk import bindings, const_value, op_name, vars_read
from .rebind import rebind, rewritten_main

__all__ = ["reciprocal_scales"]


def reciprocal_scales(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each rounded division by a scalar constant turned into a multiplication by
    its reciprocal (module docstring); ``mod`` itself when there is none."""
    divisions = _rounded_divisions(mod["main"])
    if not divisions:
        return mod
    return rewritten_main(mod, _Multiply(mod, divisions))


def _rounded_divisions(func: relax.Function) -> dict[relax.Var, np.ndarray]:
    """Each ``divide`` binding read only by ``round`` whose divisor is a finite nonzero
    one-element float constant: its var -> the reciprocal (same dtype)."""
    binds = [b for b in bindings(func) if isinstance(b, relax.VarBinding)]
    found: dict[relax.Var, np.ndarray] = {}
    for binding in binds:
        call = binding.value
        if op_name(call) != "relax.divide":
            continue
        divisor = const_value(call.args[1])
        if divisor is None or divisor.size != 1 or divisor.dtype.kind != "f":
            continue
        value = divisor.reshape(())
        if np.isfinite(value) and value != 0:
            found[binding.var] = (np.ones((), value.dtype) / value).astype(value.dtype)
    for binding in binds:  # drop divisions some reader uses unrounded
        readers = vars_read(binding.value) & found.keys()
        if readers and op_name(binding.value) != "relax.round":
            for var in readers:
                found.pop(var)
    outputs = vars_read(func.body.body)
    return {var: value for var, value in found.items() if var not in outputs}


@relax.expr_functor.mutator
class _Multiply(relax.PyExprMutator):
    """Re-emit ``main`` with the chosen divisions as multiplications."""

    def __init__(self, mod: tvm.IRModule, divisions: dict[relax.Var, np.ndarray]) -> None:
        super().__init__(mod)
        self.divisions = divisions

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        reciprocal = self.divisions.get(binding.var)
        if reciprocal is None:
            super().visit_var_binding_(binding)
            return
        rebind(self, binding.var,
               relax.op.multiply(self.visit_expr(binding.value.args[0]), relax.const(reciprocal)))
