"""Schedule knobs: their meaning per op and their validation (one :class:`KnobSpace` per op family).

Knob dicts are JSON-able and fix both the schedule and the layouts:

- conv2d: ``ic_bn`` (input channel block, divides C), ``oc_bn`` (output channel
  block, divides O; vectorised), ``reg_n`` (output-width tile kept in
  registers, 1..OW; a tile that does not divide OW gets a guarded tail),
  ``unroll_kw`` (bool: unroll the kernel-width loop) and optional ``oh_bn``
  (output rows per register tile, 1..OH, default 1; useful for 1x1 convs) and
  ``rows_outer`` (bool, default False: threads share the output rows instead of the output
  channel blocks, so each reads a band of the input rather than all of it; candidates set it
  on 1x1 convs whose input is their largest operand, :func:`graphtune.x86.tiles._rows_outer`).
  Layouts ``NCHW{ic_bn}c -> NCHW{oc_bn}c``, kernel ``OIHW{ic_bn}i{oc_bn}o``.
  Optional ``oc_tile`` (plain ``NCHW`` only: ``ic_bn == oc_bn == 1``, stride 1):
  the output *width* is vectorised instead of the channel block (``reg_n``
  must then be the whole width) and ``oc_tile`` output channels (divides O)
  times ``oh_bn`` rows are the register tile — for channel counts no vector
  block divides (ShuffleNetV2's 58, 116, 232). With ``flat`` (an int, the
  vector length; unpadded 1x1 convs only) the output rows and columns are one
  flattened pixel axis instead: ``reg_n`` pixels (a multiple of ``flat``
  dividing ``OH * OW``) times ``oc_tile`` channels are the register tile, so a
  28x28 map is 49 whole vectors rather than 28 rows of a 28-lane one. On a blocked
  layout ``flat`` is 1 (the channel block stays the vector): ``reg_n`` counts pixels of
  the flattened map (1..OH*OW, a tail is guarded), so a 7x7 map takes tiles of 5 or 6
  pixels where its rows offer only 1 or 7.
  Optional ``winograd`` (2 or 4; 3x3 conv2d of stride and dilation 1 only): the
  conv runs as Winograd F(m x m, 3 x 3) (:mod:`graphtune.x86.winograd`), ``reg_n``
  then counts ``m x m`` output tiles (1..tiles) in the register tile of its
  matrix products, ``unroll_kw`` must be False and ``oh_bn`` / ``rows_outer``
  are not used; the kernel is packed ``[a, a, O/oc_bn, C/ic_bn, ic_bn, oc_bn]``
  (``a = m + 2``), the activation layouts are the direct conv's.
- conv2d_transpose: conv2d's knobs and layouts (``unroll_kw`` unrolls the
  column taps); the kernel is packed per output phase (see
  :mod:`graphtune.x86.conv2d_transpose`).
- depthwise_conv2d: ``bn`` (channel block, divides C; vectorised) and
  ``reg_n``. Layouts ``NCHW{bn}c -> NCHW{bn}c``, kernel ``OIHW1i{bn}o``.
  Optional ``c_tile`` (plain ``NCHW`` only: ``bn == 1``, stride 1): the output
  *width* is vectorised instead of the channel block (``reg_n`` must then be
  the whole width), ``c_tile`` channels (divides C) times ``oh_bn`` rows
  (optional, default 1) are the register tile, and the padded input rows a tile
  reads are copied next to it (no guarded loads) — for channel counts no vector
  block divides (ShuffleNetV2's 58, 116).
- group_conv2d: the conv2d knobs, with the block rules of
  :mod:`graphtune.x86.groups` (``oc_bn`` inside one group or spanning whole
  groups; ``ic_bn`` divides the input channels of the block's groups).
  Layouts ``NCHW{ic_bn}c -> NCHW{oc_bn}c``.
- conv2d_int8: conv2d's ``ic_bn``, ``oc_bn``, ``reg_n``, ``unroll_kw``, optional ``oh_bn`` and
  ``rows_outer``, and
  ``isa`` (:data:`graphtune.x86.int8_isa.ISAS`: ``avx2``, ``avx2ubs``, ``avx512bw``,
  ``avx512ubs``, ``avx512vnni256``, ``avx512vnni``, ``amx``), the exact dot-product instruction
  (``amx``: undilated convs, ``reg_n`` <= 16 pixels, ``ic_bn`` <= 64, ``oc_bn`` a multiple of 16
  or of 8 (accumulator tiles of 8 channels, :func:`graphtune.x86.amx.tile_columns`), no
  ``oh_bn`` / ``rows_outer``; :mod:`graphtune.x86.amx`): ``ic_bn`` must be a multiple
  of its ``dot`` (2 or 4 channels per int32 lane); the ``ubs`` ones (``vpmaddubsw``) need the
  workload's ``weight_pair_max`` <= 128 (:func:`graphtune.x86.int8_isa.check_exact`); ``oh_bn``
  divides the output height; a ``reg_n`` that does not divide the output width makes the kernel
  compute whole tiles over a padded width (:func:`graphtune.x86.conv2d_int8.computed_width`:
  no guarded tail in a tensorized tile) and write the real one;
  optional ``widen`` (bool, ``vpmaddwd`` only): the padding pass writes the activations as int16,
  so that the products broadcast them straight from memory instead of widening each pair; an
  ``oc_bn`` that is a multiple of its ``lanes`` runs on it, any other ``oc_bn`` on plain int32
  vector code (exact, slower). Layouts ``NCHW{ic_bn}c ->
  NCHW{oc_bn}c`` (uint8), kernel ``OIHW{ic_bn/dot}i{oc_bn}o{dot}i``.
- conv2d_bf16: conv2d_int8's knobs with a bfloat16 ``isa`` (``avx512bf16``, ``avx512bf16_256``,
  ``amxbf16``) on bfloat16 bits (``uint16``) and float32 accumulators; with ``amxbf16``
  optional ``pixel_tiles`` (1 to 6 / the block's accumulator tiles: input tiles of ``reg_n``
  pixels stacked under each kernel slice, ``reg_n * pixel_tiles`` pixels per register tile) and
  ``flat`` (1, stride 1: the conv over its map flattened at its padded width,
  :func:`graphtune.x86.conv2d_int8.flat_row`; ``reg_n`` counts flat pixels).
- group_conv2d_int8: conv2d_int8's knobs with group_conv2d's block rules (``ic_bn`` divides
  the span of the output block's groups).
- depthwise_conv2d_int8: depthwise_conv2d's ``bn`` and ``reg_n`` (no ``c_tile``); layouts
  ``NCHW{bn}c`` (uint8), kernel ``OIHW1i{bn}o`` (int8).
- dense_int8: conv2d_int8's ``ic_bn`` (a multiple of the ``isa``'s ``dot`` dividing K), ``oc_bn``
  (divides M), ``isa`` and optional ``widen``: the conv2d_int8 kernel on a 1x1 map
  (:mod:`graphtune.x86.dense_int8`; ``reg_n`` 1). Layouts ``NC -> NC`` whatever the blocks
  (``NC`` is ``NCHW{ic_bn}c`` of a 1x1 map in the same bytes).
- dense: ``oc_bn`` (output-feature block, divides M; vectorised, the weight is
  packed as ``[M // oc_bn, K, oc_bn]``) and ``k_bn`` (reduction tile unrolled
  inside, divides K), optional ``n_bn`` (rows per register tile along the
  data's dim -2, 1..that extent, default 1; the other leading dims are
  parallel loops) and ``rows_inner`` (bool, default False: the row tiles run inside each
  output-feature block, so that the block's weights stay in cache while every row tile
  passes them, instead of every block inside each row tile — a weight larger than the
  caches is then read once instead of once per row tile). Layouts ``NC -> NC``
  for 2-D data; rank-3/4 data (token MLPs) stays in its own plain layout,
  ``NCHW -> NCHW`` in graphtune's names.

Examples
--------
>>> from graphtune.ops import Op, conv2d_workload
>>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> CONV_KNOBS.check(Op.CONV2D, wl, {"ic_bn": 8, "oc_bn": 16, "reg_n": 14, "unroll_kw": True})["ic_bn"]
8
"""

