"""Knob schedules of conv2d (also group and transposed), depthwise and dense, and their primitives.

Each op's :class:`~graphtune.x86.specs.OpSpec` names one of
:func:`schedule_conv2d`, :func:`schedule_depthwise`, :func:`schedule_dense`;
:func:`graphtune.x86.schedule_fused` finds the op's anchor block in a
(fused) PrimFunc, inlines its padding, folds its elementwise epilogue and
calls it. The schedules follow the old x86 template: parallel over the
fused outer loops, a register tile of ``oh_bn x reg_n x oc_bn``
accumulators (``oc_bn`` vectorised, the width tile and ``kw`` unrolled),
the epilogue computed from the tile before it is written out.

Examples
--------
>>> from graphtune.x86.specs import spec_of
>>> [spec_of(op).schedule.__name__ for op in ("conv2d", "depthwise_conv2d", "dense")]
['schedule_conv2d', 'schedule_depthwise', 'schedule_dense']
"""

from tvm import s_tir, tirx

__all__ = ["schedule_conv2d", "fold_conv2d", "schedule_depthwise", "schedule_dense", "schedule_elementwise",
           "vectorize_in_registers", "VECTOR_SPLIT_ATTR"]

VECTOR_SPLIT_ATTR = "graphtune.vector_split"
"""Block annotation (an int ``r``) asking :func:`schedule_elementwise` to split the innermost
loop by ``r`` and vectorise that part: a compute whose innermost index ``w`` reads
``w // r`` (a bilinear resize by an integer factor) then reads one element per vector."""

_REDUCE = tirx.IterVar.CommReduce


def _domain(sch: s_tir.Schedule, block) -> tuple[list[int], list[int]]:
    spatial: list[int] = []
    reduce: list[int] = []
    for iv in sch.get(block).iter_vars:
        (reduce if iv.iter_type == _REDUCE else spatial).append(int(iv.dom.extent))
    return spatial, reduce


def _blocks(sch: s_tir.Schedule) -> list:
    return list(sch.get_child_blocks(sch.get_sblock("root")))


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
    chain: list = []
    current = anchor
    while True:
        consumers = sch.get_consumers(current)
        if len(consumers) != 1 or not _elementwise_within(sch, consumers[0], current, spatial):
            return chain
        chain.append(consumers[0])
        current = consumers[0]


def _elementwise_within(sch: s_tir.Schedule, block, producer, spatial: list[int]) -> bool:
    """Whether ``block`` is elementwise over (a corner of) the ``spatial`` domain: no reduction,
    the same rank, and either the same extents or smaller ones read at its own indices from
    ``producer`` (an int8 conv computed over a padded width writes only the real columns)."""
    own, reduce = _domain(sch, block)
    if reduce or len(own) != len(spatial) or any(o > s for o, s in zip(own, spatial)):
        return False
    if own == spatial:
        return True
    written = sch.get(producer).writes[0].source
    axes = [iv.var for iv in sch.get(block).iter_vars]
    return all(len(r.region) == len(axes)
               and all(rng.min.same_as(axis) and int(rng.extent) == 1 for rng, axis in zip(r.region, axes))
               for r in sch.get(block).reads if r.source.same_as(written))


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
            if name not in found and _elementwise_within(sch, block, current, spatial):
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


def vectorize_in_registers(sch: s_tir.Schedule, loop, lanes: int) -> None:
    """Vectorise a channel-block ``loop``; one longer than a vector register (``lanes`` floats)
    whose extent is no power of two in pieces of the largest power of two dividing it (at least
    4), the pieces unrolled.

    LLVM compiles a vector of 24 floats on 8-lane AVX2 (or 48 on AVX-512) 3-18x slower than three
    vectors of 8 (16) (``docs/candidates.md``, "Blocks of several vectors"); a block within one
    register (12 of 16 lanes) stays one vector, and one no such piece divides stays as it is.

    Examples
    --------
    >>> from tvm import te
    >>> a = te.placeholder((24,), name="a")
    >>> b = te.compute((24,), lambda i: a[i] * 2.0, name="b")
    >>> sch = s_tir.Schedule(te.create_prim_func([a, b]))
    >>> (block,) = sch.get_loops(sch.get_sblock("b"))
    >>> vectorize_in_registers(sch, block, lanes=8)
    >>> [int(sch.get(loop).extent) for loop in sch.get_loops(sch.get_sblock("b"))]
    [3, 8]
    """
    extent = int(sch.get(loop).extent)
    piece = extent & -extent
    if extent <= lanes or piece == extent or piece < 4:
        sch.vectorize(loop)
        return
    outer, inner = sch.split(loop, [None, piece])
    sch.vectorize(inner)
    sch.unroll(outer)


