"""Per-op pieces of the candidate space: channel-block groups, register tiles, default blocks.

Each op's :class:`~graphtune.x86.specs.OpSpec` refers to one function of
each kind here; :mod:`graphtune.x86.candidates` ranks and combines them.

- ``*_blocks(workload, max_block, target)``: ``[(tier, blocks), ...]``, the
  channel-block choices (layouts) with a preference tier (0 best);
- ``*_tiles(workload, blocks, target)``: full knob dicts with those blocks,
  best guess first;
- ``*_default(workload, block, target)``: the blocks nearest to ``block``.

Each ranking rule here fixed a measured loss; ``docs/candidates.md`` has the measurements.

Examples
--------
>>> from graphtune.ops import dense_workload
>>> dense_tiles(dense_workload([1, 64], [10, 64]), {"oc_bn": 10}, {"kind": "llvm"})[0]
{'oc_bn': 10, 'k_bn': 8}
"""

import math

from ..ops import Op, output_shape
from .conv2d_transpose import taps
from .groups import group_sizes, oc_blocks, span, spans_whole_groups
from .knobs import accumulator_budget, divisors, register_budget
from .target import TargetLike, vector_lanes
from .winograd import WINOGRAD_TILES, winograd_fits, winograd_tiles

__all__ = [
    "MAX_BLOCK", "conv_blocks", "group_blocks", "depthwise_blocks", "dense_blocks", "conv_tiles",
    "conv_order", "group_tiles", "transpose_tiles", "depthwise_tiles", "blocked_depthwise_tiles",
    "dense_tiles", "conv_default", "group_default", "depthwise_default", "dense_default",
]

MAX_BLOCK = 64

FMAS_IN_FLIGHT = 8
"""Independent FMAs that keep an x86 core's two FMA pipes busy through their 4-cycle latency
(every core since Haswell and Zen): a tile reducing over a conv's taps wants at least this many
accumulator registers (docs/candidates.md, "Accumulators on AVX2")."""
"""Largest channel block enumerated by default (larger ones ran slower)."""


def _block_penalty(block: int, lanes: int) -> int:
    """0 for one to three full vectors, 1 for other whole vectors, 2 for part of a vector (a power
    of two >= 4 lanes, or at least half a vector), 3 else (blocks over a vector that are no
    multiple of it, e.g. 18, 20, 23 on 16 lanes, which run several times slower than 8). Three
    vectors (24 on AVX2) ran 1.3-1.8x faster than one on RegNetY's convs (docs/candidates.md,
    "Blocks of several vectors")."""
    if block in (lanes, 2 * lanes, 3 * lanes):
        return 0
    if block % lanes == 0:
        return 1
    if (lanes % block == 0 and block >= 4) or lanes // 2 <= block < lanes:
        return 2
    return 3


def _widths(extent: int, limit: int) -> list:
    """Tile sizes for an axis in [limit // 4, limit] (or the whole axis): divisors, and
    near-divisors wasting <= 10% in the tail; never empty.

    Examples
    --------
    >>> _widths(56, 12)
    [3, 4, 5, 6, 7, 8, 10, 12]
    >>> _widths(7, 6)
    [1]
    """
    sizes = {d for d in divisors(extent) if d <= limit}
    for tiles in range(1, extent + 1):
        size = math.ceil(extent / tiles)
        if size <= limit and tiles * size - extent <= 0.1 * extent:
            sizes.add(size)
    wide = sorted(s for s in sizes if 4 * s >= limit or s == extent)
    return wide or [max(sizes)]  # a prime extent past the limit: its widest small tile


def _tile_key(extent: int, tile: int, acc: int, want: int) -> tuple:
    """Rank a register tile: no tail, then little tail waste, then about ``want`` accumulator registers.

    A tile that does not divide its axis leaves a guarded tail, which costs more than the
    waste of the tail suggests: dividing tiles rank first.

    Examples
    --------
    >>> sorted([7, 8, 16], key=lambda t: _tile_key(256, t, 2 * t, 14))
    [8, 16, 7]
    """
    waste = math.ceil(extent / tile) * tile - extent
    return (waste > 0, waste > 0.1 * extent, abs(acc - want), waste)