from dataclasses import dataclass
from typing import Callable

from ..errors import KnobError
from ..ops import BF16_OPS, Op, check_workload, output_shape
from .amx import MAX_K, MAX_ROWS, MAX_TILES, accumulator_tiles
from .groups import check_group_blocks, group_sizes, span, spans_whole_groups
from .int8_isa import ISAS, check_exact
from .target import TargetLike, vector_lanes
from .winograd import WINOGRAD_TILES, winograd_fits, winograd_tiles

__all__ = ["KnobSpace", "CONV_KNOBS", "GROUP_KNOBS", "DEPTHWISE_KNOBS", "DENSE_KNOBS", "INT8_KNOBS",
           "BF16_KNOBS", "DENSE_BF16_KNOBS", "BLOCKED_DEPTHWISE_KNOBS", "DENSE_INT8_KNOBS", "divisors",
           "register_budget", "accumulator_budget"]


def divisors(n: int, cap: int | None = None) -> list:
    """Divisors of ``n`` in increasing order, optionally only those ``<= cap``.

    Examples
    --------
    >>> divisors(12), divisors(64, cap=16)
    ([1, 2, 3, 4, 6, 12], [1, 2, 4, 8, 16])
    """
    return [d for d in range(1, (n if cap is None else min(n, cap)) + 1) if n % d == 0]