def _unroll_tile(sch: s_tir.Schedule, unrolled: tuple, kw, knobs: dict) -> None:
    """Unroll the ``unrolled`` register-tile loops, and ``kw`` when ``unroll_kw``."""
    for loop in unrolled:
        sch.unroll(loop)
    if knobs["unroll_kw"]:
        sch.unroll(kw)


def fold_conv2d(sch: s_tir.Schedule, anchor, knobs: dict):
    """The epilogue fold of a conv2d: :func:`_fold_epilogue`, or for a Winograd conv the output
    transform with the epilogue inlined into it (:func:`_fold_winograd`).

    Examples
    --------
    >>> from tvm import te
    >>> import graphtune.x86 as x86
    >>> wl = x86.conv2d_workload([1, 16, 4, 4], [16, 16, 3, 3], padding=[1, 1, 1, 1])
    >>> knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 4, "unroll_kw": False, "winograd": 2}
    >>> d, k, _ = x86.kernel_shapes(wl, knobs)
    >>> x, u = te.placeholder(d, name="x"), te.placeholder(k, name="u")
    >>> conv = x86.conv2d_nchwc(x, u, wl, knobs)
    >>> y = te.compute(conv.shape, lambda *i: te.max(conv(*i), 0.0), name="relu")
    >>> sch = s_tir.Schedule(te.create_prim_func([x, u, y]))
    >>> sch.get(fold_conv2d(sch, sch.get_sblock("winograd_gemm"), knobs)).name_hint
    'relu'
    """
    return _fold_winograd(sch, anchor) if "winograd" in knobs else _fold_epilogue(sch, anchor)


def schedule_conv2d(sch: s_tir.Schedule, anchor, epilogue, knobs: dict, lanes: int) -> None:
    """Schedule the NCHWc conv anchor (conv2d, group conv2d, conv2d_transpose) with ``knobs``.

    ``epilogue`` is the folded elementwise block writing the output, or None
    (the tile is then written through a ``cache_write`` block); for a Winograd conv the
    block computing the output transform and the epilogue (:func:`fold_conv2d`). ``lanes``:
    the floats of one vector register (:func:`vectorize_in_registers`).
    """
    if "oc_tile" in knobs:
        (_schedule_conv2d_flat if "flat" in knobs else _schedule_conv2d_width)(sch, anchor, epilogue, knobs)
        return
    if "winograd" in knobs:
        _schedule_conv2d_winograd(sch, anchor, epilogue, knobs)
        return
    if "flat" in knobs:
        _schedule_conv2d_pixels(sch, anchor, epilogue, knobs, lanes)
        return
    n, oc_chunk, oh, ow, oc_block, ic_chunk, kh, kw, ic_block = sch.get_loops(anchor)
    oh_outer, oh_inner = sch.split(oh, [None, knobs.get("oh_bn", 1)])
    ow_outer, ow_inner = sch.split(ow, [None, knobs["reg_n"]])
    # threads split the parallel loop into contiguous ranges: rows first gives each one a band of
    # rows (a share of the input), channels first a share of the output channels (of the weights)
    parallel = (oh_outer, oc_chunk) if knobs.get("rows_outer") else (oc_chunk, oh_outer)
    sch.reorder(n, *parallel, ow_outer, ic_chunk, kh, ic_block, kw, oh_inner, ow_inner, oc_block)
    _write_back(sch, anchor, epilogue, ow_outer)
    sch.parallel(sch.fuse(n, *parallel))
    vectorize_in_registers(sch, oc_block, lanes)
    _unroll_tile(sch, (ow_inner, oh_inner), kw, knobs)
    if knobs.get("shuffle"):  # a constant lane pattern per input: one permute (x86.shuffles)
        sch.unroll(ic_block)
    _vectorize_init(sch, anchor, ic_chunk, ow_outer)