def _register_tiles(workload: dict, op: Op, oc_bn: int, target: TargetLike, kh: int, kw: int,
                    phase: int, in_flight: int = FMAS_IN_FLIGHT) -> list:
    """Register tiles of a (group / transposed) conv whose reduction runs over ``kh x kw`` taps.

    ``phase``: a width tile that is a multiple of it keeps a transposed conv's phases constant.
    ``in_flight``: fewest accumulators of a tile of several output vectors reducing over taps
    (the int8 kernels, whose instruction mix differs, pass 0).
    """
    lanes = vector_lanes(target)
    _, _, oh, ow = output_shape(workload, op)
    vecs = math.ceil(oc_bn / lanes)
    budget = accumulator_budget(target, vecs)
    pointwise = kh == kw == 1
    row_tiles = [t for t in (1, 2, 4) if t <= oh] if pointwise else [1]
    # 1x1 convs reload the whole kernel per tile: they like full tiles; others half the budget
    # (the rest holds the taps' kernel vectors), and tiles of several vectors of output channels
    # no fewer than the FMAs in flight (one-vector tiles of 8 pixels measured slower than of 5)
    want = budget if pointwise else budget // 2
    if not pointwise and vecs > 1:
        want = max(want, min(in_flight, budget))
    ranked = []
    for oh_bn in row_tiles:
        limit = budget // (vecs * oh_bn)
        if limit < 1 and oh_bn > 1:
            continue  # one row of one pixel already fills the registers
        for reg_n in _widths(ow, max(limit, 1)):
            acc = reg_n * oh_bn * vecs
            key = (reg_n % phase != 0,) + _tile_key(ow, reg_n, acc, want)
            key += (oh % oh_bn != 0,)
            for unroll_kw in ((True, False) if kw > 1 else (False,)):
                knobs = {"reg_n": reg_n, "unroll_kw": unroll_kw}
                if pointwise:
                    knobs["oh_bn"] = oh_bn
                ranked.append((key + (not unroll_kw,), knobs))
    return [k for _, k in sorted(ranked, key=lambda item: item[0])]


