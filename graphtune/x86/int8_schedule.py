"""Knob schedule of the int8 conv2d: the fp32 NCHWc template with a tensorized dot product.

As :func:`graphtune.x86.schedule.schedule_conv2d`: threads over the fused ``(n, oc_chunk,
oh_outer)`` (``(n, oh_outer, oc_chunk)`` with ``rows_outer``: each thread reads a band of the
input instead of all of it), a register tile of ``oh_bn x reg_n`` pixels x ``oc_bn`` int32
accumulators written out through the (requantizing) epilogue, the width tile and ``kw``
unrolled. The innermost ``lanes`` output channels x ``dot`` input channels are one instruction
of the knob ``isa`` (:mod:`graphtune.x86.int8_isa`): ``vpmaddwd``, ``vpmaddubsw + vpmaddwd``
(by ones) or ``vpdpbusd`` per pixel and vector of accumulators. An ``oc_bn`` that is no
multiple of the instruction's lanes runs on plain int32 vectors instead (LLVM's code; exact,
slower). The zero-point padding is one parallel pass over the input before the products (the
tensorized loads read it unguarded). The bfloat16 conv2d (``conv2d_bf16``) takes the same
schedule with a bfloat16 instruction (``vdpbf16ps``, AMX ``tdpbf16ps``) and float32 accumulators.

Examples
--------
>>> import graphtune.x86 as x86
>>> from graphtune.ops import conv2d_int8_workload
>>> wl = conv2d_int8_workload([1, 16, 8, 8], [16, 16, 3, 3], padding=[1, 1, 1, 1])
>>> knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 4, "unroll_kw": True, "isa": "avx2"}
>>> "pmadd.wd" in x86.conv2d_int8_func(wl, knobs, {"kind": "llvm", "mcpu": "haswell"}).script()
True
"""

from tvm import s_tir, sym

from . import amx
from .int8_isa import ISAS, tensor_intrin
from .schedule import (
    _domain,
    _epilogue_chain,
    _epilogue_dag,
    _fold_epilogue,
    _try,
    _vectorize_init,
    _write_back,
    schedule_elementwise,
    vectorize_in_registers,
)
from .target import num_threads

__all__ = ["schedule_conv2d_int8", "fold_nc", "fold_flat"]

_BYTES_PER_VECTOR = 32
"""uint8 lanes of the padding pass's vectors."""


def schedule_conv2d_int8(sch: s_tir.Schedule, anchor, epilogue, knobs: dict, lanes: int) -> None:
    """Schedule the int8 NCHWc conv anchor (and its padding block) with ``knobs``.

    ``epilogue`` is the folded elementwise block writing the output (the requantization),
    or None (the tile is then written through a ``cache_write`` block). ``lanes``: the 32-bit
    lanes of one vector register (an output block the instruction does not tile is vectorised
    in pieces of at most that, :func:`graphtune.x86.schedule.vectorize_in_registers`).
    """
    isa = ISAS[knobs["isa"]]
    for pad in sch.get_producers(anchor):
        if not _domain(sch, pad)[1]:
            schedule_elementwise(sch, pad, _BYTES_PER_VECTOR)
    if not isa.general:
        _schedule_amx(sch, anchor, epilogue, knobs)
        return
    data_dtype = "int16" if knobs.get("widen") else isa.data_dtype
    n, oc_chunk, oh, ow, oc_block, ic_chunk, kh, kw, ic_outer, ic_inner = sch.get_loops(anchor)
    oh_outer, oh_inner = sch.split(oh, [None, knobs.get("oh_bn", 1)])
    ow_outer, ow_inner = sch.split(ow, [None, knobs["reg_n"]])
    tensorized = knobs["oc_bn"] % isa.lanes == 0
    threads = (n, oh_outer, oc_chunk) if knobs.get("rows_outer") else (n, oc_chunk, oh_outer)
    tile = (*threads, ow_outer, ic_chunk, kh, ic_outer, kw)
    if tensorized:
        vectors, instruction_lanes = sch.split(oc_block, [None, isa.lanes])
        sch.reorder(*tile, oh_inner, ow_inner, vectors, instruction_lanes, ic_inner)
    else:
        sch.reorder(*tile, ic_inner, oh_inner, ow_inner, oc_block)
    _write_back(sch, anchor, epilogue, ow_outer)
    sch.parallel(sch.fuse(*threads))
    for loop in (oh_inner, ow_inner, vectors if tensorized else ic_inner):
        sch.unroll(loop)
    if knobs["unroll_kw"]:
        sch.unroll(kw)
    if not tensorized:
        vectorize_in_registers(sch, oc_block, lanes)
    _vectorize_init(sch, anchor, ic_chunk, ow_outer)
    if tensorized:
        sch.tensorize(instruction_lanes, tensor_intrin(isa.name, data_dtype))


