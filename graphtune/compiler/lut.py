"""Replace a uint8 -> uint8 chain of elementwise ops by a 256-entry lookup table.

In a quantized model every activation crosses memory as uint8 (the storage form of
:mod:`graphtune.frontend.qdq`). What a QDQ model computes between two stored tensors is
then often a function of one byte: SiLU in EfficientNet is ``q1 -> dequantize -> Sigmoid
-> quantize -> dequantize -> Mul(., dequantized q1) -> quantize -> q3``. Computed in fp32
that is an ``exp``, a reciprocal and three divisions per element (a 1x1 conv of
EfficientNet-B0 with that epilogue spent most of its time there); as a table it is one load
per element, ``q3 = table[q1]``, as ONNX Runtime's ``QLinearSigmoid`` does it.

:func:`lookup_tables` finds, for every uint8 tensor ``q`` of ``main``, the bindings that
depend on ``q`` alone: elementwise ops (:data:`ELEMENTWISE`) whose other operands are scalar
constants. Each uint8 ``astype`` among them from which all that the rest of the model reads
follows is replaced by ``lookup(q, table)``, the table being those bindings evaluated in
numpy on all 256 values (:func:`graphtune.compiler.consts.eval_const`, float32 arithmetic,
transcendental functions correctly rounded) -- when the chain holds an op that costs more than a few vector
instructions (:data:`COSTLY`) or rounds more than once (a quantized activation function):
a plain requantization stays arithmetic, which vectorises better than a table load. The
lookup is a PrimFunc marked :data:`ELEMENTWISE_ATTR` so that ``FuseOps`` fuses it into the
producer's epilogue like any elementwise op.

Examples
--------
>>> import numpy as np
>>> from tvm import relax
>>> bb = relax.BlockBuilder()
>>> q = relax.Var("q", relax.TensorType([1, 8, 4, 4], "uint8"))
>>> with bb.function("main", [q]):
...     with bb.dataflow():
...         x = bb.emit(relax.op.multiply(relax.op.astype(q, "float32"), relax.const(0.1)))
...         y = bb.emit(relax.op.round(relax.op.divide(relax.op.sigmoid(x), relax.const(1 / 255))))
...         out = bb.emit_output(relax.op.astype(relax.op.clip(y, 0, 255), "uint8"))
...     _ = bb.emit_func_output(out)
>>> mod = lookup_tables(bb.get())
>>> [name for name in sorted(gv.name_hint for gv in mod.get_global_vars())]
['lookup', 'main']
>>> table = lookup_table_of(mod)
>>> int(table[0]), int(table[40]), int(table[255])  # round(255 * sigmoid(0.1 * q))
(127, 250, 255)
"""

from __future__ import annotations

import heapq

import numpy as np
import tvm
from tvm import relax, te

from ..frontend.walk import bindings, dtype_of, op_name, scalar_value, static_shape, vars_read
from .consts import eval_const
from .rebind import rebind, rewritten_main

__all__ = ["lookup_tables", "lookup", "lookup_table_of", "ELEMENTWISE", "COSTLY", "LOOKUP",
           "ELEMENTWISE_ATTR"]

LOOKUP = "lookup"
"""Name hint of the table lookup PrimFuncs (and the op kind profiles show for them)."""

COSTLY = frozenset(f"relax.{op}" for op in (
    "sigmoid", "tanh", "exp", "log", "erf", "sqrt", "rsqrt", "power", "nn.silu", "nn.gelu"))
"""Ops that make a chain worth a table: each costs tens of vector instructions per element."""

ELEMENTWISE = COSTLY | frozenset(f"relax.{op}" for op in (
    "astype", "add", "subtract", "multiply", "divide", "maximum", "minimum", "round", "clip",
    "nn.relu", "negative", "abs", "square"))
"""Ops a table may stand for (each evaluated by :func:`~graphtune.compiler.consts.eval_const`)."""

ELEMENTWISE_ATTR = "graphtune.elementwise"
"""PrimFunc attribute of the lookups: elementwise for ``FuseOps`` (TVM's analysis sees an
injective op in a load at a computed index, and a conv's epilogue fuses elementwise ops only;
:func:`graphtune.compiler.legalize.legalize` sets their ``op_pattern``)."""


def lookup(data: te.Tensor, table: te.Tensor) -> te.Tensor:
    """``table[data]`` elementwise: uint8 ``data`` of any shape, a 256-entry ``table``.

    Examples
    --------
    >>> out = lookup(te.placeholder((2, 3), "uint8"), te.placeholder((256,), "uint8"))
    >>> str(out.dtype), [int(d) for d in out.shape]
    ('uint8', [2, 3])
    """
    return te.compute(data.shape, lambda *i: table[data(*i).astype("int32")], name=LOOKUP)


class _Bindings:
    """``main``'s bindings with what :func:`_region` asks of each, computed once: its position,
    op, static shape and readers."""

    def __init__(self, func: relax.Function) -> None:
        self.binds = [b for b in bindings(func) if isinstance(b, relax.VarBinding)]
        self.index = {b.var: i for i, b in enumerate(self.binds)}
        self.ops = {b.var: op_name(b.value) for b in self.binds}
        self.shapes = {b.var: static_shape(b.var) for b in self.binds}
        self.readers: dict[relax.Var, set[relax.Var]] = {}
        for binding in self.binds:
            for arg in vars_read(binding.value):
                self.readers.setdefault(arg, set()).add(binding.var)