def register_budget(target: TargetLike = None) -> int:
    """Vector registers a register tile may use for accumulators on ``target``.

    32 architectural registers with AVX-512 (16 otherwise), minus 4 for the
    broadcast input and the kernel vectors.

    Examples
    --------
    >>> register_budget({"kind": "llvm", "mcpu": "haswell"})
    12
    """
    return _registers(target) - 4


def accumulator_budget(target: TargetLike, vectors: int) -> int:
    """Accumulator registers a register tile of ``vectors`` output vectors per pixel may use on
    ``target``: :func:`register_budget`, and no more than leave one register for each of the
    tile's kernel vectors (every pixel of the tile reuses them) and one for the broadcast input.
    A tile over that makes LLVM spill accumulators inside the reduction loop (blocks of four
    vectors x 7 pixels on AVX-512; ``docs/candidates.md``, "Registers of a tile").

    Examples
    --------
    >>> avx512 = {"kind": "llvm", "mcpu": "skylake-avx512"}
    >>> accumulator_budget(avx512, 2), accumulator_budget(avx512, 4)
    (28, 27)
    >>> accumulator_budget({"kind": "llvm", "mcpu": "haswell"}, 4)
    11
    """
    return min(register_budget(target), _registers(target) - vectors - 1)


def _registers(target: TargetLike) -> int:
    """Architectural vector registers: 32 with AVX-512, 16 otherwise."""
    return 32 if vector_lanes(target) >= 16 else 16


def _fail(op: str, knob: str, value, rule: str, valid) -> None:
    shown = ", ".join(str(v) for v in valid) if isinstance(valid, (list, tuple)) else valid
    raise KnobError(f"{op} knob {knob!r} = {value!r} {rule}; valid values: {shown}")


def _int_knob(op: str, knobs: dict, knob: str) -> int:
    value = knobs[knob]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise KnobError(f"{op} knob {knob!r} = {value!r} must be a positive int")
    return value


def _check_divides(op: str, knobs: dict, knob: str, total: int, what: str) -> None:
    value = _int_knob(op, knobs, knob)
    if total % value:
        _fail(op, knob, value, f"must divide the {total} {what}", divisors(total))