def _schedule_amx(sch: s_tir.Schedule, anchor, epilogue, knobs: dict) -> None:
    """isa ``amx``: threads over ``(n, oc_chunk, oh_outer)``, each iteration a band of output
    rows (:func:`_rows_per_task`) that first loads the tile configuration
    (:data:`graphtune.x86.amx.CONFIG_ATTR`); per ``reg_n``-pixel register tile of ``oc_bn``
    channels, the whole reduction on tiles (:func:`graphtune.x86.amx.reduction_intrin`, which
    zeroes them), the epilogue written out from the accumulator. ``pixel_tiles`` input tiles of
    ``reg_n`` pixels make one register tile; a ``flat`` conv's map is one row of flat pixels
    (:func:`graphtune.x86.conv2d_int8.flat_row`, its taps ``kh * row`` pixels apart), its
    register tiles written to the accumulator and cut out of it after (:func:`fold_flat`)."""
    n, oc_chunk, oh, ow, oc_block, ic_chunk, kh, kw, ic_outer, ic_inner = sch.get_loops(anchor)
    rows, k, width = knobs["reg_n"], knobs["ic_bn"], knobs["oc_bn"]
    stacked, columns = knobs.get("pixel_tiles", 1), amx.tile_columns(knobs["oc_bn"])
    steps = tuple(int(sch.get(loop).extent) for loop in (ic_chunk, kh, kw))
    isa = ISAS[knobs["isa"]]
    flat = bool(knobs.get("flat"))
    element = isa.element
    stride = 1 if flat else _pixel_stride(sch.get(anchor), isa.data_dtype)
    extents = [int(sch.get(loop).extent) for loop in (n, oc_chunk, oh)]
    band = _rows_per_task(extents)
    oh_outer, oh_inner = sch.split(oh, [None, band])
    ow_outer, ow_inner = sch.split(ow, [None, rows * stacked])
    if width > columns:
        tiles, lanes = sch.split(oc_block, [None, columns])
        first = tiles
        sch.reorder(n, oc_chunk, oh_outer, oh_inner, ow_outer, tiles, ow_inner, lanes, ic_chunk, kh, kw,
                    ic_outer, ic_inner)
    else:  # one tile: no extent-1 loop (the intrinsic's description has none)
        first = ow_inner
        sch.reorder(n, oc_chunk, oh_outer, oh_inner, ow_outer, ow_inner, oc_block, ic_chunk, kh, kw,
                    ic_outer, ic_inner)
    _write_back(sch, anchor, epilogue, ow_outer)
    threads = sch.fuse(n, oc_chunk, oh_outer)
    sch.parallel(threads)
    sch.annotate(threads, amx.CONFIG_ATTR, [rows, k, width * stacked, steps[2], element, columns])
    init = sch.decompose_reduction(anchor, first)
    row = _flat_row(sch.get(anchor), isa.data_dtype) if flat else 0
    sch.tensorize(first, amx.reduction_intrin(rows, k, width // columns, steps, stride, element, row, stacked,
                                              columns))
    if width > columns:
        init_tiles, init_rows, init_lanes = sch.get_loops(init)[-3:]
        sch.reorder(init_rows, init_tiles, init_lanes)
        sch.fuse(init_tiles, init_lanes)
    else:
        init_rows = sch.get_loops(init)[-2]
    sch.tensorize(init_rows, amx.init_intrin(rows * stacked, width, element))


