"""The candidate knob space of a workload, best guesses first.

Every channel block dividing the channels (up to ``max_block``) is a layout
choice the graph solver may want, so pruning keeps layout diversity: the
best-guess tile of every block pair comes before the second-best tile of the
preferred pairs, and so on.

Examples
--------
>>> from graphtune.x86.workload import conv2d_workload
>>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> top = candidates(wl, {"kind": "llvm", "mcpu": "znver5"}, max_candidates=4)
>>> [(k["ic_bn"], k["oc_bn"]) for k in top]
[(16, 16), (32, 16), (16, 32), (32, 32)]
"""

import math

from ..errors import KnobError
from .conv2d_transpose import taps
from .groups import group_sizes, oc_blocks, span
from .knobs import divisors, register_budget
from .target import TargetLike, vector_lanes
from .workload import op_of, output_shape

__all__ = ["candidates", "default_knobs", "tile_variants", "MAX_BLOCK"]

MAX_BLOCK = 64
"""Largest channel block enumerated by default (larger ones are slow: oc_bn 64 was 3x off)."""


def _block_penalty(block: int, lanes: int) -> int:
    """0 for one or two full vectors, 1 for other whole vectors, 2 for part of a vector, 3 else."""
    if block in (lanes, 2 * lanes):
        return 0
    if block % lanes == 0:
        return 1
    if lanes % block == 0 and block >= 4:
        return 2
    return 3


def _widths(extent: int, limit: int) -> list:
    """Tile sizes for an axis in [limit // 4, limit] (or the whole axis): divisors, and
    near-divisors wasting <= 10% in the tail."""
    sizes = {d for d in divisors(extent) if d <= limit}
    for tiles in range(1, extent + 1):
        size = math.ceil(extent / tiles)
        if size <= limit and tiles * size - extent <= 0.1 * extent:
            sizes.add(size)
    return sorted(s for s in sizes if 4 * s >= limit or s == extent)


def _tile_key(extent: int, tile: int, acc: int, want: int) -> tuple:
    """Rank a register tile: little tail waste, about ``want`` accumulator registers."""
    waste = math.ceil(extent / tile) * tile - extent
    return (waste > 0.1 * extent, abs(acc - want), waste)