def _check_range(op: str, knobs: dict, knob: str, total: int, what: str) -> None:
    value = _int_knob(op, knobs, knob)
    if value > total:
        _fail(op, knob, value, f"must not exceed the {total} {what}", f"1..{total}")


def _tile_rules(op: Op, workload: dict, knobs: dict) -> None:
    """The register tile of a (group / transposed) conv: ``unroll_kw``, ``rows_outer``, ``oh_bn``,
    ``reg_n``."""
    _, _, oh, ow = output_shape(workload, op)
    for knob in ("unroll_kw", "rows_outer"):
        if not isinstance(knobs.get(knob, False), bool):
            _fail(op, knob, knobs[knob], "must be a bool", [True, False])
    if "oh_bn" in knobs:
        _check_range(op, knobs, "oh_bn", oh, "output rows")
    if "flat" in knobs:
        _check_range(op, knobs, "reg_n", oh * ow, "output pixels")
    else:
        _check_range(op, knobs, "reg_n", ow, "output columns")


def _width_rules(op: Op, workload: dict, knobs: dict) -> None:
    """``oc_tile``: a plain-NCHW conv2d of stride 1 whose whole output width is one vector tile."""
    _, o, _, ow = output_shape(workload, op)
    if op != Op.CONV2D:
        raise KnobError(f"{op} knob 'oc_tile' is for conv2d only; remove it")
    if knobs.get("rows_outer"):
        _fail(op, "rows_outer", True, "does not combine with oc_tile", [False])
    _plain_tile_rules(op, workload, knobs, "oc_tile", ("ic_bn", "oc_bn"), o, "output channels")
    if "flat" in knobs:
        _flat_rules(op, workload, knobs)
    else:
        _whole_width_rule(op, knobs, "oc_tile", ow)


def _plain_tile_rules(op: Op, workload: dict, knobs: dict, tile: str, blocks: tuple, channels: int,
                      what: str) -> None:
    """A width-vectorised tile knob (``tile``): plain NCHW (every knob of ``blocks`` is 1),
    stride 1, and ``tile`` divides the ``channels``."""
    if any(knobs[block] != 1 for block in blocks):
        plain = " = ".join(blocks) + " = 1"
        _fail(op, tile, knobs[tile], f"needs {plain} (plain NCHW)",
              f"any divisor of the {what}, with {plain}")
    if list(workload["strides"]) != [1, 1]:
        _fail(op, tile, knobs[tile], f"needs stride 1 (got {workload['strides']})", "none for this workload")
    _check_divides(op, knobs, tile, channels, what)


def _whole_width_rule(op: Op, knobs: dict, tile: str, ow: int) -> None:
    if knobs["reg_n"] != ow:
        _fail(op, "reg_n", knobs["reg_n"], f"must be the whole output width with {tile}", [ow])


def _flat_rules(op: Op, workload: dict, knobs: dict) -> None:
    """``flat``: an unpadded 1x1 conv of stride 1 tiled over its flattened pixels, vectors of
    ``flat`` pixels (plain NCHW) or unvectorised pixels (``flat`` 1: a blocked layout, whose
    channel block is the vector; ``reg_n`` pixels then need not divide the map)."""
    _, _, oh, ow = output_shape(workload, op)
    if op != Op.CONV2D:
        raise KnobError(f"{op} knob 'flat' is for conv2d only; remove it")
    if list(workload["kernel"][2:]) != [1, 1] or any(workload["padding"]):
        _fail(op, "flat", knobs["flat"], "needs an unpadded 1x1 kernel (input pixel = output pixel)",
              "none for this workload")
    if list(workload["strides"]) != [1, 1]:
        _fail(op, "flat", knobs["flat"], f"needs stride 1 (got {workload['strides']})",
              "none for this workload")
    if knobs.get("oh_bn", 1) != 1:
        _fail(op, "oh_bn", knobs["oh_bn"], "does not combine with flat (reg_n counts pixels)", [1])
    flat = _int_knob(op, knobs, "flat")
    if "oc_tile" not in knobs:
        if flat != 1:
            _fail(op, "flat", flat, "must be 1 on a blocked layout (its channel block is the vector); "
                  "vectors of pixels need oc_tile and ic_bn = oc_bn = 1", [1])
        return
    if knobs["reg_n"] % flat:
        _fail(op, "flat", flat, f"must divide reg_n = {knobs['reg_n']}", divisors(knobs["reg_n"]))
    if (oh * ow) % knobs["reg_n"]:
        _fail(op, "reg_n", knobs["reg_n"], f"must divide the {oh * ow} output pixels with flat",
              [d for d in divisors(oh * ow) if d % flat == 0])


