"""Vector loads whose lanes gather from one aligned block become a load and a shuffle.

TVM's vectorizer turns a load whose index is not a ``Ramp`` (lane ``l`` reads
``x[(l // 4) * 4 + j]``, say) into one scalar load and one insert per lane. When every
lane's address is a constant offset from the first lane's, and all of them lie in one
block of ``lanes`` elements that starts at a multiple of ``lanes`` (so inside the buffer,
whose size ``lanes`` divides), the same values come from one contiguous vector load of that
block and a ``Shuffle`` of its lanes, which LLVM emits as one permute (``vpermilps`` /
``vpermps``). :func:`lane_shuffles` rewrites exactly those loads and leaves every other load
as it is, so a function it cannot prove anything about builds as before.

The group conv's ``shuffle`` candidates read each output lane's own group's inputs this
way (:mod:`graphtune.x86.group_conv`).

Examples
--------
>>> import tvm
>>> from tvm import te
>>> from graphtune.x86.lowering import PIPELINE
>>> x = te.placeholder((8, 16), "float32", name="x")
>>> y = te.compute((8, 4, 16), lambda p, j, l: x[p, (l // 4) * 4 + j], name="y")
>>> sch = tvm.s_tir.Schedule(te.create_prim_func([x, y]))
>>> p, j, l = sch.get_loops(sch.get_sblock("y"))
>>> sch.vectorize(l); sch.unroll(j)
>>> lib = tvm.compile(sch.mod, target={"kind": "llvm", "mcpu": "skylake-avx512"},
...                   tir_pipeline=PIPELINE)
>>> "insertelement" in lib.mod.inspect_source("ll"), "shufflevector" in lib.mod.inspect_source("ll")
(False, True)
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx
from tvm.sym import Analyzer

from .statements import with_children

__all__ = ["lane_shuffles", "shuffled_load"]

_BINARY = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod, tirx.Min,
           tirx.Max, tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.And, tirx.Or)


class _NotAffine(Exception):
    """A lane of the index holds an expression :func:`_lane` does not take apart."""


def _lanes(expr: tirx.Expr) -> int:
    """Lanes of ``expr``'s type (1 for handles and other non-numeric types)."""
    dtype = getattr(expr.ty, "dtype", None)
    return 1 if dtype is None else int(tvm.runtime.DataType(str(dtype)).lanes)


def _lane(expr: tirx.Expr, k: int, bound: dict) -> tirx.Expr:
    """The scalar expression lane ``k`` of the integer vector ``expr`` holds (``bound``: the
    values of the vector variables earlier statements bound)."""
    if _lanes(expr) == 1:
        return expr
    if isinstance(expr, tirx.Var) and expr in bound:
        return _lane(bound[expr], k, bound)
    if isinstance(expr, tirx.Ramp):
        return expr.base + expr.stride * k
    if isinstance(expr, tirx.Broadcast):
        return expr.value
    if isinstance(expr, _BINARY):
        return type(expr)(_lane(expr.a, k, bound), _lane(expr.b, k, bound))
    if isinstance(expr, tirx.Cast):
        scalar = str(tvm.runtime.DataType(str(expr.ty.dtype)).with_lanes(1))
        return tirx.Cast(scalar, _lane(expr.value, k, bound))
    raise _NotAffine(type(expr).__name__)


def _flat_size(source: tirx.Expr) -> int | None:
    size = 1
    for extent in getattr(source.ty, "shape", [None]):
        if not isinstance(extent, tirx.IntImm):
            return None
        size *= int(extent)
    return size