def _conv_tiles(workload: dict, oc_bn: int, target: TargetLike) -> list:
    lanes, budget = vector_lanes(target), register_budget(target)
    _, _, oh, ow = output_shape(workload)
    kh, kw = workload["kernel"][2:]
    phase = 1  # transposed convs: a width tile that is a multiple of the stride keeps phases constant
    if op_of(workload) == "conv2d_transpose":
        kh, kw = taps(workload)
        phase = workload["strides"][1]
    vecs = math.ceil(oc_bn / lanes)
    pointwise = kh == kw == 1
    row_tiles = [t for t in (1, 2, 4) if t <= oh] if pointwise else [1]
    ranked = []
    for oh_bn in row_tiles:
        limit = budget // (vecs * oh_bn)
        if limit < 1 and oh_bn > 1:
            continue  # one row of one pixel already fills the registers
        for reg_n in _widths(ow, max(limit, 1)):
            acc = reg_n * oh_bn * vecs
            # 1x1 convs reload the whole kernel per tile: they like fuller tiles.
            key = (reg_n % phase != 0,) + _tile_key(ow, reg_n, acc, budget if pointwise else budget // 2)
            key += (oh % oh_bn != 0,)
            for unroll_kw in ((True, False) if kw > 1 else (False,)):
                knobs = {"reg_n": reg_n, "unroll_kw": unroll_kw}
                if pointwise:
                    knobs["oh_bn"] = oh_bn
                ranked.append((key + (not unroll_kw,), knobs))
    return [k for _, k in sorted(ranked, key=lambda item: item[0])]


def _depthwise_tiles(workload: dict, bn: int, target: TargetLike) -> list:
    lanes, budget = vector_lanes(target), register_budget(target)
    ow = output_shape(workload)[3]
    vecs = math.ceil(bn / lanes)
    ranked = [
        (_tile_key(ow, reg_n, reg_n * vecs, budget // 2), {"reg_n": reg_n})
        for reg_n in _widths(ow, max(budget // vecs, 1))
    ]
    return [k for _, k in sorted(ranked, key=lambda item: item[0])]


def _dense_tiles(workload: dict, oc_bn: int, target: TargetLike) -> list:
    """k_bn near 8; with several rows (dim -2 of the data), a rows tile filling the registers too."""
    k, rows = workload["data"][-1], workload["data"][-2]
    k_tiles = sorted(divisors(k, cap=16), key=lambda k_bn: abs(k_bn - 8))
    if rows == 1:
        return [{"k_bn": k_bn} for k_bn in k_tiles]
    lanes, budget = vector_lanes(target), register_budget(target)
    vecs = math.ceil(oc_bn / lanes)
    row_tiles = sorted(
        _widths(rows, max(budget // vecs, 1)),
        key=lambda n_bn: _tile_key(rows, n_bn, n_bn * vecs, budget),
    )
    ranked = [
        ((r + abs(k_bn - 8) // 4, r), {"k_bn": k_bn, "n_bn": n_bn})
        for r, n_bn in enumerate(row_tiles)
        for k_bn in k_tiles
    ]
    return [t for _, t in sorted(ranked, key=lambda item: item[0])]


def tile_variants(workload: dict, blocks: dict, target: TargetLike = None) -> list:
    """All knob dicts with the given channel ``blocks``, best guess first.

    Parameters
    ----------
    workload : dict
    blocks : dict
        ``{"ic_bn", "oc_bn"}`` for (group) conv2d and conv2d_transpose, ``{"bn"}`` for depthwise,
        ``{"oc_bn"}`` or ``{}`` for dense (``{}``: the best-guess block).
    target : Target or dict, optional

    Examples
    --------
    >>> from graphtune.x86.workload import conv2d_workload
    >>> wl = conv2d_workload([1, 8, 6, 6], [8, 8, 3, 3], padding=[1, 1, 1, 1])
    >>> tile_variants(wl, {"ic_bn": 8, "oc_bn": 8})[0]["reg_n"]
    6
    """
    op = op_of(workload)
    if op in ("conv2d", "group_conv2d", "conv2d_transpose"):
        tiles = _conv_tiles(workload, blocks["oc_bn"], target)
    elif op == "depthwise_conv2d":
        tiles = _depthwise_tiles(workload, blocks["bn"], target)
    else:
        if not blocks:
            blocks = {"oc_bn": _dense_blocks(workload, MAX_BLOCK, target)[0]}
        tiles = _dense_tiles(workload, blocks["oc_bn"], target)
    return [{**blocks, **tile} for tile in tiles]


def _ordered_blocks(channels: int, max_block: int, lanes: int) -> list:
    return sorted(divisors(channels, cap=max_block), key=lambda b: (_block_penalty(b, lanes), abs(b - lanes)))


def _group_blocks(workload: dict, max_block: int, lanes: int) -> list:
    """``(tier, {"ic_bn", "oc_bn"})`` of a group conv: vector fit, then the work wasted on
    the zeros of a block spanning several groups (one tier per doubling)."""
    og = group_sizes(workload)[1]
    ocs = sorted((b for b in oc_blocks(workload) if b <= max_block),
                 key=lambda b: (_block_penalty(b, lanes), abs(b - lanes)))
    pairs = []
    for o in ocs:
        waste = max(1, o // og).bit_length() - 1
        for i in _ordered_blocks(span(workload, o), max_block, lanes):
            tier = _block_penalty(o, lanes) + (_block_penalty(i, lanes) + 1) // 2 + waste
            pairs.append((tier, {"ic_bn": i, "oc_bn": o}))
    return pairs


def _dense_blocks(workload: dict, max_block: int, target: TargetLike) -> list:
    lanes = vector_lanes(target)
    m = workload["weight"][0]

    def key(b):  # fraction of vector lanes doing useful work, powers of two (48 and 96 ran 3x slower), bigger
        return (-round(b / (math.ceil(b / lanes) * lanes), 2), b & (b - 1) != 0, -b)

    return sorted(divisors(m, cap=max_block), key=key)


def candidates(
    workload: dict, target: TargetLike = None, max_candidates: int = None, max_block: int = MAX_BLOCK
) -> list:
    """The knob dicts worth measuring for ``workload``, best guesses first.

    Parameters
    ----------
    workload : dict
        A conv2d, conv2d_transpose, depthwise_conv2d, group_conv2d or dense workload.
    target : Target or dict, optional
        Sets the vector width and register budget (default: the host).
    max_candidates : int, optional
        Keep only the first ``max_candidates`` (``None``: all).
    max_block : int
        Largest channel block to enumerate (every divisor up to it is kept).

    Returns
    -------
    list of dict
        Valid knob dicts (each passes :func:`check_knobs`), no duplicates.

    Examples
    --------
    >>> from graphtune.x86.workload import conv2d_workload
    >>> stem = conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3])
    >>> sorted({k["ic_bn"] for k in candidates(stem)})
    [1, 3]
    """
    if max_candidates is not None and (not isinstance(max_candidates, int) or max_candidates < 1):
        raise KnobError(f"max_candidates={max_candidates!r} must be a positive int or None")
    if not isinstance(max_block, int) or max_block < 1:
        raise KnobError(f"max_block={max_block!r} must be a positive int")
    op = op_of(workload)
    lanes = vector_lanes(target)
    if op in ("conv2d", "conv2d_transpose"):
        ics = _ordered_blocks(workload["data"][1], max_block, lanes)
        ocs = _ordered_blocks(output_shape(workload)[1], max_block, lanes)
        groups = [
            (_block_penalty(o, lanes) + (_block_penalty(i, lanes) + 1) // 2, {"ic_bn": i, "oc_bn": o})
            for o in ocs
            for i in ics
        ]
    elif op == "group_conv2d":
        groups = _group_blocks(workload, max_block, lanes)
    elif op == "depthwise_conv2d":
        blocks = _ordered_blocks(workload["data"][1], max_block, lanes)
        groups = [(_block_penalty(b, lanes), {"bn": b}) for b in blocks]
    else:
        groups = [(tier, {"oc_bn": b}) for tier, b in enumerate(_dense_blocks(workload, max_block, target))]
    # the r-th best tile of a block group of tier t ranks with the best tiles of tier t + r
    ranked = []
    for order, (tier, group) in enumerate(groups):
        for rank, knobs in enumerate(tile_variants(workload, group, target)):
            ranked.append(((tier + rank, order), knobs))
    result = [k for _, k in sorted(ranked, key=lambda item: item[0])]
    return result[:max_candidates] if max_candidates else result


def _block_near(channels: int, block: int) -> int:
    """The divisor of ``channels`` closest to ``block`` (ties: the larger)."""
    return min(divisors(channels), key=lambda d: (abs(d - block), -d))


def default_knobs(workload: dict, block: int = 16, target: TargetLike = None) -> dict:
    """A reasonable untuned candidate whose channel blocks are ``block`` where possible.

    The channel blocks are the divisors of the channel counts nearest to
    ``block`` (the stem's 3 input channels give ``ic_bn=3``); tiles come from
    the best-guess ordering of :func:`graphtune.x86.candidates`. Dense ignores
    ``block`` (its layout is always ``NC``).

    Examples
    --------
    >>> from graphtune.x86.workload import conv2d_workload
    >>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
    >>> k = default_knobs(wl, block=16)
    >>> k["ic_bn"], k["oc_bn"], k["unroll_kw"]
    (16, 16, True)
    """
    if not isinstance(block, int) or block < 1:
        raise KnobError(f"default_knobs block={block!r} must be a positive int (e.g. 16)")
    op = op_of(workload)
    if op == "dense":
        blocks = {}
    elif op == "depthwise_conv2d":
        blocks = {"bn": _block_near(workload["data"][1], block)}
    elif op == "group_conv2d":
        oc_bn = min(oc_blocks(workload), key=lambda d: (abs(d - block), -d))
        blocks = {"ic_bn": _block_near(span(workload, oc_bn), block), "oc_bn": oc_bn}
    else:
        blocks = {
            "ic_bn": _block_near(workload["data"][1], block),
            "oc_bn": _block_near(output_shape(workload)[1], block),
        }
    return tile_variants(workload, blocks, target)[0]