TASKS_PER_THREAD = 16
"""Parallel iterations per runtime thread an AMX kernel aims for (:func:`_rows_per_task`)."""


def _rows_per_task(extents: list[int]) -> int:
    """Output rows one parallel iteration of an AMX kernel computes (a divisor of the height,
    ``extents`` = ``(n, oc_chunks, oh)``): the most that still leave every runtime thread
    :data:`TASKS_PER_THREAD` iterations. Each iteration loads the tile configuration
    (``ldtilecfg``, about 200 ns) once."""
    batch, chunks, height = extents
    want = min(batch * chunks * height, TASKS_PER_THREAD * num_threads())
    return max(d for d in range(1, height + 1) if height % d == 0 and batch * chunks * (height // d) >= want)


def _pixel_stride(block: s_tir.SBlock, data_dtype: str) -> int:
    """The conv's stride along W: the factor of the output column ``ow`` (block axis 3) in the
    column the block reads of its ``data_dtype`` data (``ow * stride + kw``)."""
    ow = block.iter_vars[3].var
    data = next(r for r in block.reads if r.source.dtype == data_dtype and len(r.region) == 5)
    return int(sym.detect_linear_equation(data.region[3].min, [ow])[0])


def _flat_row(block: s_tir.SBlock, data_dtype: str) -> int:
    """A flat conv's pixels per row of its flattened map (:func:`graphtune.x86.conv2d_int8.flat_row`):
    the factor of ``kh`` (block axis 6) in the flat pixel the block reads of its ``data_dtype``
    data (``q + kh * row + kw``)."""
    kh = block.iter_vars[6].var
    data = next(r for r in block.reads if r.source.dtype == data_dtype and len(r.region) == 4)
    return int(sym.detect_linear_equation(data.region[2].min, [kh])[0])


def fold_flat(sch: s_tir.Schedule, anchor, knobs: dict):
    """Fold the epilogue of a bfloat16 conv (:func:`graphtune.x86.schedule._fold_epilogue`); for
    one over its flattened map (knob ``flat``), the block cutting the map out of the accumulator
    (``conv2d_bf16_cut``) and the elementwise chain after it into one block of their own, and
    return None: the accumulator is written out whole (TVM cannot place a block reading it at
    ``y * row + x`` under the register tile), that block runs after the conv."""
    if not knobs.get("flat"):
        return _fold_epilogue(sch, anchor)
    consumers = sch.get_consumers(anchor)
    if len(consumers) == 1:
        cut = consumers[0]
        for block in [cut, *(_epilogue_dag(sch, cut) or _epilogue_chain(sch, cut))][:-1]:
            if not _try(sch.compute_inline, block):
                break
    return None


def fold_nc(sch: s_tir.Schedule, anchor, knobs: dict):
    """Fold an int8 dense's epilogue: its 1x1 map's (:func:`graphtune.x86.schedule._fold_epilogue`),
    then, reverse-inlined into it one after the other, the reshape to ``NC`` and the elementwise
    ops after it (while each is its producer's only reader), so that the register tile is written
    out as the ``NC`` output; return the block writing it.

    Examples
    --------
    >>> import graphtune.x86 as x86
    >>> from graphtune.ops import dense_int8_workload
    >>> wl = dense_int8_workload([1, 16], [8, 16], out_dtype="float32")
    >>> haswell = {"kind": "llvm", "mcpu": "haswell"}
    >>> f = x86.conv2d_int8_func(wl, {"ic_bn": 16, "oc_bn": 8, "isa": "avx2"}, haswell)
    >>> from graphtune.measure.build import arg_specs
    >>> 'T.sblock("T_reshape")' in f.script(), arg_specs(f)[-1]  # the NC output, written by the epilogue
    (False, [[1, 8], 'float32'])
    """
    epilogue = _fold_epilogue(sch, anchor)
    if epilogue is None:
        return None
    while True:
        consumers = sch.get_consumers(epilogue)
        if len(consumers) != 1 or not _try(sch.reverse_compute_inline, consumers[0]):
            return epilogue
