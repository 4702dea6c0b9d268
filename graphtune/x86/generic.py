"""Schedules for every PrimFunc that is not a graphtune kernel or layout transform.

TVM 0.27 ships no CPU schedules: a PrimFunc nobody schedules runs one scalar
loop nest on one thread, one to two orders of magnitude slower than a
scheduled one. :func:`schedule_generic` gives any PrimFunc a parallel and,
where the data allows, vectorised schedule, and says which one it applied:

``injective``
    Only spatial blocks (elementwise, transpose, reshape, concat, pad, resize,
    slices...): elementwise chains inlined, outer loops fused and
    parallelised, the innermost loop vectorised
    (:func:`graphtune.x86.schedule.schedule_elementwise`).
``matmul``
    A matmul / batch_matmul (one reduction axis, product of two tensors):
    rows fused and tiled, columns tiled by the vector width, a register tile
    accumulated over ``k`` with the fused epilogue written from it,
    parallel over tiles.
``reduction``
    Other reductions (softmax, layer norm, mean / sum / max over any axis,
    pools): outer spatial loops fused and parallelised; the innermost output
    axis moved under the reduction and vectorised when it is contiguous in
    every tensor the block touches.
``generic``
    Anything else, scheduled as far as it goes: conv-like contractions
    graphtune has no kernel for get the reduction schedule; TVM's own opaque
    code (e.g. non-max suppression) keeps its loops, its other blocks are
    scheduled; loop nests with data-dependent extents are parallelised.

:func:`audit` checks a built function's TIR for the schedule (every block
running many iterations sits under a parallel loop, spatial ones under a
vectorised loop too) — the property graphtune guarantees for every function
it builds.

Examples
--------
>>> from tvm import te
>>> x = te.placeholder((64, 256), name="x")
>>> y = te.compute((64, 256), lambda i, j: x[i, j] * 2.0, name="y")
>>> func, kind = schedule_generic(te.create_prim_func([x, y]), {"kind": "llvm"})
>>> kind, audit(func)
('injective', [])
"""

from __future__ import annotations

import math
from typing import Callable

import tvm
from tvm import s_tir, tirx

from .knobs import divisors
from .schedule import _blocks, _fold_epilogue, _try, _vectorize_init, _write_back, schedule_elementwise
from .target import TargetLike, vector_lanes
from .transform import _iterate_over_output

__all__ = ["SCHEDULE_ATTR", "SCHEDULES", "GENERIC", "AUDIT_MIN_ITERATIONS", "schedule_generic", "audit"]

SCHEDULE_ATTR = "graphtune.schedule"
"""PrimFunc attribute naming the schedule graphtune applied (one of :data:`SCHEDULES`)."""

SCHEDULES = ("kernel", "transform", "matmul", "injective", "reduction", "generic")
"""Schedule kinds, most specific first: ``kernel`` (a planned node's knob
schedule), ``transform`` (layout transform), then those of :func:`schedule_generic`."""

GENERIC = "generic"
"""The fallback kind: graphtune has no schedule made for the op (see the module docstring)."""

AUDIT_MIN_ITERATIONS = 1024
"""Blocks running at least this many iterations must be parallel (and vectorised if spatial)."""

_SPATIAL = tirx.IterVar.DataPar
_LOAD = tvm.ir.expr.TensorLoad  # what tirx.BufferLoad(...) builds in TVM 0.27
_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")


def _static(extent) -> int | None:
    return int(extent) if isinstance(extent, tirx.IntImm) else None


def _extent(sch: s_tir.Schedule, loop) -> int:
    """The extent of ``loop``: static in every block :func:`_plan` tiles."""
    extent = _static(sch.get(loop).extent)
    assert extent is not None, "a tiled schedule got a loop of dynamic extent"
    return extent


def _is_spatial(sch: s_tir.Schedule, block) -> bool:
    return all(iv.iter_type == _SPATIAL for iv in sch.get(block).iter_vars)