def _winograd_rules(op: Op, workload: dict, knobs: dict) -> None:
    """``winograd``: a 3x3 conv2d of stride and dilation 1, ``reg_n`` output tiles of m x m."""
    m = knobs["winograd"]
    if op != Op.CONV2D:
        raise KnobError(f"{op} knob 'winograd' is for conv2d only; remove it")
    if m not in WINOGRAD_TILES or isinstance(m, bool):
        _fail(op, "winograd", m, "is the Winograd output tile size", WINOGRAD_TILES)
    if not winograd_fits(workload):
        _fail(op, "winograd", m, f"needs a 3x3 kernel of stride and dilation 1 (got kernel "
              f"{workload['kernel'][2:]}, strides {workload['strides']}, dilation {workload['dilation']})",
              "none for this workload")
    for knob, plain in (("unroll_kw", False), ("oh_bn", 1), ("rows_outer", False)):
        if knobs.get(knob, plain) != plain:
            _fail(op, knob, knobs[knob], "does not apply to winograd (it tiles the products by tiles)",
                  [plain])
    _check_range(op, knobs, "reg_n", winograd_tiles(workload, m), f"output tiles of {m}x{m}")


def _conv_rules(op: Op, workload: dict, knobs: dict) -> None:
    _check_divides(op, knobs, "ic_bn", workload["data"][1], "input channels")
    _check_divides(op, knobs, "oc_bn", output_shape(workload, op)[1], "output channels")
    if "winograd" in knobs:
        if "oc_tile" in knobs:
            _fail(op, "oc_tile", knobs["oc_tile"], "does not combine with winograd", "none")
        _winograd_rules(op, workload, knobs)
        return
    _tile_rules(op, workload, knobs)
    if "oc_tile" in knobs:
        _width_rules(op, workload, knobs)
    elif "flat" in knobs:
        _flat_rules(op, workload, knobs)


def _group_rules(op: Op, workload: dict, knobs: dict) -> None:
    check_group_blocks(op, workload, knobs)
    _tile_rules(op, workload, knobs)
    if "shuffle" in knobs:
        _shuffle_rules(op, workload, knobs)


def _shuffle_rules(op: Op, workload: dict, knobs: dict) -> None:
    """``shuffle``: a bool; True needs an output block of several whole groups of as many input
    as output channels, read from the input block of the same channels (``ic_bn == oc_bn``)."""
    shuffle = knobs["shuffle"]
    if not isinstance(shuffle, bool):
        raise KnobError(f"{op} knob 'shuffle' = {shuffle!r} must be True or False")
    cg, og = group_sizes(workload)
    if shuffle and not spans_whole_groups(workload, knobs["ic_bn"], knobs["oc_bn"]):
        raise KnobError(
            f"{op} knob 'shuffle' = True needs oc_bn spanning several groups of {og} outputs, each "
            f"reading {og} inputs, and ic_bn == oc_bn (here {cg} inputs per group, ic_bn "
            f"{knobs['ic_bn']}, oc_bn {knobs['oc_bn']}); set shuffle False or pick such blocks")


