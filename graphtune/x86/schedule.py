"""Knob schedules for conv2d, depthwise and group conv2d and dense, standalone or fused.

:func:`schedule_fused` takes a PrimFunc in which the op is one reduction block
(the *anchor*) built by :func:`~graphtune.x86.conv2d_nchwc`,
:func:`~graphtune.x86.depthwise_conv2d_nchwc` or
:func:`~graphtune.x86.dense_packed`, possibly with padding before it and
elementwise blocks after it (bias add, relu, residual add, clip) as Relax's
FuseOps + FuseTIR produce. It inlines the padding, folds the elementwise
chain into its last block, and applies the schedule in the spirit of the old
x86 template: parallel over the fused outer loops, a register tile of
``oh_bn x reg_n x oc_bn`` accumulators (``oc_bn`` vectorised, the width tile
and ``kw`` unrolled), the epilogue computed from the tile before it is
written out. Blocks it cannot fold (e.g. a second output) get a plain
parallel + vectorised schedule, never a wrong result.

Examples
--------
>>> import graphtune.x86 as x86
>>> wl = x86.conv2d_workload([1, 16, 8, 8], [16, 16, 3, 3], padding=[1, 1, 1, 1])
>>> knobs = {"ic_bn": 8, "oc_bn": 16, "reg_n": 4, "unroll_kw": True}
>>> func = x86.kernel_func(wl, knobs, {"kind": "llvm"})  # uses schedule_fused
>>> len(func.params)
3
"""

from tvm import s_tir, tirx

from ..errors import KnobError
from .conv2d_transpose import taps
from .groups import span
from .knobs import check_knobs
from .target import TargetLike, vector_lanes
from .workload import op_of, output_shape

__all__ = ["schedule_fused", "schedule_elementwise", "anchor_domain"]

_REDUCE = tirx.IterVar.CommReduce