def _inline_spatial(sch: s_tir.Schedule) -> None:
    """Inline spatial blocks whose consumers are all spatial (elementwise chains).

    Never into a reduction, nor into a block that gathers from it (a resize):
    either would recompute the producer once per element read.
    """
    for block in _blocks(sch):
        if not _is_spatial(sch, block) or not sch.get(block).iter_vars:
            continue
        consumers = sch.get_consumers(block)
        if consumers and all(_is_spatial(sch, c) and not _gathers(sch, c, block)
                             for c in consumers):
            _try(sch.compute_inline, block)


def _gathers(sch: s_tir.Schedule, consumer, producer) -> bool:
    """True if ``consumer`` reads ``producer``'s output over more than one element per
    iteration (a window or data-dependent indices, e.g. bilinear resize: four neighbours)."""
    written = [region.source for region in sch.get(producer).writes]
    return any(_static(rng.extent) != 1
               for region in sch.get(consumer).reads
               if any(region.source.same_as(buffer) for buffer in written)
               for rng in region.region)


def _loads(expr) -> list:
    """Every buffer load in the expression ``expr``, the loads inside indices included."""
    found = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, _LOAD):
            found.append(node)
        for name in ("a", "b", "value", "condition", "true_value", "false_value"):
            child = getattr(node, name, None)
            if isinstance(child, tvm.ir.expr.Expr):
                stack.append(child)
        for name in ("args", "indices"):
            stack.extend(c for c in getattr(node, name, None) or [] if isinstance(c, tvm.ir.expr.Expr))
    return found


def _indexes_by_data(sch: s_tir.Schedule, consumer, producer) -> bool:
    """True if ``consumer`` reads ``producer``'s output at indices it loads from a buffer (ROI
    align's sample positions): inlining the producer would compute it once per read."""
    body = sch.get(consumer).body
    if not isinstance(body, tirx.BufferStore):
        return False
    written = [region.source for region in sch.get(producer).writes]
    return any(any(w.same_as(load.source) for w in written)
               and any(_loads(index) for index in load.indices)
               for load in _loads(body.value))


def _contiguous(sch: s_tir.Schedule, block, var) -> bool:
    """True if ``var`` indexes only the last axis, with stride 1, of every buffer ``block`` touches."""
    sblock = sch.get(block)
    for region in list(sblock.reads) + list(sblock.writes):
        ranges = list(region.region)
        for axis, rng in enumerate(ranges):
            used = any(v.same_as(var) for v in tirx.analysis.undefined_vars(rng.min))
            if not used:
                continue
            if axis != len(ranges) - 1:
                return False
            coeffs = tvm.sym.detect_linear_equation(rng.min, [var])
            if len(coeffs) != 2 or _static(coeffs[0]) != 1:
                return False
    return True


def _mul_loads(value) -> bool:
    """True if ``value`` (a reduction update) multiplies two buffer loads of different buffers."""
    if isinstance(value, tirx.Add):
        return _mul_loads(value.a) or _mul_loads(value.b)
    if isinstance(value, tirx.Mul):
        a, b = value.a, value.b
        return isinstance(a, _LOAD) and isinstance(b, _LOAD) \
            and not a.source.same_as(b.source)
    return False


def _is_contraction(sch: s_tir.Schedule, block) -> bool:
    """A reduction accumulating products of two tensors (matmul, conv)."""
    body = sch.get(block).body
    return isinstance(body, tirx.BufferStore) and _mul_loads(body.value)


def _is_padding(sch: s_tir.Schedule, block) -> bool:
    """A spatial block storing a load, or a guarded load (``if_then_else(cond, load, value)``).

    Cheap to recompute wherever it is read, unlike an elementwise op (a
    windowed reduction reads each of its elements up to kh * kw times).
    """
    body = sch.get(block).body
    if not (_is_spatial(sch, block) and isinstance(body, tirx.BufferStore)):
        return False
    value = body.value
    if isinstance(value, tvm.ir.expr.Call) and value.op.same_as(_IF_THEN_ELSE):
        value = value.args[1]
    return isinstance(value, _LOAD)