def _depthwise_rules(op: Op, workload: dict, knobs: dict) -> None:
    _, c, oh, ow = output_shape(workload, op)
    _check_divides(op, knobs, "bn", c, "channels")
    _check_range(op, knobs, "reg_n", ow, "output columns")
    if "c_tile" not in knobs:
        if "oh_bn" in knobs:
            raise KnobError(f"{op} knob 'oh_bn' needs c_tile (plain NCHW); remove it or add c_tile")
        return
    _plain_tile_rules(op, workload, knobs, "c_tile", ("bn",), c, "channels")
    if "oh_bn" in knobs:
        _check_range(op, knobs, "oh_bn", oh, "output rows")
    _whole_width_rule(op, knobs, "c_tile", ow)


def _int8_block_rules(op: Op, c: int, o: int, knobs: dict) -> None:
    """``isa``, ``ic_bn`` (a multiple of its ``dot`` dividing the ``c`` input channels), ``oc_bn``
    (divides the ``o`` output channels) and ``widen`` of an int8 conv2d or dense, or of a
    bfloat16 conv2d (whose ``isa`` multiplies bfloat16)."""
    isa = knobs["isa"]
    element = "bfloat16" if op in BF16_OPS else "int8"
    if not isinstance(isa, str) or isa not in ISAS or ISAS[isa].element != element:
        _fail(op, "isa", isa, f"names the {element} dot-product instruction",
              [name for name, known in ISAS.items() if known.element == element])
    dot = ISAS[isa].dot
    _check_divides(op, knobs, "ic_bn", c, "input channels")
    if knobs["ic_bn"] % dot:
        _fail(op, "ic_bn", knobs["ic_bn"], f"must be a multiple of {dot} (isa {isa} sums {dot} channels "
              "per lane; pad the input channels)", [d for d in divisors(c) if d % dot == 0] or "none")
    _check_divides(op, knobs, "oc_bn", o, "output channels")
    if knobs.get("widen", False) not in (True, False) or (knobs.get("widen") and dot != 2):
        _fail(op, "widen", knobs["widen"], f"is a bool, True only for a 2-channel dot (isa {isa})",
              [True, False] if dot == 2 else [False])


def _amx_rules(op: Op, workload: dict, knobs: dict) -> None:
    """AMX (isa ``amx``, ``amxbf16``): the ``reg_n`` pixels of a row are a tile's rows (at most
    16), its ``ic_bn`` channels a row's bytes (at most 64), ``oc_bn`` whole tiles of 16 output
    channels."""
    isa = ISAS[knobs["isa"]]
    general = [i for i in ISAS if ISAS[i].general and ISAS[i].element == isa.element]
    if op not in (Op.CONV2D_INT8, Op.GROUP_CONV2D_INT8, Op.CONV2D_BF16, Op.GROUP_CONV2D_BF16):
        _fail(op, "isa", isa.name, "runs (group) conv2d_int8 and (group) conv2d_bf16 only", general)
    if workload["dilation"] != [1, 1]:
        _fail(op, "isa", isa.name, f"needs an undilated conv (a tile's rows are evenly spaced pixels); "
              f"this one's dilation is {workload['dilation']}", general)
    if not 2 <= knobs["reg_n"] <= MAX_ROWS:
        _fail(op, "reg_n", knobs["reg_n"], f"is 2 to {MAX_ROWS} with isa {isa.name} (a tile's rows)",
              [d for d in divisors(output_shape(workload, op)[3]) if 2 <= d <= MAX_ROWS] or "none")
    most = MAX_K * isa.dot // 4  # channels of a 64-byte row
    if knobs["ic_bn"] > most:
        _fail(op, "ic_bn", knobs["ic_bn"],
              f"is at most {most} with isa {isa.name} (a tile row's {MAX_K} bytes)",
              [d for d in divisors(workload["data"][1]) if d <= most and d % isa.dot == 0])
    accumulators = accumulator_tiles(knobs["oc_bn"])
    if not 1 <= accumulators <= MAX_TILES:
        _fail(op, "oc_bn", knobs["oc_bn"], f"is a multiple of 16 up to {16 * MAX_TILES} or of 8 up to "
              f"{8 * MAX_TILES} with isa {isa.name} (whole tiles of 16 or 8 output channels, at most "
              f"{MAX_TILES})",
              [d for d in divisors(output_shape(workload, op)[1], cap=16 * MAX_TILES)
               if 1 <= accumulator_tiles(d) <= MAX_TILES] or "none")
    for name in ("oh_bn", "rows_outer"):
        if knobs.get(name) not in (None, 1, False):
            _fail(op, name, knobs[name], f"is not an {isa.name} knob (a register tile is one row of pixels)",
                  [None])
    if "flat" in knobs:
        _amx_flat_rules(op, workload, knobs)
    if "pixel_tiles" in knobs:
        most = MAX_TILES // accumulators
        if not isinstance(knobs["pixel_tiles"], int) or not 1 <= knobs["pixel_tiles"] <= most:
            _fail(op, "pixel_tiles", knobs["pixel_tiles"], f"is 1 to {most} with oc_bn = {knobs['oc_bn']} "
                  f"(input tiles x {accumulators} accumulator tiles each, at most {MAX_TILES})",
                  list(range(1, most + 1)))


