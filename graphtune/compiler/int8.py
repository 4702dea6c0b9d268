"""Emit a quantized conv or dense of a rewritten module as graphtune's int8 kernel.

A QDQ model's quantized conv (or Gemm / MatMul head) reaches Relax as an fp32 ``conv2d``
(``matmul``) of the dequantized activation ``(x_q - zx) * sx`` and weights ``w_q * sw``
(:mod:`graphtune.frontend.qdq`), its quantization recorded beside it
(:func:`graphtune.frontend.qdq.int8_nodes`, the node's ``NodePlan.quant``). Both integers come
back exactly by rounding (``|w_q| <= 128`` and ``|x_q - zx| <= 255`` are far inside fp32's exact
range), so the node runs as:

1. ``int8_quantize``: the fp32 input, in the node's input layout, to uint8 ``x_q``
   (:func:`graphtune.x86.quantize`);
2. the int8 kernel with its dequantizing epilogue, one ``call_tir`` tagged with the node
   (:data:`~graphtune.compiler.rewrite.NODE_ATTR`, :func:`graphtune.x86.int8_compute`):
   ``float32(acc + bias') * sx * sw[o]``, where ``acc`` is the exact int32 sum and
   ``bias' = -zx * sum(w_q)`` (:func:`graphtune.x86.pack_int8_params`).

What follows the node in the model (its fp32 bias add, ReLU, the fake quantization of the
output) stays as it is and fuses into the kernel's epilogue: the node's output is float32
(``out_dtype`` of its workload).

Examples
--------
>>> import numpy as np
>>> from tvm import relax
>>> from graphtune.compiler.plan import NodePlan
>>> from graphtune.ops import conv2d_int8_workload
>>> wl = conv2d_int8_workload([1, 8, 4, 4], [8, 8, 1, 1], out_dtype="float32")
>>> knobs = {"ic_bn": 8, "oc_bn": 8, "reg_n": 4, "unroll_kw": False, "isa": "avx2"}
>>> plan = NodePlan("c", "conv2d_int8", wl, knobs, "NCHW8c", "NCHW8c",
...                 {"x_scale": 0.1, "x_zero_point": 3, "w_scale": [0.5]})
>>> bb = relax.BlockBuilder()
>>> x = relax.Var("x", relax.TensorType([1, 1, 4, 4, 8], "float32"))
>>> with bb.function("main", [x]):
...     out, kernel = emit_int8(bb, x, np.ones((8, 8, 1, 1), "float32"), plan)
...     _ = bb.emit_func_output(out)
>>> kernel.value.numpy().dtype, sorted(gv.name_hint for gv in bb.get().get_global_vars())
(dtype('int16'), ['gt_c', 'int8_quantize', 'main'])
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from tvm import relax
from tvm.ir.expr import Constant

from .. import x86
from ..errors import ModelError
from ..frontend.qdq import weight_pair_max
from ..frontend.walk import dtype_of, op_name
from .plan import NODE_ATTR, NodePlan

__all__ = ["emit_int8", "int8_weight", "check_pairs", "dequantized", "stored_uint8"]


def int8_weight(weight: np.ndarray, plan: NodePlan) -> tuple[np.ndarray, np.ndarray]:
    """``(w_q, w_scale)``: the int8 weights behind the node's fp32 ones (``OIHW``, a dense's
    ``[M, K]``) and one scale per output channel (channels
    :func:`graphtune.frontend.pad.pad_output_channels` added, zero weights, get scale 1).

    Raises
    ------
    ModelError
        If the fp32 weights are not ``w_q * w_scale`` (names the ONNX node).

    Examples
    --------
    >>> from graphtune.compiler.plan import NodePlan
    >>> plan = NodePlan("c", "conv2d_int8", {}, {}, "", "", {"w_scale": [0.5, 0.25]})
    >>> w_q, scale = int8_weight(np.array([1.0, -0.5, 0.0]).reshape(3, 1, 1, 1), plan)
    >>> w_q.ravel().tolist(), scale.tolist()
    ([2, -2, 0], [0.5, 0.25, 1.0])
    """
    assert plan.quant is not None  # int8 nodes carry their quantization
    scale = np.asarray(plan.quant["w_scale"], np.float32)
    channels = weight.shape[0]
    if scale.size == 1:
        scale = np.full(channels, scale[0], np.float32)
    scale = np.concatenate([scale, np.ones(channels - scale.size, np.float32)])
    steps = weight.astype(np.float32) / scale.reshape([-1] + [1] * (weight.ndim - 1))
    w_q = np.rint(steps)
    if np.abs(steps - w_q).max(initial=0) > 1e-3 or np.abs(w_q).max(initial=0) > 128:
        raise ModelError(f"ONNX node {plan.name!r}: its weights are not int8 multiples of their "
                         "DequantizeLinear scales; re-quantize the model (graphtune.quantize)")
    return np.clip(w_q, -128, 127).astype(np.int8), scale


def check_pairs(w_q: np.ndarray, plan: NodePlan) -> None:
    """Refuse a ``vpmaddubsw`` ``isa`` (:attr:`graphtune.x86.int8_isa.Isa.pair_limit`) on weights ``w_q``
    (``OIHW``, a dense's ``[M, K]``) with an input-channel pair ``|w0| + |w1|`` above its limit
    (:func:`~graphtune.frontend.qdq.weight_pair_max`, recomputed here: the int16 pair sums
    would saturate, a wrong output).

    Raises
    ------
    ModelError
        Naming the node, the bound and the fix.

    Examples
    --------
    >>> from graphtune.compiler.plan import NodePlan
    >>> plan = NodePlan("c", "conv2d_int8", {}, {"isa": "avx2ubs"}, "", "", {})
    >>> check_pairs(np.full((4, 4, 1, 1), 64, np.int8), plan)
    >>> check_pairs(np.full((4, 4, 1, 1), 65, np.int8), plan)
    Traceback (most recent call last):
    ...
    graphtune.errors.ModelError: ONNX node 'c': isa 'avx2ubs' (vpmaddubsw) needs |w0| + |w1| <= 128 for \
every input-channel pair of its int8 weights, these reach 130 (its int16 sums would saturate); quantize \
the model with reduce_range=True (graphtune.quantize) or give the node another isa
    """
    isa = x86.ISAS.get(plan.knobs.get("isa", ""))
    if isa is None or isa.pair_limit is None:
        return
    limit, found = isa.pair_limit, weight_pair_max(w_q)
    if found > limit:
        raise ModelError(f"ONNX node {plan.name!r}: isa {isa.name!r} (vpmaddubsw) needs |w0| + |w1| <= "
                         f"{limit} for every input-channel pair of its int8 weights, these reach {found} "
                         "(its int16 sums would saturate); quantize the model with reduce_range=True "
                         "(graphtune.quantize) or give the node another isa")


def dequantized(data: relax.Expr, bound: Callable[[relax.Expr], relax.Expr | None],
                value_of: Callable[[relax.Expr], np.ndarray | None],
                ) -> tuple[relax.Expr, float, float] | None:
    """``(x_q, scale, zero_point)`` when ``data`` is the storage form's dequantization of a uint8
    tensor ``x_q``: ``(astype(x_q, "float32") - zero_point) * scale`` (the subtraction absent for
    a zero point 0; :mod:`graphtune.frontend.qdq`'s rule 4), scalar constants; else None.

    ``bound(var)`` is the expression a variable was bound to (None if none), ``value_of(expr)``
    the value of a constant expression (None if not constant).

    Examples
    --------
    >>> from tvm import relax
    >>> q = relax.Var("q", relax.TensorType([1, 8, 4, 4], "uint8"))
    >>> f, x = relax.Var("f", relax.TensorType([1, 8, 4, 4], "float32")), relax.Var("x")
    >>> exprs = {f: relax.op.astype(q, "float32"), x: relax.op.multiply(f, relax.const(0.5))}
    >>> constant = lambda e: e.value.numpy() if isinstance(e, Constant) else None
    >>> found = dequantized(x, exprs.get, constant)
    >>> found[0].same_as(q), found[1:]
    (True, (0.5, 0.0))
    >>> dequantized(f, exprs.get, constant) is None
    True
    """
    def operands(expr: relax.Expr, op: str) -> tuple[relax.Expr, np.ndarray] | None:
        call = bound(expr)
        if not isinstance(call, relax.Call) or op_name(call) != op or len(call.args) != 2:
            return None
        value = value_of(call.args[1])
        return None if value is None or value.size != 1 else (call.args[0], value.reshape(()))

    scaled = operands(data, "relax.multiply")
    if scaled is None or scaled[1].dtype != np.float32:
        return None
    shifted, zero = scaled[0], 0.0
    centered = operands(shifted, "relax.subtract")
    if centered is not None:
        shifted, zero = centered[0], float(centered[1])
    cast = bound(shifted)
    if not isinstance(cast, relax.Call) or op_name(cast) != "relax.astype" \
            or dtype_of(cast.args[0]) != "uint8":
        return None
    return cast.args[0], float(scaled[1]), zero


def stored_uint8(data: relax.Expr, plan: NodePlan,
                 bound: Callable[[relax.Expr], relax.Expr | None],
                 value_of: Callable[[relax.Expr], np.ndarray | None]) -> relax.Expr | None:
    """The uint8 tensor ``x_q`` the node's fp32 input ``data`` dequantizes (:func:`dequantized`),
    if the model stores it with the node's own ``sx`` and ``zx``. The node then reads ``x_q``
    itself, exactly what ``int8_quantize`` would recover, and no fp32 tensor needs to exist.

    Examples
    --------
    >>> from tvm import relax
    >>> from graphtune.compiler.plan import NodePlan
    >>> q = relax.Var("q", relax.TensorType([1, 8, 4, 4], "uint8"))
    >>> f, x = relax.Var("f", relax.TensorType([1, 8, 4, 4], "float32")), relax.Var("x")
    >>> exprs = {f: relax.op.astype(q, "float32"), x: relax.op.multiply(f, relax.const(0.5))}
    >>> plan = NodePlan("c", "conv2d_int8", {}, {}, "", "", {"x_scale": 0.5, "x_zero_point": 0})
    >>> constant = lambda e: e.value.numpy() if isinstance(e, Constant) else None
    >>> stored_uint8(x, plan, exprs.get, constant).same_as(q)
    True
    >>> stored_uint8(x, NodePlan("c", "conv2d_int8", {}, {}, "", "", {"x_scale": 0.25, "x_zero_point": 0}),
    ...              exprs.get, constant) is None
    True
    """
    assert plan.quant is not None  # int8 nodes carry their quantization
    found = dequantized(data, bound, value_of)
    if found is None:
        return None
    stored, scale, zero = found
    same = np.float32(scale) == np.float32(plan.quant["x_scale"]) and zero == int(plan.quant["x_zero_point"])
    return stored if same else None


def emit_int8(bb: relax.BlockBuilder, data: relax.Expr, weight: np.ndarray,
              plan: NodePlan) -> tuple[relax.Expr, Constant]:
    """The node's quantize and int8 kernel calls (see the module docstring).

    Parameters
    ----------
    bb : relax.BlockBuilder
        Inside the function being rewritten.
    data : relax.Expr
        The node's input in its input layout: fp32 (quantized here, ``int8_quantize``), or
        the uint8 ``x_q`` itself where the model stores it (the rewrite finds it,
        :func:`stored_uint8`).
    weight : np.ndarray
        The node's fp32 weights (dequantized): a conv's ``OIHW``, a dense's ``[M, K]``.
    plan : NodePlan
        A plan of an int8 op (:data:`graphtune.ops.INT8_OPS`) with its ``quant``.

    Returns
    -------
    relax.Expr
        The kernel's call (float32, the node's output layout), not yet emitted.
    Constant
        The packed kernel, the node's anchor.
    """
    assert plan.quant is not None  # int8 nodes carry their quantization
    w_q, w_scale = int8_weight(weight, plan)
    check_pairs(w_q, plan)
    op, knobs, workload = plan.op, plan.knobs, plan.workload
    x_scale, x_zero = float(plan.quant["x_scale"]), int(plan.quant["x_zero_point"])
    kernel = relax.const(x86.pack_weight(w_q, workload, knobs, op))
    block = x86.param_shape(workload, knobs, op)[1]
    bias, scale = x86.pack_int8_params(w_q, None, x_zero, x_scale, w_scale, None, block)
    quantized = data if dtype_of(data) == "uint8" else bb.emit(
        bb.call_te(x86.quantize, data, x_scale, x_zero, primfunc_name_hint="int8_quantize"),
        name_hint=f"{plan.name}_input_q")

    def compute(d, k, b, s):
        return x86.int8_compute(d, k, b, s, workload, knobs, op, x_zero)

    call = bb.call_te(compute, quantized, kernel, relax.const(bias), relax.const(scale),
                      primfunc_name_hint=f"gt_{re.sub(r'[^0-9A-Za-z_]', '_', plan.name)}",
                      primfunc_attrs={NODE_ATTR: plan.name})
    return call, kernel