def _schedule_matmul(sch: s_tir.Schedule, block, lanes: int) -> None:
    """Register-tiled matmul: parallel over (row tile, column tile), ``k``, rows x vector columns."""
    *spatial, k = sch.get_loops(block)
    epilogue = _fold_epilogue(sch, block)
    extents = [_extent(sch, loop) for loop in spatial]
    cols = extents[-1]
    col_bn = cols if cols <= 2 * lanes else divisors(cols, cap=2 * lanes)[-1]
    if col_bn < lanes and cols > 2 * lanes:
        col_bn = 2 * lanes  # no good divisor: pad the last tile (a predicate), keep vectors
    row_loops = spatial[:-1]
    if row_loops:
        row = sch.fuse(*row_loops) if len(row_loops) > 1 else row_loops[0]
        row_outer, row_inner = sch.split(row, [None, divisors(math.prod(extents[:-1]), cap=4)[-1]])
    col_outer, col_inner = sch.split(spatial[-1], [None, col_bn])
    if row_loops:
        sch.reorder(row_outer, col_outer, k, row_inner, col_inner)
    else:
        sch.reorder(col_outer, k, col_inner)
    _write_back(sch, block, epilogue, col_outer)
    tile = sch.fuse(row_outer, col_outer) if row_loops else col_outer
    sch.parallel(tile)
    sch.vectorize(col_inner)
    if row_loops:
        sch.unroll(row_inner)
    _vectorize_init(sch, block, k, tile)


_POOL_TILE = 4
"""Outputs along the second-innermost axis a reduction computes at once (independent chains)."""


def _schedule_reduction(sch: s_tir.Schedule, block, lanes: int) -> None:
    """Parallel over the outer outputs; the innermost output axis vectorised under the reduction.

    When that axis is contiguous (the inner ``c`` of ``NCHW{x}c`` pools and
    means), the padding feeding the block is inlined (no padded copy; not where the block reads
    it at indices it loads, :func:`_indexes_by_data`), the
    next output axis is tiled by up to :data:`_POOL_TILE` unrolled outputs
    (parallel over the axes before it, serial along it),
    the tile accumulates in registers and the elementwise epilogue (the
    average pool's division, a following relu...) is computed from it before
    one vector store per output.
    """
    loops = sch.get_loops(block)
    iters = sch.get(block).iter_vars
    spatial = [loop for loop, iv in zip(loops, iters) if iv.iter_type == _SPATIAL]
    reduce = [loop for loop, iv in zip(loops, iters) if iv.iter_type != _SPATIAL]
    last = [iv for iv in iters if iv.iter_type == _SPATIAL][-1:] if spatial else []
    if not (last and (_static(last[0].dom.extent) or 0) > 1 and _contiguous(sch, block, last[0].var)):
        sch.reorder(*spatial, *reduce)
        if spatial:
            sch.parallel(sch.fuse(*spatial) if len(spatial) > 1 else spatial[0])
        return
    inner, spatial = spatial[-1], spatial[:-1]
    extent = _extent(sch, inner)
    vectors = []
    if extent > 4 * lanes:
        spatial.append(sch.split(inner, [None, divisors(extent, cap=lanes)[-1]])[0])
        inner = sch.get_loops(block)[len(spatial)]
    elif extent > lanes and extent & (extent - 1):
        # LLVM widens a vector of 48 floats to 64 and masks it (2-5x slower): power-of-two
        # vectors, each accumulated over the window in turn
        chunks, inner = sch.split(inner, [None, extent & -extent])
        vectors = [chunks]
    tile = []
    if spatial:
        width = _static(sch.get(spatial[-1]).extent) or 1
        outer, tile_loop = sch.split(spatial[-1], [None, divisors(width, cap=_POOL_TILE)[-1]])
        spatial, tile = spatial[:-1] + [outer], [tile_loop]
    sch.reorder(*spatial, *vectors, *reduce, *tile, inner)
    for producer in sch.get_producers(block):
        if _is_padding(sch, producer) and not _indexes_by_data(sch, block, producer):
            _try(sch.compute_inline, producer)  # read through the guard, no padded copy
    if spatial:
        _write_back(sch, block, _fold_epilogue(sch, block), spatial[-1])
        rows = spatial[:-1] or spatial  # the tile loop stays serial: index arithmetic once per row
        sch.parallel(sch.fuse(*rows) if len(rows) > 1 else rows[0])
        for loop in tile:
            sch.unroll(loop)
    sch.vectorize(inner)
    init = sch.decompose_reduction(block, reduce[0])
    sch.vectorize(sch.get_loops(init)[-1])