def _amx_flat_rules(op: Op, workload: dict, knobs: dict) -> None:
    """``flat`` 1 with AMX: the conv computed over its map flattened at the padded width (a
    tile's rows may span rows of the map), for a bfloat16 conv2d of stride 1."""
    if knobs["flat"] != 1 or isinstance(knobs["flat"], bool):
        _fail(op, "flat", knobs["flat"], "is 1 with AMX (reg_n counts pixels of the flattened map)", [1])
    if op != Op.CONV2D_BF16:
        _fail(op, "flat", knobs["flat"], "is for conv2d_bf16 with AMX only; remove it", [None])
    if workload["strides"] != [1, 1]:
        _fail(op, "flat", knobs["flat"], f"needs stride 1 (got {workload['strides']}); remove it", [None])


def _int8_rules(op: Op, workload: dict, knobs: dict) -> None:
    _, o, oh, _ = output_shape(workload, op)
    reads = workload["data"][1]
    if op in (Op.GROUP_CONV2D_INT8, Op.GROUP_CONV2D_BF16):
        check_group_blocks(op, workload, knobs)  # blocks map onto groups; an input block divides their span
        reads = span(workload, knobs["oc_bn"])
    _int8_block_rules(op, reads, o, knobs)
    check_exact(op, ISAS[knobs["isa"]], workload)
    _tile_rules(op, workload, knobs)  # a reg_n that does not divide OW computes a padded width
    if "oh_bn" in knobs:
        _check_divides(op, knobs, "oh_bn", oh, "output rows (a tensorized tile has no tail)")
    if not ISAS[knobs["isa"]].general:
        _amx_rules(op, workload, knobs)
    elif "flat" in knobs or "pixel_tiles" in knobs:
        name = "flat" if "flat" in knobs else "pixel_tiles"
        _fail(op, name, knobs[name], f"is an AMX knob (isa {knobs['isa']} has no tiles); remove it", [None])


def _dense_int8_rules(op: Op, workload: dict, knobs: dict) -> None:
    m, k = workload["weight"]
    _int8_block_rules(op, k, m, knobs)
    check_exact(op, ISAS[knobs["isa"]], workload)
    if not ISAS[knobs["isa"]].general:
        _amx_rules(op, workload, knobs)


def _dense_rules(op: Op, workload: dict, knobs: dict) -> None:
    _check_divides(op, knobs, "oc_bn", workload["weight"][0], "output features")
    _check_divides(op, knobs, "k_bn", workload["data"][-1], "input features")
    if "n_bn" in knobs:
        _check_range(op, knobs, "n_bn", workload["data"][-2], "rows (the data's dim -2)")
    if not isinstance(knobs.get("rows_inner", False), bool):
        _fail(op, "rows_inner", knobs["rows_inner"], "must be a bool", [True, False])