def _schedule_conv2d_pixels(sch: s_tir.Schedule, anchor, epilogue, knobs: dict, lanes: int) -> None:
    """Blocked unpadded 1x1 conv2d over its flattened pixels (``flat`` 1): ``reg_n`` pixels x the
    channel block as the register tile; the threads share pixel tiles (``rows_outer``) or
    channel blocks, as in :func:`schedule_conv2d`."""
    epilogue = _flatten_pixels(sch, anchor, epilogue)
    n, oc_chunk, pixel, oc_block, ic_chunk, kh, kw, ic_block = sch.get_loops(anchor)
    pixel_outer, pixel_inner = sch.split(pixel, [None, knobs["reg_n"]])
    parallel = (pixel_outer, oc_chunk) if knobs.get("rows_outer") else (oc_chunk, pixel_outer)
    sch.reorder(n, *parallel, ic_chunk, kh, ic_block, kw, pixel_inner, oc_block)
    _write_back(sch, anchor, epilogue, parallel[1])
    outer = sch.fuse(n, *parallel)
    sch.parallel(outer)
    vectorize_in_registers(sch, oc_block, lanes)
    _unroll_tile(sch, (pixel_inner,), kw, knobs)
    _vectorize_init(sch, anchor, ic_chunk, outer)


def _flatten_pixels(sch: s_tir.Schedule, anchor, epilogue):
    """Iterate an unpadded 1x1 conv anchor (and the block writing its output, a ``cache_write``
    when ``epilogue`` is None; returned) by pixel ``oh * OW + ow`` instead of by row and column;
    the output keeps its shape."""
    if epilogue is None:
        epilogue = sch.cache_write(anchor, 0, "local")
    width = int(sch.get(sch.get_loops(anchor)[3]).extent)

    def pixels(n, c, h, w, b):
        return n, c, h * width + w, b

    sch.transform_layout(anchor, ("write", 0), pixels)
    sch.transform_block_layout(epilogue, pixels)
    sch.transform_block_layout(anchor, lambda n, c, h, w, b, ic, kh, kw, ib:
                               (*pixels(n, c, h, w, b), ic, kh, kw, ib))
    return epilogue


def _schedule_conv2d_width(sch: s_tir.Schedule, anchor, epilogue, knobs: dict) -> None:
    """Plain-NCHW conv2d (blocks of 1): the whole output width vectorised, ``oc_tile`` output
    channels x ``oh_bn`` rows unrolled as the register tile, kernel taps outside it."""
    n, oc_chunk, oh, ow, oc_block, ic_chunk, kh, kw, ic_block = sch.get_loops(anchor)
    oc_outer, oc_inner = sch.split(oc_chunk, [None, knobs["oc_tile"]])
    oh_outer, oh_inner = sch.split(oh, [None, knobs.get("oh_bn", 1)])
    sch.reorder(n, oc_outer, oh_outer, ic_chunk, kh, ic_block, kw, oc_inner, oh_inner, oc_block, ow)
    _write_back(sch, anchor, epilogue, oh_outer)  # its innermost loop is the width (unit loops dropped)
    outer = sch.fuse(n, oc_outer, oh_outer)
    sch.parallel(outer)
    sch.vectorize(ow)
    _unroll_tile(sch, (oc_inner, oh_inner), kw, knobs)
    _vectorize_init(sch, anchor, ic_chunk, outer)