def _region(source: relax.Var, graph: _Bindings) -> tuple[dict, dict]:
    """The bindings computed from ``source`` alone by :data:`ELEMENTWISE` ops: each var's value on
    the 256 bytes, and its tensor operands (in binding order). Only readers of what is already in
    the region are visited, in binding order."""
    values = {source: np.arange(256, dtype=np.uint8)}
    operands: dict[relax.Var, list[relax.Var]] = {}
    shape = static_shape(source)
    todo = [graph.index[r] for r in graph.readers.get(source, ())]
    heapq.heapify(todo)
    seen = set(todo)
    while todo:
        binding = graph.binds[heapq.heappop(todo)]
        var, call = binding.var, binding.value
        if graph.ops[var] not in ELEMENTWISE or graph.shapes[var] != shape:
            continue
        tensors = [a for a in call.args if isinstance(a, relax.Var)]
        if any(a not in values for a in tensors):
            continue
        arrays = [values[a] if isinstance(a, relax.Var) else scalar_value(a) for a in call.args]
        value = None if any(a is None for a in arrays) else eval_const(call, arrays)
        if value is None:
            continue
        values[var], operands[var] = value, tensors
        for reader in graph.readers.get(var, ()):
            if graph.index[reader] not in seen:
                seen.add(graph.index[reader])
                heapq.heappush(todo, graph.index[reader])
    return values, operands


def _chains(func: relax.Function) -> dict[relax.Var, tuple[relax.Var, np.ndarray]]:
    """Each uint8 ``astype`` binding a table stands for: its var -> (the chain's input, table).

    A chain's region is every binding :func:`_region` finds. The tables replace its uint8
    results from which what the rest of the model reads follows (by ops on that result alone),
    when the region is worth a table -- it holds a :data:`COSTLY` op, or a rounding to uint8
    besides those results (a QDQ activation function: ``dequantize -> HardSigmoid -> quantize
    -> dequantize -> Mul -> quantize``) -- and nothing read outside still needs such work.
    """
    graph = _Bindings(func)
    ops, readers = graph.ops, graph.readers
    outputs = vars_read(func.body.body)
    found: dict[relax.Var, tuple[relax.Var, np.ndarray]] = {}
    for source in [*func.params, *(b.var for b in graph.binds)]:
        if dtype_of(source) != "uint8" or static_shape(source) is None:
            continue
        values, operands = _region(source, graph)
        needed = {v for v in operands if v in outputs or readers.get(v, set()) - operands.keys()}
        rounded = [v for v in operands if ops[v] == "relax.astype" and dtype_of(v) == "uint8"]
        covered, chosen = set(), []
        for exit_ in rounded:
            follows = {exit_}
            for var, args in operands.items():
                if var not in follows and all(a in follows for a in args):
                    follows.add(var)
            if follows & needed:
                covered |= follows
                chosen.append(exit_)
        work = {source: False}  # depends on a costly op or on a rounding the tables remove
        for var, args in operands.items():
            work[var] = ops[var] in COSTLY or (var in rounded and var not in chosen) \
                or any(work[a] for a in args)
        if chosen and any(work.values()) and not any(work[v] for v in needed - covered):
            found.update((exit_, (source, values[exit_])) for exit_ in chosen)
    return found


@relax.expr_functor.mutator
class _UseTables(relax.PyExprMutator):
    """Re-emit ``main`` with each chain's uint8 result read from its table."""

    def __init__(self, mod: tvm.IRModule, tables: dict[relax.Var, tuple[relax.Var, np.ndarray]]) -> None:
        super().__init__(mod)
        self.tables = tables

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        entry = self.tables.get(binding.var)
        if entry is None:
            super().visit_var_binding_(binding)
            return
        source, table = entry
        call = self.builder_.call_te(lookup, self.visit_expr(source), relax.const(table),
                                     primfunc_name_hint=LOOKUP,
                                     primfunc_attrs={ELEMENTWISE_ATTR: True})
        rebind(self, binding.var, call)


def lookup_tables(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every costly uint8 -> uint8 elementwise chain of ``main`` a table lookup
    (see the module docstring); the chain's bindings nothing else reads are removed.

    Examples
    --------
    >>> bb = relax.BlockBuilder()
    >>> q = relax.Var("q", relax.TensorType([4], "uint8"))
    >>> with bb.function("main", [q]):
    ...     with bb.dataflow():
    ...         out = bb.emit_output(relax.op.astype(relax.op.astype(q, "float32"), "uint8"))
    ...     _ = bb.emit_func_output(out)
    >>> lookup_tables(bb.get()).get_global_vars()[0].name_hint  # no costly op: unchanged
    'main'
    """
    tables = _chains(mod["main"])
    if not tables:
        return mod
    return relax.transform.DeadCodeElimination(["main"])(rewritten_main(mod, _UseTables(mod, tables)))


def lookup_table_of(mod: tvm.IRModule, index: int = 0) -> np.ndarray:
    """The table of the ``index``-th lookup ``main`` makes (for tests and inspection).

    Examples
    --------
    >>> lookup_table_of(tvm.IRModule({"main": relax.Function([], relax.Tuple([]))}))
    Traceback (most recent call last):
    ...
    IndexError: main makes 0 table lookups, no lookup 0
    """
    calls = [b.value for b in bindings(mod["main"]) if isinstance(b, relax.VarBinding)
             and op_name(b.value) == "relax.call_tir" and b.value.args[0].name_hint.startswith(LOOKUP)]
    if index >= len(calls):
        raise IndexError(f"main makes {len(calls)} table lookups, no lookup {index}")
    return calls[index].args[1].fields[1].value.numpy()