@dataclass(frozen=True)
class KnobSpace:
    """The knobs of one op family: required and optional names, and the rules they obey.

    Examples
    --------
    >>> from graphtune.ops import Op, conv2d_workload
    >>> wl = conv2d_workload([1, 24, 8, 8], [32, 24, 1, 1])
    >>> CONV_KNOBS.check(Op.CONV2D, wl, {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": False})
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: conv2d knob 'ic_bn' = 16 must divide the 24 input channels;
        valid values: 1, 2, 3, 4, 6, 8, 12, 24
    """

    required: tuple
    optional: tuple
    rules: Callable[[Op, dict, dict], None]

    def check(self, op: Op, workload: dict, knobs: dict) -> dict:
        """Validate ``workload`` as an ``op`` workload and ``knobs`` for it; return the knobs.

        Raises
        ------
        KnobError
            Naming the op, the knob, the rule broken and the valid values.
        ModelError
            If the workload is invalid or not an ``op`` workload.
        """
        check_workload(workload, op)
        if not isinstance(knobs, dict):
            raise KnobError(f"{op} knobs must be a dict, got {type(knobs).__name__}")
        missing = [k for k in self.required if k not in knobs]
        unknown = [k for k in knobs if k not in self.required + self.optional]
        if missing or unknown:
            raise KnobError(
                f"{op} knobs {knobs!r}: missing {missing}, unknown {unknown}; "
                f"required {list(self.required)}, optional {list(self.optional)}"
            )
        self.rules(op, workload, knobs)
        return knobs


_CONV_NAMES = (("ic_bn", "oc_bn", "reg_n", "unroll_kw"), ("oh_bn", "rows_outer"))
CONV_KNOBS = KnobSpace(_CONV_NAMES[0], _CONV_NAMES[1] + ("oc_tile", "flat", "winograd"), _conv_rules)
"""conv2d and conv2d_transpose knobs (``oc_tile``, ``flat``, ``winograd``: conv2d only)."""
GROUP_KNOBS = KnobSpace(_CONV_NAMES[0], _CONV_NAMES[1] + ("shuffle",), _group_rules)
"""group_conv2d knobs (conv2d's names, the block rules of :mod:`graphtune.x86.groups`; ``shuffle``:
each output lane reads its own group's inputs, :mod:`graphtune.x86.group_conv`)."""
DEPTHWISE_KNOBS = KnobSpace(("bn", "reg_n"), ("c_tile", "oh_bn"), _depthwise_rules)
"""depthwise_conv2d knobs."""
DENSE_KNOBS = KnobSpace(("oc_bn", "k_bn"), ("n_bn", "rows_inner"), _dense_rules)
"""dense knobs."""
INT8_KNOBS = KnobSpace(_CONV_NAMES[0] + ("isa",), ("oh_bn", "rows_outer", "widen"), _int8_rules)
"""conv2d_int8 and group_conv2d_int8 knobs (conv2d's with the instruction ``isa``)."""
BF16_KNOBS = KnobSpace(_CONV_NAMES[0] + ("isa",), ("oh_bn", "rows_outer", "flat", "pixel_tiles"), _int8_rules)
"""conv2d_bf16 and group_conv2d_bf16 knobs (conv2d_int8's, with a bfloat16 instruction ``isa``)."""
DENSE_BF16_KNOBS = KnobSpace(("ic_bn", "oc_bn", "isa"), (), _dense_int8_rules)
"""dense_bf16 knobs (dense_int8's, with a bfloat16 instruction ``isa``)."""
BLOCKED_DEPTHWISE_KNOBS = KnobSpace(("bn", "reg_n"), (), _depthwise_rules)
"""depthwise_conv2d_int8 and depthwise_conv2d_bf16 knobs (depthwise_conv2d's, without the plain-NCHW
width tiles)."""
DENSE_INT8_KNOBS = KnobSpace(("ic_bn", "oc_bn", "isa"), ("widen",), _dense_int8_rules)
"""dense_int8 knobs (conv2d_int8's blocks and instruction; its 1x1 map has one register tile)."""