def _schedule_spatial(sch: s_tir.Schedule, block, lanes: int) -> None:
    """Elementwise schedule; scatters re-indexed to gather; data-dependent extents: parallel only."""
    _iterate_over_output(sch, block)
    loops = sch.get_loops(block)
    if all(_static(sch.get(loop).extent) is not None for loop in loops):
        schedule_elementwise(sch, block, lanes)
    elif len(loops) > 1:  # data-dependent extents: parallel, no vectors
        sch.parallel(sch.fuse(*loops[:-1]))
    elif loops:
        sch.parallel(loops[0])


def _placed(sch: s_tir.Schedule, block) -> bool:
    """True if ``block`` no longer sits in its own loop nest at the root (scheduled with another)."""
    loops = sch.get_loops(block)
    return len(loops) != len(sch.get(block).iter_vars) \
        or any(sch.get(loop).kind != tirx.ForKind.SERIAL for loop in loops)


def _plan(sch: s_tir.Schedule, block) -> tuple[str, Callable[[s_tir.Schedule, object, int], None]]:
    """The kind and schedule function for one root block."""
    sblock = sch.get(block)
    if _is_spatial(sch, block):
        return "injective", _schedule_spatial
    if not all(_static(iv.dom.extent) is not None for iv in sblock.iter_vars):
        return GENERIC, _schedule_spatial_parallel
    contraction = _is_contraction(sch, block)
    iters = sblock.iter_vars
    reduces = [iv for iv in iters if iv.iter_type != _SPATIAL]
    if contraction and len(reduces) == 1 and len(iters) >= 2 and iters[-1].iter_type != _SPATIAL:
        return "matmul", _schedule_matmul
    return (GENERIC if contraction else "reduction"), _schedule_reduction


def _schedule_block(sch: s_tir.Schedule, block, lanes: int) -> tuple[s_tir.Schedule, str]:
    """Schedule one root block (on a copy, kept if every step succeeds); return it and its kind.

    Opaque blocks (TVM's own code, e.g. sorting) and blocks whose schedule
    fails are ``generic``; a failed matmul or reduction schedule falls back to
    parallel outer loops.
    """
    if not sch.get(block).iter_vars:
        return sch, GENERIC
    if not sch.get_loops(block):
        return sch, "injective"  # a scalar
    kind, action = _plan(sch, block)
    for attempt, attempt_kind in ((action, kind), (_schedule_spatial_parallel, GENERIC)):
        trial = sch.copy()
        try:
            attempt(trial, block, lanes)
        except s_tir.ScheduleError:
            continue
        return trial, attempt_kind
    return sch, GENERIC


def _schedule_spatial_parallel(sch: s_tir.Schedule, block, lanes: int) -> None:
    """Parallel over the block's outer spatial loops only (data-dependent extents)."""
    loops = sch.get_loops(block)
    iters = sch.get(block).iter_vars
    outer = []
    for loop, iv in zip(loops, iters):
        if iv.iter_type != _SPATIAL:
            break
        outer.append(loop)
    if outer:
        sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])


_PRIORITY = {"injective": 0, "reduction": 1, "matmul": 2, GENERIC: 3}
"""A function's kind is that of its weightiest block; any generic block makes it generic."""