def shuffled_load(load: ir.TensorLoad, analyzer: Analyzer, bound: dict | None = None) -> tirx.Expr | None:
    """``load`` as a contiguous aligned vector load and a ``Shuffle`` of its lanes, or None
    when its lanes cannot be proved to lie in one aligned block of the buffer (``bound``: the
    values of the vector variables in its index; ``analyzer`` knows the scalar ones).

    Examples
    --------
    >>> from tvm import tirx
    >>> buf = tirx.decl_buffer((64,), "float32", name="x")
    >>> p = tirx.Var("p", "int32")
    >>> lanes = tirx.Ramp(0, 1, 16) // 4 * 4 + 2  # lane l reads (l // 4) * 4 + 2
    >>> index = tirx.Broadcast(p * 16, 16) + lanes
    >>> shuffled = shuffled_load(tirx.BufferLoad(buf, [index]), Analyzer())
    >>> [int(i) for i in shuffled.indices]
    [2, 2, 2, 2, 6, 6, 6, 6, 10, 10, 10, 10, 14, 14, 14, 14]
    """
    bound = bound or {}
    if len(load.indices) != 1:
        return None
    index = load.indices[0]
    lanes = _lanes(index)
    size = _flat_size(load.source)
    if lanes == 1 or isinstance(index, (tirx.Ramp, tirx.Broadcast)) or size is None or size % lanes:
        return None
    try:
        first = _lane(index, 0, bound)
        offsets = [analyzer.simplify(_lane(index, k, bound) - first) for k in range(lanes)]
    except _NotAffine:
        return None
    if not all(isinstance(o, tirx.IntImm) for o in offsets):
        return None
    low, high = min(int(o) for o in offsets), max(int(o) for o in offsets)
    for shift in range(lanes - (high - low)):  # the aligned block holding every lane
        start = analyzer.simplify(first + (low - shift))
        alignment = analyzer.modular_set(start)
        if alignment.coeff % lanes == 0 and alignment.base % lanes == 0:
            block = tirx.BufferLoad(load.source, [tirx.Ramp(start, 1, lanes)])
            return tirx.Shuffle([block], [tirx.IntImm("int32", int(o) - low + shift) for o in offsets])
    return None


class _Rewriter:
    """Walks a function's statements in order, knowing what earlier ``Bind`` statements bound
    (scalars in the analyzer, vectors in ``bound``), and rewrites loads by :func:`shuffled_load`
    (nodes rebuilt only where something under them changed; kinds of node not listed are left
    as they are, which can only lose a rewrite)."""

    def __init__(self) -> None:
        self.analyzer = Analyzer()
        self.bound: dict = {}

    def expr(self, expr: tirx.Expr) -> tirx.Expr:
        if isinstance(expr, ir.TensorLoad):
            shuffled = shuffled_load(expr, self.analyzer, self.bound)
            return expr if shuffled is None else shuffled
        if isinstance(expr, _BINARY):
            a, b = self.expr(expr.a), self.expr(expr.b)
            return expr if a.same_as(expr.a) and b.same_as(expr.b) else type(expr)(a, b)
        if isinstance(expr, tirx.Cast):
            value = self.expr(expr.value)
            return expr if value.same_as(expr.value) else tirx.Cast(str(expr.ty.dtype), value)
        if isinstance(expr, tirx.Select):
            old = (expr.condition, expr.true_value, expr.false_value)
            new = [self.expr(e) for e in old]
            return expr if all(a.same_as(b) for a, b in zip(new, old)) else tirx.Select(*new)
        if isinstance(expr, ir.Call):  # if_then_else around a padded read, intrinsics
            args = [self.expr(a) for a in expr.args]
            if all(a.same_as(b) for a, b in zip(args, expr.args)):
                return expr
            return ir.Call(expr.op, args, expr.attrs, list(expr.ty_args), ret_ty=expr.ty)
        return expr

    def stmt(self, stmt: tirx.Stmt) -> tirx.Stmt:
        if isinstance(stmt, tirx.Bind):
            dtype = str(getattr(stmt.var.ty, "dtype", ""))
            if dtype.startswith("int") and _lanes(stmt.var) > 1:
                self.bound[stmt.var] = stmt.value
            elif dtype.startswith("int"):
                try:
                    self.analyzer.bind(stmt.var, stmt.value)
                except RuntimeError:  # bound already: leave it unknown (a rewrite lost, no more)
                    pass
            return stmt
        if isinstance(stmt, tirx.BufferStore):
            value = self.expr(stmt.value)
            return stmt if value.same_as(stmt.value) else tirx.BufferStore(stmt.buffer, value, stmt.indices)
        return with_children(stmt, self.stmt)


@tirx.transform.prim_func_pass(opt_level=0, name="graphtune.LaneShuffles")
def lane_shuffles(func: tirx.PrimFunc, mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tirx.PrimFunc:
    """Rewrite every vector load of ``func`` whose lanes gather from one aligned block as a
    contiguous load and a ``Shuffle`` (:func:`shuffled_load`)."""
    body = _Rewriter().stmt(func.body)
    return func if body.same_as(func.body) else func.with_body(body)