def _depthwise_register_tiles(workload: dict, bn: int, target: TargetLike) -> list:
    lanes = vector_lanes(target)
    ow = output_shape(workload, Op.DEPTHWISE_CONV2D)[3]
    vecs = math.ceil(bn / lanes)
    budget = accumulator_budget(target, vecs)
    ranked = [
        (_tile_key(ow, reg_n, reg_n * vecs, budget // 2), {"reg_n": reg_n})
        for reg_n in _widths(ow, max(budget // vecs, 1))
    ]
    return [k for _, k in sorted(ranked, key=lambda item: item[0])]


def _dense_register_tiles(workload: dict, oc_bn: int, target: TargetLike) -> list:
    """k_bn near 8; with several rows (dim -2 of the data), a rows tile filling the registers too,
    the best two also with their row tiles inside each output block (``rows_inner``) right after
    the best."""
    k, rows = workload["data"][-1], workload["data"][-2]
    k_tiles = sorted(divisors(k, cap=16), key=lambda k_bn: abs(k_bn - 8))
    if rows == 1:
        return [{"k_bn": k_bn} for k_bn in k_tiles]
    vecs = math.ceil(oc_bn / vector_lanes(target))
    budget = accumulator_budget(target, vecs)
    row_tiles = sorted(
        _widths(rows, max(budget // vecs, 1)),
        key=lambda n_bn: _tile_key(rows, n_bn, n_bn * vecs, budget),
    )
    ranked = [
        ((r + abs(k_bn - 8) // 4, r), {"k_bn": k_bn, "n_bn": n_bn})
        for r, n_bn in enumerate(row_tiles)
        for k_bn in k_tiles
    ]
    found = [t for _, t in sorted(ranked, key=lambda item: item[0])]
    # several row tiles: each weight block read once while every row tile passes it (rows_inner)
    # next to the best tile, as the caches decide which order wins
    inner = [{**t, "rows_inner": True} for t in found[:2] if t["n_bn"] < rows]
    return found[:1] + inner + found[1:]


def _ordered_blocks(channels: int, max_block: int, lanes: int) -> list:
    return sorted(divisors(channels, cap=max_block), key=lambda b: (_block_penalty(b, lanes), abs(b - lanes)))


def _group_pairs(workload: dict, max_block: int, lanes: int, dot: int = 1, waste_tiers: int = 1,
                 shuffles: bool = False) -> list:
    """``(tier, {"ic_bn", "oc_bn"})`` of a group conv: vector fit, then the work wasted on
    the zeros of a block spanning several groups (``waste_tiers`` per doubling; none where
    ``shuffles`` and the block's ``shuffle`` candidates read only each group's inputs, see
    :func:`shuffle_fits`); input blocks that are multiples of ``dot`` (the input channels an
    int8 instruction sums)."""
    og = group_sizes(workload)[1]
    ocs = sorted((b for b in oc_blocks(workload) if b <= max_block),
                 key=lambda b: (_block_penalty(b, lanes), abs(b - lanes)))
    pairs = []
    for o in ocs:
        doublings = max(1, o // og).bit_length() - 1
        for i in (b for b in _ordered_blocks(span(workload, o), max_block, lanes) if b % dot == 0):
            shuffled = shuffles and shuffle_fits(workload, {"ic_bn": i, "oc_bn": o}, lanes)
            waste = 0 if shuffled else waste_tiers * doublings
            tier = _block_penalty(o, lanes) + (_block_penalty(i, lanes) + 1) // 2 + waste
            pairs.append((tier, {"ic_bn": i, "oc_bn": o}))
    return pairs


def shuffle_fits(workload: dict, blocks: dict, lanes: int) -> bool:
    """Whether a group conv's ``blocks`` have ``shuffle`` candidates: an output block of several
    groups of as many inputs as outputs, read from the same input channels (``ic_bn ==
    oc_bn``), and ``lanes`` dividing or divided by a group's channels, so that a vector's lanes
    read one aligned vector of input (one permute, :mod:`graphtune.x86.shuffles`, never a
    gather).

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> resnext = conv2d_workload([1, 128, 56, 56], [128, 4, 3, 3], padding=[1, 1, 1, 1], groups=32)
    >>> shuffle_fits(resnext, {"ic_bn": 16, "oc_bn": 16}, 16)
    True
    >>> shuffle_fits(resnext, {"ic_bn": 4, "oc_bn": 4}, 16)  # inside one group: nothing to shuffle
    False
    >>> regnet = conv2d_workload([1, 336, 14, 14], [336, 24, 3, 3], padding=[1, 1, 1, 1], groups=14)
    >>> shuffle_fits(regnet, {"ic_bn": 48, "oc_bn": 48}, 16)  # a vector spans two groups' inputs
    False
    """
    cg = group_sizes(workload)[0]
    permutes = lanes % cg == 0 or cg % lanes == 0
    return permutes and spans_whole_groups(workload, blocks["ic_bn"], blocks["oc_bn"])


def _dense_sizes(workload: dict, max_block: int, target: TargetLike) -> list:
    lanes = vector_lanes(target)
    m = workload["weight"][0]

    def key(b):  # fraction of vector lanes doing useful work, then powers of two, then bigger
        return (-round(b / (math.ceil(b / lanes) * lanes), 2), b & (b - 1) != 0, -b)

    return sorted(divisors(m, cap=max_block), key=key)


def _depthwise_penalty(block: int, lanes: int) -> int:
    """:func:`_block_penalty` for a depthwise conv: one vector 0, two or three vectors 1, part of a
    vector (>= 4 lanes) or more vectors 2, else 3 (parts of a vector ran 1.3-2x slower than one
    vector, two or three vectors as fast or faster; docs/candidates.md, "Depthwise blocks")."""
    if block == lanes:
        return 0
    if block in (2 * lanes, 3 * lanes):
        return 1
    return 2 if block % lanes == 0 or (lanes % block == 0 and block >= 4) else 3


def _block_near(channels: int, block: int, target: TargetLike) -> int:
    """The divisor of ``channels`` closest to ``block`` (ties: the larger) among those filling
    whole vectors or at most one: 72 channels get 12 for 16, not 18, which splits into a full
    and a 2-lane vector."""
    lanes = vector_lanes(target)
    found = divisors(channels)
    return min([d for d in found if d % lanes == 0 or d < lanes],
               key=lambda d: (abs(d - block), -d))


# ------------------------------------------------------------------ blocks
def _stride_one(workload: dict) -> bool:
    """Whether consecutive output columns read consecutive input columns (a width tile is then
    one unstrided vector load per tap)."""
    return list(workload["strides"]) == [1, 1]


def _pixel_for_pixel(workload: dict) -> bool:
    """Whether output pixel p of a conv reads input pixel p alone: an unpadded 1x1 conv of stride
    1 (its rows and columns are one axis of pixels)."""
    return (_stride_one(workload) and list(workload["kernel"][2:]) == [1, 1]
            and not any(workload["padding"]))


def _width_vectorised(workload: dict, op: Op) -> bool:
    """Whether a plain-NCHW (blocks of 1) conv gets width-vectorised tiles (``oc_tile``): those
    reading pixel for pixel (on padded convs every vector load is guarded, far slower than
    blocks)."""
    return op == Op.CONV2D and _pixel_for_pixel(workload)


def conv_blocks(workload: dict, max_block: int, target: TargetLike, op: Op = Op.CONV2D) -> list:
    """``(ic_bn, oc_bn)`` pairs of a conv2d or conv2d_transpose (``op``): vector fit of both.

    When no output block is a whole vector, plain NCHW (blocks of 1) ranks with parts of a vector
    (its width-vectorised tiles use whole vectors)."""
    lanes = vector_lanes(target)
    ics = _ordered_blocks(workload["data"][1], max_block, lanes)
    ocs = _ordered_blocks(output_shape(workload, op)[1], max_block, lanes)
    plain = _width_vectorised(workload, op) and min(_block_penalty(o, lanes) for o in ocs) >= 2
    return [
        (2 if plain and i == o == 1 else _block_penalty(o, lanes) + (_block_penalty(i, lanes) + 1) // 2,
         {"ic_bn": i, "oc_bn": o})
        for o in ocs
        for i in ics
    ]


GROUP_WASTE_TIERS = 3
"""Tiers per doubling of the work a float32 group conv block wastes on zeros between groups: more
than a part of a vector costs, so a block inside one group ranks ahead of a block-diagonal one
(the measurements: docs/candidates.md, "Group convs with shuffled lanes")."""


def group_blocks(workload: dict, max_block: int, target: TargetLike) -> list:
    """``(ic_bn, oc_bn)`` pairs of a group conv (see :func:`_group_pairs`): a block wasting half
    its products ranks below a part of a vector, one whose ``shuffle`` candidates waste none
    as a block of its size.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> regnet = conv2d_workload([1, 336, 14, 14], [336, 24, 3, 3], padding=[1, 1, 1, 1], groups=14)
    >>> tiers = {(p["ic_bn"], p["oc_bn"]): t for t, p in group_blocks(regnet, 64, {"kind": "llvm",
    ...                                                                           "mcpu": "skylake-avx512"})}
    >>> tiers[16, 48], tiers[8, 8]  # two groups of 24 in three vectors, a third of a group in half a vector
    (3, 3)
    """
    return _group_pairs(workload, max_block, vector_lanes(target), waste_tiers=GROUP_WASTE_TIERS,
                        shuffles=True)


def depthwise_blocks(workload: dict, max_block: int, target: TargetLike) -> list:
    """The channel block ``bn`` of a depthwise conv (ranked by :func:`_depthwise_penalty`).

    When no block is one or more whole vectors or a part of one (>= 4 lanes), plain NCHW
    (``bn = 1``) ranks with parts of a vector if its width can be vectorised (stride 1, knob
    ``c_tile``)."""
    lanes = vector_lanes(target)
    blocks = sorted(divisors(workload["data"][1], cap=max_block),
                    key=lambda b: (_depthwise_penalty(b, lanes), abs(b - lanes)))
    plain = _stride_one(workload) and all(b % lanes and (lanes % b or b < 4) for b in blocks)
    return [(2 if plain and b == 1 else _depthwise_penalty(b, lanes), {"bn": b}) for b in blocks]


def dense_blocks(workload: dict, max_block: int, target: TargetLike) -> list:
    """The output-feature block ``oc_bn`` of a dense (layouts do not depend on it)."""
    return [(tier, {"oc_bn": b}) for tier, b in enumerate(_dense_sizes(workload, max_block, target))]


# ------------------------------------------------------------------- tiles
def _with(blocks: dict, tiles: list) -> list:
    return [{**blocks, **tile} for tile in tiles]


def _width_tiles(workload: dict, target: TargetLike, kw: int) -> list:
    """``oc_tile`` x ``oh_bn`` register tiles of a plain-NCHW conv2d whose output width is vectorised
    (about half the register budget of accumulators, as the other 3x3 tiles)."""
    lanes, budget = vector_lanes(target), register_budget(target)
    _, o, oh, ow = output_shape(workload, Op.CONV2D)
    vecs = math.ceil(ow / lanes)
    ranked = []
    for oc_tile in divisors(o):
        for oh_bn in (1, 2, 4, 7, 8):
            acc = oc_tile * oh_bn * vecs
            if oh_bn <= oh and acc <= budget:
                knobs = {"reg_n": ow, "unroll_kw": kw > 1, "oc_tile": oc_tile, "oh_bn": oh_bn}
                ranked.append(((oh % oh_bn != 0, abs(acc - budget // 2), -oc_tile), knobs))
    return [k for _, k in sorted(ranked, key=lambda item: item[0])]


def _depthwise_width_tiles(workload: dict, target: TargetLike) -> list:
    """``c_tile`` x ``oh_bn`` register tiles of a plain-NCHW depthwise conv whose output width is
    vectorised, about a quarter of the register budget of accumulators first."""
    lanes, budget = vector_lanes(target), register_budget(target)
    _, c, oh, ow = output_shape(workload, Op.DEPTHWISE_CONV2D)
    vecs = math.ceil(ow / lanes)
    ranked = []
    for c_tile in divisors(c, cap=4):
        for oh_bn in divisors(oh, cap=budget):
            acc = c_tile * oh_bn * vecs
            if acc <= budget // 2:
                knobs = {"reg_n": ow, "c_tile": c_tile, "oh_bn": oh_bn}
                ranked.append(((abs(acc - budget // 4), c_tile, -oh_bn), knobs))
    return [k for _, k in sorted(ranked, key=lambda item: item[0])]


def _flat_tiles(workload: dict, target: TargetLike) -> list:
    """``oc_tile`` x ``reg_n``-pixel register tiles of an unpadded 1x1 plain-NCHW conv2d over its
    flattened pixels (knob ``flat``), about half the register budget of accumulators first; none
    when the pixels are not whole vectors."""
    lanes, budget = vector_lanes(target), register_budget(target)
    _, o, oh, ow = output_shape(workload, Op.CONV2D)
    if (oh * ow) % lanes:
        return []
    ranked = []
    for oc_tile in divisors(o):
        for vecs in divisors(oh * ow // lanes):
            if oc_tile * vecs <= budget:
                knobs = {"reg_n": vecs * lanes, "flat": lanes, "unroll_kw": False, "oc_tile": oc_tile}
                ranked.append(((abs(oc_tile * vecs - budget // 2), -oc_tile), knobs))
    return [k for _, k in sorted(ranked, key=lambda item: item[0])]


def _pixel_tiles(workload: dict, oc_bn: int, target: TargetLike) -> list:
    """``reg_n``-pixel register tiles of a blocked unpadded 1x1 conv2d of stride 1 over its
    flattened pixels (knob ``flat`` 1), ranked as width tiles of a one-row map; none for maps of
    one row or blocks of one channel, and none a row tile has (whole rows, or parts of one that
    divide it)."""
    _, _, oh, ow = output_shape(workload, Op.CONV2D)
    if oh == 1 or oc_bn == 1 or not _pixel_for_pixel(workload):
        return []
    vecs = math.ceil(oc_bn / vector_lanes(target))
    budget = accumulator_budget(target, vecs)
    pixels = oh * ow
    sizes = [n for n in _widths(pixels, max(budget // vecs, 1)) if n % ow and ow % n]
    ranked = sorted(sizes, key=lambda reg_n: _tile_key(pixels, reg_n, reg_n * vecs, budget))
    return [{"reg_n": reg_n, "unroll_kw": False, "flat": 1} for reg_n in ranked]


def _computed_pixels(workload: dict, tile: dict) -> int:
    """Output pixels a conv2d register ``tile`` computes, its tails included."""
    _, _, oh, ow = output_shape(workload, Op.CONV2D)
    if "flat" in tile:
        return math.ceil(oh * ow / tile["reg_n"]) * tile["reg_n"]
    rows = tile.get("oh_bn", 1)
    return math.ceil(oh / rows) * rows * math.ceil(ow / tile["reg_n"]) * tile["reg_n"]


def _with_pixel_tiles(workload: dict, oc_bn: int, target: TargetLike, tiles: list) -> list:
    """``tiles`` (by rows and columns) with the flattened-pixel tiles of a 1x1 conv2d: the best one
    first where it computes fewer tail pixels than the best row tile (a 7x7 map: 5 pixels, 50
    computed, against 4 rows of 1, 56) with accumulators enough for the FMAs in flight, else
    after all of them (on 14x14 maps and up row tiles divide and measured as fast or faster;
    docs/candidates.md, "Flattened pixels of blocked 1x1 convs")."""
    pixels = _pixel_tiles(workload, oc_bn, target)
    if not pixels:
        return tiles
    accumulators = pixels[0]["reg_n"] * math.ceil(oc_bn / vector_lanes(target))
    if accumulators >= min(FMAS_IN_FLIGHT, register_budget(target)) and (
            not tiles or _computed_pixels(workload, pixels[0]) < _computed_pixels(workload, tiles[0])):
        return pixels[:1] + tiles + pixels[1:]
    return tiles + pixels


def _rows_outer(workload: dict) -> bool:
    """Whether a 1x1 conv2d's threads share its output rows (``rows_outer``), not its channel blocks.

    Sharing output channels, every thread reads the whole input; sharing rows, a band of it (and
    all the weights). Rows win when the input is the largest operand (over the weights and the
    output), most when the host runs the two threads on cores without a shared cache (see
    :mod:`graphtune.hoststate`).

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> _rows_outer(conv2d_workload([1, 256, 56, 56], [64, 256, 1, 1]))
    True
    >>> _rows_outer(conv2d_workload([1, 64, 56, 56], [256, 64, 1, 1]))  # the output is larger
    False
    >>> _rows_outer(conv2d_workload([1, 2048, 7, 7], [512, 2048, 1, 1]))  # the weights are larger
    False
    """
    n, c, h, w = workload["data"]
    _, o, oh, ow = output_shape(workload, Op.CONV2D)
    return c * h * w >= max(c * o, o * oh * ow)


def _winograd_tiles(workload: dict, oc_bn: int, target: TargetLike) -> list:
    """Winograd tiles (knob ``winograd``) of a 3x3 conv2d of stride and dilation 1 with at least
    a vector of input channels and an output block of at least half a vector, per tile size (4
    first) its best register tile of ``reg_n`` output tiles: about half the register budget of
    accumulators, as the direct 3x3 tiles. Which of F(4x4, 3x3), F(2x2, 3x3) and the direct conv
    wins depends on the map size, so all are measured."""
    if not winograd_fits(workload):
        return []
    lanes = vector_lanes(target)
    if 2 * oc_bn < lanes or workload["data"][1] < lanes:
        return []
    vecs = math.ceil(oc_bn / lanes)
    budget = accumulator_budget(target, vecs)
    found = []
    for m in sorted(WINOGRAD_TILES, reverse=True):
        tiles = winograd_tiles(workload, m)
        best = min(_widths(tiles, max(budget // vecs, 1)),
                   key=lambda reg_n: _tile_key(tiles, reg_n, reg_n * vecs, budget // 2))
        found.append({"reg_n": best, "unroll_kw": False, "winograd": m})
    return found


def conv_tiles(workload: dict, blocks: dict, target: TargetLike, op: Op = Op.CONV2D) -> list:
    """Knobs of a conv2d or group conv with ``blocks`` ``{"ic_bn", "oc_bn"}`` (plain NCHW conv2d:
    the flattened-pixel and width-vectorised tiles first; 1x1 conv2d: the flattened-pixel tiles of
    :func:`_with_pixel_tiles`, threads sharing rows where :func:`_rows_outer`; 3x3 conv2d of
    stride 1: the Winograd tiles right after the best direct one)."""
    kh, kw = workload["kernel"][2:]
    tiles = _register_tiles(workload, op, blocks["oc_bn"], target, kh, kw, 1)
    if op == Op.CONV2D and kh == kw == 1:
        tiles = _with_pixel_tiles(workload, blocks["oc_bn"], target, tiles)
        if _rows_outer(workload):
            tiles = [{**tile, "rows_outer": True} for tile in tiles]
    if blocks["ic_bn"] == blocks["oc_bn"] == 1 and _width_vectorised(workload, op):
        tiles = _flat_tiles(workload, target) + _width_tiles(workload, target, kw) + tiles
    if op == Op.CONV2D:
        tiles = tiles[:1] + _winograd_tiles(workload, blocks["oc_bn"], target) + tiles[1:]
    return _with(blocks, tiles)


WINOGRAD_EARLY_MIN = 9
"""Smallest output height and width at which :func:`conv_order` moves a Winograd tile forward:
on maps of 8x8 and smaller Winograd lost to the direct conv on every CPU measured."""


def conv_order(ranked: list, workload: dict, target: TargetLike) -> list:
    """The conv2d's candidates ``ranked`` by block tier and tile rank, with the first Winograd
    candidate moved to second place where the output map is at least
    :data:`WINOGRAD_EARLY_MIN` square.

    The best direct tiles of the first block pairs differ little from each other, Winograd from
    them by up to 2x either way (by map size and CPU: ``docs/candidates.md``, "Winograd 3x3
    convs"); ranked by tier it came fifth, so a tune measuring 4 candidates per workload never
    tried it.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> ranked = [{"ic_bn": i, "oc_bn": o, "reg_n": 7, **w} for w in ({}, {"winograd": 4})
    ...           for i, o in ((16, 16), (32, 16), (16, 32))]
    >>> big = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
    >>> [(k["ic_bn"], k["oc_bn"], k.get("winograd")) for k in conv_order(ranked, big, None)][:3]
    [(16, 16, None), (16, 16, 4), (32, 16, None)]
    >>> small = conv2d_workload([1, 64, 7, 7], [64, 64, 3, 3], padding=[1, 1, 1, 1])
    >>> conv_order(ranked, small, None) == ranked
    True
    """
    first = next((k for k in ranked if "winograd" in k), None)
    if first is None or min(output_shape(workload, Op.CONV2D)[2:]) < WINOGRAD_EARLY_MIN:
        return ranked
    rest = [k for k in ranked if k is not first]
    return rest[:1] + [first] + rest[1:]


def group_tiles(workload: dict, blocks: dict, target: TargetLike) -> list:
    """Knobs of a group conv with ``blocks`` ``{"ic_bn", "oc_bn"}``; where they have ``shuffle``
    candidates (:func:`shuffle_fits`), the shuffle variants of the best tile first (``kw``
    rolled, then unrolled: the unrolled body holds ``cg`` x ``reg_n`` products per tap), then
    the block-diagonal tiles.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 128, 56, 56], [128, 4, 3, 3], padding=[1, 1, 1, 1], groups=32)
    >>> avx512 = {"kind": "llvm", "mcpu": "skylake-avx512"}
    >>> [t.get("shuffle", False) for t in group_tiles(wl, {"ic_bn": 16, "oc_bn": 16}, avx512)][:4]
    [True, True, False, False]
    >>> wl = conv2d_workload([1, 96, 14, 14], [96, 24, 3, 3], padding=[1, 1, 1, 1], groups=4)
    >>> any(t.get("shuffle") for t in group_tiles(wl, {"ic_bn": 48, "oc_bn": 48}, avx512))
    False
    """
    tiles = conv_tiles(workload, blocks, target, Op.GROUP_CONV2D)
    if shuffle_fits(workload, blocks, vector_lanes(target)):  # kw rolled, then unrolled
        tiles = [{**tiles[0], "unroll_kw": unroll, "shuffle": True} for unroll in (False, True)] + tiles
    return tiles


def transpose_tiles(workload: dict, blocks: dict, target: TargetLike) -> list:
    """Knobs of a conv2d_transpose: the reduction runs over one output phase's taps."""
    kh, kw = taps(workload)
    return _with(blocks, _register_tiles(workload, Op.CONV2D_TRANSPOSE, blocks["oc_bn"], target, kh, kw,
                                         workload["strides"][1]))


def depthwise_tiles(workload: dict, blocks: dict, target: TargetLike) -> list:
    """Knobs of a depthwise conv with ``blocks`` ``{"bn"}`` (plain NCHW of stride 1: the
    width-vectorised tiles first, then :func:`blocked_depthwise_tiles`)."""
    width = _depthwise_width_tiles(workload, target) if blocks["bn"] == 1 and _stride_one(workload) else []
    return _with(blocks, width) + blocked_depthwise_tiles(workload, blocks, target)


def blocked_depthwise_tiles(workload: dict, blocks: dict, target: TargetLike) -> list:
    """Knobs of an int8 or bfloat16 depthwise conv with ``blocks`` ``{"bn"}``: the float32
    depthwise conv's register tiles (without its plain-NCHW width tiles).

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 32, 28, 28], [32, 1, 3, 3], padding=[1, 1, 1, 1], groups=32)
    >>> blocked_depthwise_tiles(wl, {"bn": 8}, {"kind": "llvm", "mcpu": "haswell"})[0]
    {'bn': 8, 'reg_n': 7}
    """
    return _with(blocks, _depthwise_register_tiles(workload, blocks["bn"], target))


def dense_tiles(workload: dict, blocks: dict, target: TargetLike) -> list:
    """Knobs of a dense with ``blocks`` ``{"oc_bn"}`` (``{}``: the best-guess block)."""
    if not blocks:
        blocks = {"oc_bn": _dense_sizes(workload, MAX_BLOCK, target)[0]}
    return _with(blocks, _dense_register_tiles(workload, blocks["oc_bn"], target))


# ----------------------------------------------------------------- defaults
def conv_default(workload: dict, block: int, target: TargetLike, op: Op = Op.CONV2D) -> dict:
    """Channel blocks of a conv2d / conv2d_transpose (``op``) nearest to ``block``."""
    return {"ic_bn": _block_near(workload["data"][1], block, target),
            "oc_bn": _block_near(output_shape(workload, op)[1], block, target)}


def group_default(workload: dict, block: int, target: TargetLike) -> dict:
    """Blocks of a group conv nearest to ``block`` (``oc_bn`` mapping onto groups)."""
    oc_bn = min(oc_blocks(workload), key=lambda d: (abs(d - block), -d))
    return {"ic_bn": _block_near(span(workload, oc_bn), block, target), "oc_bn": oc_bn}


def depthwise_default(workload: dict, block: int, target: TargetLike) -> dict:
    """The depthwise channel block nearest to ``block``."""
    return {"bn": _block_near(workload["data"][1], block, target)}


def dense_default(workload: dict, block: int, target: TargetLike) -> dict:
    """Dense ignores ``block`` (its layout is always plain): the best-guess ``oc_bn``."""
    return {}