def schedule_generic(func: tirx.PrimFunc, target: TargetLike = None) -> tuple[tirx.PrimFunc, str]:
    """Schedule every block of ``func``; return the function and the schedule kind applied.

    Parameters
    ----------
    func : tvm.tirx.PrimFunc
        An unscheduled PrimFunc (as Relax legalization and FuseTIR produce).
    target : Target or dict, optional
        Sets the vector width (default: host).

    Returns
    -------
    (tvm.tirx.PrimFunc, str)
        The scheduled function (attribute :data:`SCHEDULE_ATTR` set) and its
        kind: ``generic`` if any block got only the fallback (or could not be
        scheduled), else the weightiest its blocks got of ``matmul``,
        ``reduction`` and ``injective`` (in that order).

    Examples
    --------
    >>> from tvm import te
    >>> a, b = te.placeholder((32, 64), name="a"), te.placeholder((64, 48), name="b")
    >>> k = te.reduce_axis((0, 64), "k")
    >>> c = te.compute((32, 48), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    >>> func, kind = schedule_generic(te.create_prim_func([a, b, c]), {"kind": "llvm"})
    >>> kind, "T.vectorized" in func.script(), audit(func)
    ('matmul', True, [])
    """
    lanes = vector_lanes(target)
    sch = s_tir.Schedule(func)
    _inline_spatial(sch)
    kinds = []
    for name in [sch.get(block).name_hint for block in _blocks(sch)]:
        try:
            block = sch.get_sblock(name)
        except s_tir.ScheduleError:
            continue  # inlined
        if _placed(sch, block):
            continue  # an epilogue an earlier block's schedule computes
        sch, kind = _schedule_block(sch, block, lanes)
        kinds.append(kind)
    kind = max(kinds, key=_PRIORITY.__getitem__) if kinds else "injective"
    return sch.mod["main"].with_attr(SCHEDULE_ATTR, kind), kind


# ------------------------------------------------------------------ audit
def _children(stmt) -> list:
    found = []
    for name in ("body", "then_case", "else_case", "block", "init"):
        child = getattr(stmt, name, None)
        if isinstance(child, tirx.Stmt):
            found.append(child)
    seq = getattr(stmt, "seq", None)
    if seq is not None:
        found.extend(seq)
    return found


def audit(func: tirx.PrimFunc, min_iterations: int = AUDIT_MIN_ITERATIONS) -> list[str]:
    """Problems that show ``func`` is not scheduled; an empty list if it is.

    A block (other than the root) that runs at least ``min_iterations``
    iterations (the product of the extents of the loops around it,
    data-dependent extents counting as large) over at least two output points
    must sit under a parallel loop; a spatial one whose innermost loop has a
    static extent above 1 must also sit under a vectorised loop. Loops in TVM's
    opaque code (blocks without iteration variables, e.g. sorting) are not checked.

    Examples
    --------
    >>> from tvm import te
    >>> x = te.placeholder((64, 256), name="x")
    >>> y = te.compute((64, 256), lambda i, j: x[i, j] + 1.0, name="y")
    >>> audit(te.create_prim_func([x, y]))
    ['y: 16384 iterations, no parallel loop', 'y: 16384 iterations, no vectorised loop']
    """
    problems: list[str] = []

    def visit(stmt, loops: list) -> None:
        if isinstance(stmt, tirx.For):
            loops = loops + [stmt]
        realize = isinstance(stmt, s_tir.SBlockRealize)
        if realize and stmt.block.iter_vars and loops:
            block = stmt.block
            extents = [_static(loop.extent) for loop in loops]
            static = [e for e in extents if e is not None]
            count = math.prod(static) if len(static) == len(extents) else math.inf
            points = math.prod(_static(iv.dom.extent) or 2 for iv in block.iter_vars
                               if iv.iter_type == _SPATIAL)
            shown = "data-dependent" if count == math.inf else count
            if count >= min_iterations and points >= 2:
                if not any(loop.kind == tirx.ForKind.PARALLEL for loop in loops):
                    problems.append(f"{block.name_hint}: {shown} iterations, no parallel loop")
                spatial = all(iv.iter_type == _SPATIAL for iv in block.iter_vars)
                if spatial and (extents[-1] or 0) > 1 \
                        and not any(loop.kind == tirx.ForKind.VECTORIZED for loop in loops):
                    problems.append(f"{block.name_hint}: {shown} iterations, no vectorised loop")
            return  # the block's own body holds no further blocks worth checking
        for child in _children(stmt):
            visit(child, loops)

    visit(func.body, [])
    return problems