def anchor_domain(workload: dict, knobs: dict) -> tuple:
    """Expected ``(spatial extents, reduction extents)`` of the anchor block.

    Examples
    --------
    >>> from graphtune.x86.workload import dense_workload
    >>> anchor_domain(dense_workload([1, 64], [10, 64]), {"oc_bn": 10, "k_bn": 8})
    ([1, 10], [64])
    """
    op = op_of(workload)
    check_knobs(workload, knobs)
    if op == "dense":
        return output_shape(workload), [workload["data"][-1]]
    n, o, oh, ow = output_shape(workload)
    _, _, kh, kw = workload["kernel"]
    if op == "depthwise_conv2d":
        bn = knobs["bn"]
        return [n, o // bn, oh, ow, bn], [kh, kw]
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    if op == "conv2d_transpose":  # the reduction runs over the taps of one output phase
        kh, kw = taps(workload)
    reduced = span(workload, ob) if op == "group_conv2d" else workload["data"][1]
    return [n, o // ob, oh, ow, ob], [reduced // ib, kh, kw, ib]


def _domain(sch: s_tir.Schedule, block) -> tuple:
    spatial, reduce = [], []
    for iv in sch.get(block).iter_vars:
        (reduce if iv.iter_type == _REDUCE else spatial).append(int(iv.dom.extent))
    return spatial, reduce


def _blocks(sch: s_tir.Schedule) -> list:
    return list(sch.get_child_blocks(sch.get_sblock("root")))


def _find_anchor(sch: s_tir.Schedule, workload: dict, knobs: dict):
    expected = anchor_domain(workload, knobs)
    seen = []
    for block in _blocks(sch):
        spatial, reduce = _domain(sch, block)
        if reduce:
            if (spatial, reduce) == tuple(expected):
                return block
            seen.append(f"{sch.get(block).name_hint} {spatial} x {reduce}")
    raise KnobError(
        f"no {op_of(workload)} block with spatial x reduction extents {expected[0]} x {expected[1]} "
        f"(implied by the workload and knobs {knobs}) in the function; reduction blocks found: "
        f"{seen or 'none'}. Build the op with graphtune.x86's TE compute and the same knobs."
    )


def _try(action, *args) -> bool:
    """Apply a schedule primitive; False (schedule unchanged) if TVM refuses it."""
    try:
        action(*args)
    except s_tir.ScheduleError:
        return False
    return True


def _inline_producers(sch: s_tir.Schedule, anchor) -> None:
    """Inline the spatial blocks feeding the anchor (padding); others stay as they are."""
    for block in sch.get_producers(anchor):
        if not _domain(sch, block)[1]:
            _try(sch.compute_inline, block)


def _fold_epilogue(sch: s_tir.Schedule, anchor):
    """Inline the elementwise chain after the anchor into its last block; return that block.

    Returns None when the anchor has no single-consumer elementwise chain over
    its own output domain (or its output cannot live in registers), in which
    case the caller writes the tile through a ``cache_write`` block.
    """
    members = _epilogue_dag(sch, anchor) or _epilogue_chain(sch, anchor)
    if not members:
        return None
    for block in members[:-1]:
        if not _try(sch.compute_inline, block):
            return None
    if not _try(sch.set_scope, anchor, 0, "local"):
        return None
    return members[-1]


def _epilogue_chain(sch: s_tir.Schedule, anchor) -> list:
    """The single-consumer elementwise blocks after ``anchor``, in order (a branching epilogue
    :func:`_epilogue_dag` cannot fold whole, e.g. with a second output, folds up to its first fork)."""
    spatial = _domain(sch, anchor)[0]
    chain, current = [], anchor
    while True:
        consumers = sch.get_consumers(current)
        if len(consumers) != 1 or _domain(sch, consumers[0]) != (spatial, []):
            return chain
        chain.append(consumers[0])
        current = consumers[0]


def _epilogue_dag(sch: s_tir.Schedule, anchor) -> list:
    """The elementwise blocks after ``anchor`` that fold into one, producers first; [] if none.

    The epilogue may branch and join again (SiLU: ``y = conv + bias`` feeds
    both ``sigmoid(y)`` and ``y * sigmoid(y)``): every block reachable from
    the anchor through blocks over the anchor's output domain belongs to it as
    long as exactly one of them (the last, the sink) writes a function output
    or has a consumer outside the set, and the anchor feeds only the set. Inlining all but
    the sink recomputes nothing but the shared elementwise expressions.
    """
    spatial = _domain(sch, anchor)[0]

    def names(blocks) -> list[str]:
        return [sch.get(b).name_hint for b in blocks]

    order = names(_blocks(sch))
    found: dict[str, object] = {}
    frontier = [anchor]
    while frontier:
        current = frontier.pop()
        for block in sch.get_consumers(current):
            name = sch.get(block).name_hint
            if name not in found and _domain(sch, block) == (spatial, []):
                found[name] = block
                frontier.append(block)
    if not found or any(n not in found for n in names(sch.get_consumers(anchor))):
        return []
    allocated = list(sch.get(sch.get_sblock("root")).alloc_buffers)
    outputs = {n for n, b in found.items()
               if not any(sch.get(b).writes[0].source.same_as(a) for a in allocated)}
    sinks = [n for n in found if n in outputs
             or any(c not in found for c in names(sch.get_consumers(found[n])))]
    if len(sinks) != 1 or sinks[0] != max(found, key=order.index):
        return []
    return [found[n] for n in sorted(found, key=order.index)]


def _vectorize_below(sch: s_tir.Schedule, block, outer) -> None:
    """Vectorise the innermost loop of ``block`` if it lies strictly inside loop ``outer``."""
    loops = sch.get_loops(block)
    outer_sref = sch.get_sref(outer)
    depth = [i for i, loop in enumerate(loops) if sch.get_sref(loop).same_as(outer_sref)]
    if depth and depth[0] < len(loops) - 1:
        sch.vectorize(loops[-1])


def _write_back(sch: s_tir.Schedule, anchor, epilogue, loop) -> None:
    """Put the block writing the register tile out (the epilogue or a cache_write) under ``loop``."""
    if epilogue is None:
        epilogue = sch.cache_write(anchor, 0, "local")
    sch.reverse_compute_at(epilogue, loop)
    _vectorize_below(sch, epilogue, loop)


def _vectorize_init(sch: s_tir.Schedule, anchor, loop, outer) -> None:
    """Split the zero-init off the reduction at ``loop`` (directly inside ``outer``); vectorise it."""
    init = sch.decompose_reduction(anchor, loop)
    _vectorize_below(sch, init, outer)


def _schedule_conv2d(sch: s_tir.Schedule, anchor, epilogue, knobs: dict) -> None:
    n, oc_chunk, oh, ow, oc_block, ic_chunk, kh, kw, ic_block = sch.get_loops(anchor)
    oh_outer, oh_inner = sch.split(oh, [None, knobs.get("oh_bn", 1)])
    ow_outer, ow_inner = sch.split(ow, [None, knobs["reg_n"]])
    sch.reorder(n, oc_chunk, oh_outer, ow_outer, ic_chunk, kh, ic_block, kw, oh_inner, ow_inner, oc_block)
    _write_back(sch, anchor, epilogue, ow_outer)
    sch.parallel(sch.fuse(n, oc_chunk, oh_outer))
    sch.vectorize(oc_block)
    sch.unroll(ow_inner)
    sch.unroll(oh_inner)
    if knobs["unroll_kw"]:
        sch.unroll(kw)
    _vectorize_init(sch, anchor, ic_chunk, ow_outer)


def _schedule_depthwise(sch: s_tir.Schedule, anchor, epilogue, knobs: dict) -> None:
    n, c_chunk, oh, ow, c_block, kh, kw = sch.get_loops(anchor)
    ow_outer, ow_inner = sch.split(ow, [None, knobs["reg_n"]])
    sch.reorder(n, c_chunk, oh, ow_outer, kh, kw, ow_inner, c_block)
    _write_back(sch, anchor, epilogue, ow_outer)
    sch.parallel(sch.fuse(n, c_chunk, oh))
    sch.vectorize(c_block)
    sch.unroll(ow_inner)
    sch.unroll(kw)
    _vectorize_init(sch, anchor, kh, ow_outer)


def _schedule_dense(sch: s_tir.Schedule, anchor, epilogue, knobs: dict) -> None:
    *outer, n, m, k = sch.get_loops(anchor)  # N-D data: the row tile runs along its last leading dim
    n_outer, n_inner = sch.split(n, [None, knobs.get("n_bn", 1)])
    m_outer, m_inner = sch.split(m, [None, knobs["oc_bn"]])
    k_outer, k_inner = sch.split(k, [None, knobs["k_bn"]])
    sch.reorder(*outer, n_outer, m_outer, k_outer, k_inner, n_inner, m_inner)
    _write_back(sch, anchor, epilogue, m_outer)
    tiles = sch.fuse(*outer, n_outer, m_outer)  # a row tile meets every weight block while in L1
    sch.parallel(tiles)
    sch.vectorize(m_inner)
    sch.unroll(n_inner)
    sch.unroll(k_inner)
    _vectorize_init(sch, anchor, k_outer, tiles)


_SCHEDULES = {
    "conv2d": _schedule_conv2d,
    "conv2d_transpose": _schedule_conv2d,
    "depthwise_conv2d": _schedule_depthwise,
    "group_conv2d": _schedule_conv2d,
    "dense": _schedule_dense,
}


def schedule_elementwise(sch: s_tir.Schedule, block, lanes: int) -> None:
    """Parallel + vectorised schedule for a spatial block at the root (transforms, leftovers).

    The loops but the last two (or one) are fused and parallelised; the
    innermost is vectorised whole when short (``<= 4 * lanes``), else split by
    its largest divisor ``<= lanes`` first.

    Examples
    --------
    >>> from tvm import te, s_tir
    >>> x = te.placeholder((4, 8, 32))
    >>> y = te.compute((4, 8, 32), lambda i, j, k: x[i, j, k] + 1, name="y")
    >>> sch = s_tir.Schedule(te.create_prim_func([x, y]))
    >>> schedule_elementwise(sch, sch.get_sblock("y"), 16)
    >>> "T.parallel(4)" in sch.mod.script() and "T.vectorized(32)" in sch.mod.script()
    True
    """
    loops = sch.get_loops(block)
    if not loops or _domain(sch, block)[1]:
        return
    inner = loops[-1]
    extent = int(sch.get(inner).extent)
    if extent > 4 * lanes:
        factor = max(d for d in range(1, lanes + 1) if extent % d == 0)
        _, inner = sch.split(inner, [None, factor])
    outer = loops[:-2] if len(loops) > 2 else loops[:-1]
    if outer:
        sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    if int(sch.get(inner).extent) > 1:
        sch.vectorize(inner)


def schedule_fused(func: tirx.PrimFunc, workload: dict, knobs: dict, target: TargetLike = None) -> tirx.PrimFunc:
    """Apply the knob schedule to the anchor op of ``func`` and its fused pro/epilogue.

    Parameters
    ----------
    func : tvm.tirx.PrimFunc
        A PrimFunc holding exactly one reduction block of the op described by
        ``workload`` (built from graphtune.x86's TE compute with these
        ``knobs``), optionally with padding before it and an elementwise
        chain (bias add, relu, residual add, clip...) after it.
    workload, knobs : dict
        The op's workload and knobs (validated).
    target : Target or dict, optional
        Sets the vector width of the left-over blocks' schedule (default: host).

    Returns
    -------
    tvm.tirx.PrimFunc
        The scheduled function (same parameters and attributes).

    Raises
    ------
    KnobError
        Invalid knobs, or no block matching the workload and knobs in ``func``.

    Examples
    --------
    >>> from tvm import te
    >>> import graphtune.x86 as x86
    >>> wl = x86.dense_workload([1, 32], [16, 32])
    >>> knobs = {"oc_bn": 16, "k_bn": 4}
    >>> d, w, _ = x86.dense_packed_shapes(wl, knobs)
    >>> x, wt = te.placeholder(d, name="x"), te.placeholder(w, name="w")
    >>> y = te.compute((1, 16), lambda i, j: te.max(x86.dense_packed(x, wt, wl, knobs)[i, j], 0.0), name="relu")
    >>> f = x86.schedule_fused(te.create_prim_func([x, wt, y]), wl, knobs)
    >>> "relu" in f.script() and "parallel" in f.script()
    True
    """
    op = op_of(workload)
    sch = s_tir.Schedule(func)
    anchor = _find_anchor(sch, workload, knobs)
    _inline_producers(sch, anchor)
    epilogue = _fold_epilogue(sch, anchor)
    mine = {sch.get(b).name_hint for b in (anchor, epilogue) if b is not None}
    leftovers = [b for b in _blocks(sch) if sch.get(b).name_hint not in mine]
    name = sch.get(anchor).name_hint
    if len(sch.get_loops(anchor)) != len(sch.get(anchor).iter_vars):
        raise KnobError(
            f"block {name!r} is not in the loop nest its TE compute creates (already scheduled?); "
            "pass the unscheduled function to schedule_fused"
        )
    try:
        _SCHEDULES[op](sch, anchor, epilogue, knobs)
    except s_tir.ScheduleError as err:
        reason = str(err).strip().splitlines()[-1]
        raise KnobError(f"cannot apply the {op} schedule with knobs {knobs} to block {name!r}: {reason}") from None
    lanes = vector_lanes(target)
    for block in leftovers:
        schedule_elementwise(sch, block, lanes)
    return sch.mod["main"]