def _schedule_conv2d_flat(sch: s_tir.Schedule, anchor, epilogue, knobs: dict) -> None:
    """Plain-NCHW unpadded 1x1 conv2d over its flattened pixels: ``reg_n`` pixels (vectors of
    ``flat``) x ``oc_tile`` output channels as the register tile, threads over both.

    The anchor, its register tile and the block writing it out iterate (and index the tile) by
    pixel ``oh * OW + ow``, so a tile may span rows; the output keeps its shape.
    """
    epilogue = _flatten_pixels(sch, anchor, epilogue)
    n, oc_chunk, pixel, oc_block, ic_chunk, kh, kw, ic_block = sch.get_loops(anchor)
    oc_outer, oc_inner = sch.split(oc_chunk, [None, knobs["oc_tile"]])
    pixel_outer, vectors, lanes = sch.split(pixel, [None, knobs["reg_n"] // knobs["flat"], knobs["flat"]])
    sch.reorder(n, oc_outer, pixel_outer, ic_chunk, kh, ic_block, kw, oc_inner, vectors, oc_block, lanes)
    _write_back(sch, anchor, epilogue, pixel_outer)
    outer = sch.fuse(n, oc_outer, pixel_outer)
    sch.parallel(outer)
    sch.vectorize(lanes)
    _unroll_tile(sch, (vectors, oc_inner), kw, knobs)
    _vectorize_init(sch, anchor, ic_chunk, outer)


def _fold_winograd(sch: s_tir.Schedule, anchor):
    """Inline a Winograd conv's output transform and the elementwise epilogue after it into one
    block; return it.

    The returned block computes each output element from the products
    (``winograd_gemm``) through the transform and the epilogue (bias, relu,
    residual add...). Without a foldable epilogue it is the output transform itself.
    """
    (output,) = sch.get_consumers(anchor)
    members = _epilogue_dag(sch, output)
    if not members:
        return output
    for block in [output, *members[:-1]]:
        if not _try(sch.compute_inline, block):
            return block  # it holds what was inlined so far; the rest are left-overs
    return members[-1]


def _schedule_conv2d_winograd(sch: s_tir.Schedule, anchor, epilogue, knobs: dict) -> None:
    """Schedule the three stages of a Winograd conv (``epilogue``: from :func:`_fold_winograd`).

    - input transform: threads over (input channel block, tile), the ``a x a``
      positions unrolled, the channel block vectorised;
    - products: threads over (position, output channel block), ``reg_n`` tiles x
      ``oc_bn`` accumulators in registers, as :func:`schedule_conv2d`;
    - output transform with the epilogue: threads over (output channel block, tile
      row), the ``m x m`` tile unrolled, the channel block vectorised.
    """
    m = knobs["winograd"]
    (inputs,) = [b for b in sch.get_producers(anchor) if sch.get(b).name_hint.startswith("winograd_input")]
    eps, nu, chunk, tile, lanes = sch.get_loops(inputs)
    sch.reorder(chunk, tile, eps, nu, lanes)
    sch.parallel(sch.fuse(chunk, tile))
    sch.unroll(eps)
    sch.unroll(nu)
    sch.vectorize(lanes)

    eps, nu, oc, tile, lanes, ic_chunk, ic_block = sch.get_loops(anchor)
    tile_outer, tile_inner = sch.split(tile, [None, knobs["reg_n"]])
    sch.reorder(eps, nu, oc, tile_outer, ic_chunk, ic_block, tile_inner, lanes)
    _write_back(sch, anchor, None, tile_outer)
    sch.parallel(sch.fuse(eps, nu, oc))
    sch.vectorize(lanes)
    sch.unroll(tile_inner)
    _vectorize_init(sch, anchor, ic_chunk, tile_outer)

    n, oc, y, x, lanes = sch.get_loops(epilogue)
    y_outer, y_inner = sch.split(y, [None, m])
    x_outer, x_inner = sch.split(x, [None, m])
    sch.reorder(n, oc, y_outer, x_outer, y_inner, x_inner, lanes)
    sch.parallel(sch.fuse(n, oc, y_outer))
    sch.unroll(y_inner)
    sch.unroll(x_inner)
    sch.vectorize(lanes)


def schedule_depthwise(sch: s_tir.Schedule, anchor, epilogue, knobs: dict, lanes: int) -> None:
    """Schedule the depthwise NCHWc anchor with ``knobs`` (see :func:`schedule_conv2d`)."""
    if "c_tile" in knobs:
        _schedule_depthwise_width(sch, anchor, epilogue, knobs)
        return
    n, c_chunk, oh, ow, c_block, kh, kw = sch.get_loops(anchor)
    ow_outer, ow_inner = sch.split(ow, [None, knobs["reg_n"]])
    sch.reorder(n, c_chunk, oh, ow_outer, kh, kw, ow_inner, c_block)
    _write_back(sch, anchor, epilogue, ow_outer)
    sch.parallel(sch.fuse(n, c_chunk, oh))
    vectorize_in_registers(sch, c_block, lanes)
    sch.unroll(ow_inner)
    sch.unroll(kw)
    _vectorize_init(sch, anchor, kh, ow_outer)


def _schedule_depthwise_width(sch: s_tir.Schedule, anchor, epilogue, knobs: dict) -> None:
    """Plain-NCHW depthwise conv of stride 1: the whole output width vectorised, ``c_tile``
    channels x ``oh_bn`` rows unrolled as the register tile. The padding block (kept by
    :func:`graphtune.x86.schedule_fused` for this schedule) is computed per tile into the rows
    the tile reads, so the vector loads of the taps need no guard."""
    n, c_chunk, oh, ow, c_block, kh, kw = sch.get_loops(anchor)
    c_outer, c_inner = sch.split(c_chunk, [None, knobs["c_tile"]])
    oh_outer, oh_inner = sch.split(oh, [None, knobs.get("oh_bn", 1)])
    sch.reorder(n, c_outer, oh_outer, kh, kw, c_inner, oh_inner, c_block, ow)
    _write_back(sch, anchor, epilogue, oh_outer)
    outer = sch.fuse(n, c_outer, oh_outer)
    sch.parallel(outer)
    for pad in sch.get_producers(anchor):
        if _try(sch.compute_at, pad, outer):
            _vectorize_below(sch, pad, outer)
        else:  # read through the guard: slower, never wrong
            _try(sch.compute_inline, pad)
    sch.vectorize(ow)
    for loop in (c_inner, oh_inner, kw):  # the register tile and the taps
        sch.unroll(loop)
    _vectorize_init(sch, anchor, kh, outer)


def schedule_dense(sch: s_tir.Schedule, anchor, epilogue, knobs: dict, lanes: int) -> None:
    """Schedule the packed dense anchor with ``knobs`` (rows tiled along the data's dim -2; with
    ``rows_inner`` the row tiles inside each output-feature block)."""
    *outer, n, m, k = sch.get_loops(anchor)  # N-D data: the row tile runs along its last leading dim
    n_outer, n_inner = sch.split(n, [None, knobs.get("n_bn", 1)])
    m_outer, m_inner = sch.split(m, [None, knobs["oc_bn"]])
    k_outer, k_inner = sch.split(k, [None, knobs["k_bn"]])
    # a row tile meets every weight block while in L1, or (rows_inner) a weight block every row tile
    first, second = (m_outer, n_outer) if knobs.get("rows_inner") else (n_outer, m_outer)
    sch.reorder(*outer, first, second, k_outer, k_inner, n_inner, m_inner)
    _write_back(sch, anchor, epilogue, second)
    tiles = sch.fuse(*outer, first, second)
    sch.parallel(tiles)
    vectorize_in_registers(sch, m_inner, lanes)
    sch.unroll(n_inner)
    sch.unroll(k_inner)
    _vectorize_init(sch, anchor, k_outer, tiles)


def schedule_elementwise(sch: s_tir.Schedule, block, lanes: int) -> None:
    """Parallel + vectorised schedule for a spatial block at the root (transforms, leftovers).

    The loops but the last two (or one) are fused and parallelised; the
    innermost is vectorised whole when short (``<= 4 * lanes``), else split by
    its largest divisor ``<= lanes`` first. A block annotated with
    :data:`VECTOR_SPLIT_ATTR` ``r`` has its innermost loop split by ``r`` instead (and ``r``
    by its largest divisor ``<= 4 * lanes`` when longer).

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
    split = sch.get(block).annotations.get(VECTOR_SPLIT_ATTR)
    if split is not None and extent % int(split) == 0 and int(split) > 1:
        _, inner = sch.split(inner, [None, int(split)])
        extent = int(split)
        if extent > 4 * lanes:
            factor = max(d for d in range(1, 4 * lanes + 1) if extent % d == 0)
            _, inner = sch.split(inner, [None, factor])
    elif extent > 4 * lanes:
        factor = max(d for d in range(1, lanes + 1) if extent % d == 0)
        _, inner = sch.split(inner, [None, factor])
    outer = loops[:-2] if len(loops) > 2 else loops[:-1]
    if outer:
        sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    if int(sch.get(inner).extent) > 1:
        sch.vectorize(inner)
