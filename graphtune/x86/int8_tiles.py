"""Candidate pieces of the int8 conv2d: channel blocks, register tiles, default blocks.

The fp32 conv's rules (:mod:`graphtune.x86.tiles`) with the target's best instruction exact on
the workload's weights (:func:`graphtune.x86.int8_isa.isa_of`: ``avx2ubs`` only where its
``weight_pair_max`` allows ``vpmaddubsw``, else ``avx2`` on an AVX2 host): input blocks are
multiples of its ``dot``, output blocks are ranked by how they fill its int32 ``lanes``, and
every tile carries the ``isa`` its output block runs on (:func:`graphtune.x86.int8_isa.isa_for`:
a block of whole 8-lane but not 16-lane vectors on ``avx512vnni256`` beside ``avx512vnni``).

Examples
--------
>>> from graphtune.ops import conv2d_int8_workload
>>> wl = conv2d_int8_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> haswell = {"kind": "llvm", "mcpu": "haswell"}
>>> int8_blocks(wl, 64, haswell)[0], int8_default(wl, 16, haswell)
((0, {'ic_bn': 8, 'oc_bn': 8}), {'ic_bn': 16, 'oc_bn': 16})
>>> int8_tiles(wl, {"ic_bn": 16, "oc_bn": 16}, haswell)[0]
{'ic_bn': 16, 'oc_bn': 16, 'reg_n': 2, 'unroll_kw': True, 'isa': 'avx2', 'widen': True}
>>> int8_tiles({**wl, "weight_pair_max": 128}, {"ic_bn": 16, "oc_bn": 16}, haswell)[0]["isa"]
'avx2ubs'
"""

from itertools import zip_longest

from ..ops import op_of, output_shape
from . import amx
from .dense_int8 import as_conv2d_int8
from .groups import oc_blocks, span
from .int8_isa import ISAS, element_of, isa_for, isa_of
from .knobs import DENSE_INT8_KNOBS, divisors, register_budget
from .target import TargetLike
from .tiles import (
    MAX_BLOCK,
    _block_penalty,
    _group_pairs,
    _ordered_blocks,
    _register_tiles,
    _rows_outer,
)

__all__ = ["int8_blocks", "group_int8_blocks", "group_int8_default",
           "int8_tiles", "padded_rows_fit", "int8_order", "int8_default",
           "dense_int8_blocks", "dense_int8_tiles", "dense_int8_default"]


def _input_blocks(channels: int, max_block: int, lanes: int, dot: int) -> list:
    return [b for b in _ordered_blocks(channels, max_block, lanes) if b % dot == 0]


def int8_blocks(workload: dict, max_block: int, target: TargetLike) -> list:
    """``(tier, {"ic_bn", "oc_bn"})`` pairs: vector fit of the output block, then of the input one
    (none when no input block is a multiple of the instruction's ``dot``: pad the channels)."""
    isa = isa_of(target, workload)
    ics = _input_blocks(workload["data"][1], max_block, isa.lanes, isa.dot)
    ocs = _ordered_blocks(output_shape(workload, op_of(workload))[1], max_block, isa.lanes)
    return [(_block_penalty(o, isa.lanes) + (_block_penalty(i, isa.lanes) + 1) // 2, {"ic_bn": i, "oc_bn": o})
            for o in ocs for i in ics]


def group_int8_blocks(workload: dict, max_block: int, target: TargetLike) -> list:
    """``(tier, {"ic_bn", "oc_bn"})`` pairs of an int8 group conv: :func:`int8_blocks`' vector
    fit, with the output blocks that map onto groups (:func:`graphtune.x86.groups.oc_blocks`)
    and the input blocks dividing their span, plus one tier per doubling of the work wasted on
    the zeros of a block spanning several groups (the fp32 group conv's ``tiles._group_pairs``
    with input blocks of whole instruction dots).

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 128, 56, 56], [128, 4, 3, 3], padding=[1, 1, 1, 1], groups=32)
    >>> group_int8_blocks(wl, 64, {"kind": "llvm", "mcpu": "sapphirerapids"})[0]
    (2, {'ic_bn': 16, 'oc_bn': 16})
    """
    isa = isa_of(target, workload)
    return sorted(_group_pairs(workload, max_block, isa.lanes, isa.dot), key=lambda pair: pair[0])


def group_int8_default(workload: dict, block: int, target: TargetLike) -> dict:
    """The valid channel blocks of an int8 group conv nearest to ``block`` (ties: the larger)."""
    isa = isa_of(target, workload)
    oc_bn = min(oc_blocks(workload), key=lambda d: (abs(d - block), -d))
    ics = [d for d in divisors(span(workload, oc_bn)) if d % isa.dot == 0] or [span(workload, oc_bn)]
    return {"ic_bn": min(ics, key=lambda d: (abs(d - block), -d)), "oc_bn": oc_bn}


def int8_tiles(workload: dict, blocks: dict, target: TargetLike) -> list:
    """Knobs of an int8 conv2d with ``blocks``: the fp32 conv's register tiles on the target's
    best instruction, each with the activations widened to int16 by the padding pass first
    (``vpmaddwd``), then without; a 1x1 conv whose input is its largest operand has its threads
    share output rows, as the fp32 conv's (``rows_outer``, :func:`graphtune.x86.tiles._rows_outer`).
    A tensorized tile has no tail: the tiles whose ``reg_n`` / ``oh_bn`` divide the output width /
    height come first, then the others: a ``reg_n`` whose whole tiles cover at most an eighth
    more columns than the output has (:func:`padded_rows_fit`) as it is (the kernel computes the
    padded width, :func:`graphtune.x86.conv2d_int8.computed_width`), else made the largest
    divisor below it, as is ``oh_bn``; duplicates dropped, and so is a tile made one pixel that
    way (it re-reads its kernel vectors per instruction, beside the same vectors' tiles that
    divide). An output 37 wide (Inception-v3's stem at 75 px) gets tiles of 2 to 5 pixels over
    38 to 40 columns instead of ``reg_n`` 1.

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> stem = conv2d_int8_workload([1, 4, 75, 75], [32, 4, 3, 3], strides=[2, 2])
    >>> sorted({t["reg_n"] for t in int8_tiles(stem, {"ic_bn": 4, "oc_bn": 16},
    ...                                        {"kind": "llvm", "mcpu": "haswell"})})
    [2, 3, 4, 5]
    """
    kh, kw = workload["kernel"][2:]
    _, _, oh, ow = output_shape(workload, op_of(workload))
    isa = isa_for(target, workload, blocks["oc_bn"])
    widen = (True, False) if isa.dot == 2 and isa.element == "int8" else (False,)
    fp32 = _register_tiles(workload, op_of(workload), blocks["oc_bn"], target, kh, kw, 1, in_flight=0)
    tiles = [tile for tile in fp32 if ow % tile["reg_n"] == 0 and oh % tile.get("oh_bn", 1) == 0]
    for tile in fp32:  # the others, padded or made to divide, after those
        if not padded_rows_fit(ow, tile["reg_n"]):
            tile = {**tile, "reg_n": divisors(ow, cap=tile["reg_n"])[-1]}
        if "oh_bn" in tile:
            tile["oh_bn"] = divisors(oh, cap=tile["oh_bn"])[-1]
        if tile["reg_n"] * tile.get("oh_bn", 1) > 1 and tile not in tiles:
            tiles.append(tile)
    rows = {"rows_outer": True} if kh == kw == 1 and _rows_outer(workload) else {}
    return [{**blocks, **tile, **rows, "isa": isa.name, **({"widen": True} if wide else {})}
            for tile in tiles for wide in widen] + _amx_tiles(workload, blocks, target, ow)


def padded_rows_fit(width: int, rows: int) -> bool:
    """Whether whole tiles of ``rows`` pixels cover ``width`` output columns with at most an
    eighth more (the padded columns are computed and dropped).

    Examples
    --------
    >>> padded_rows_fit(71, 8), padded_rows_fit(17, 16), padded_rows_fit(56, 14)
    (True, False, True)
    """
    return rows <= width and 8 * (-(-width // rows) * rows - width) <= width


AMX_MIN_K = 16
"""Fewest bytes one ``tdpbusd`` of an AMX candidate sums per pixel (input channels x folded taps)."""


def _amx_tiles(workload: dict, blocks: dict, target: TargetLike, ow: int) -> list:
    """The AMX register tiles of an undilated conv with ``blocks`` where this process may
    run them (:func:`graphtune.x86.amx.usable`; ``knobs._amx_rules``): a row of ``reg_n`` pixels,
    every 16 output channels one tile (for bfloat16, every 8 where 16 does not divide the block).
    ``tdpbusd`` takes as long for a few rows as for 16, so
    first the rows of the fewest tiles covering the output width (each as short as that count
    allows: 15 for 147 or 71 columns, 12 for 35, 14 for 56), then the largest divisor of the
    width from 2 to 16 (where there is none, the rows from 2 to 16 covering the fewest padded
    columns, :func:`padded_rows_fit`: 6 for 17). Reductions of at least :data:`AMX_MIN_K` bytes
    per instruction (:func:`graphtune.x86.amx.chunk_bytes`: a 4-byte tile row uses a sixteenth
    of ``tdpbusd``; the RGB stem's 7 taps of 4 channels fold into 28 bytes)."""
    kw = workload["kernel"][3]
    isa = next(isa for isa in ISAS.values() if not isa.general and isa.element == element_of(workload))
    if (workload["dilation"] != [1, 1] or not blocks["ic_bn"] * 4 // isa.dot <= amx.MAX_K
            or amx.chunk_bytes(blocks["ic_bn"], kw, isa.dot) < AMX_MIN_K or ow < 2
            or not 1 <= _accumulators(blocks["oc_bn"], isa.element) <= amx.MAX_TILES
            or not amx.usable(target, isa.element)):
        return []
    tiles = -(-ow // amx.MAX_ROWS)  # the fewest tiles covering the width
    fewest = -(-ow // tiles)  # their shortest rows
    whole = [d for d in divisors(ow, cap=amx.MAX_ROWS) if d >= 2][-2:][::-1]
    padded = sorted((r for r in range(2, amx.MAX_ROWS + 1) if ow % r and padded_rows_fit(ow, r)),
                    key=lambda r: (-(-ow // r) * r, -r))
    rows = [fewest] + [r for r in whole + padded if r != fewest][:1]
    plain = [{**blocks, "reg_n": r, "unroll_kw": False, "isa": isa.name} for r in rows]
    return _stacked_tiles(workload, plain[0], ow) + plain


def _accumulators(block: int, element: str) -> int:
    """AMX accumulator tiles of an output block of ``block`` channels a candidate may use
    (:func:`graphtune.x86.amx.accumulator_tiles`): tiles of 8 channels for bfloat16 only (int8's
    candidates are measured with tiles of 16); 0 where none fit."""
    return 0 if block % 16 and element != "bfloat16" else amx.accumulator_tiles(block)


STACK_PIXEL_TILES = 4
"""Input tiles an AMX register tile of one accumulator per input tile stacks (fewer with wider
output blocks: :data:`graphtune.x86.amx.MAX_TILES` accumulators in all)."""


def _stacked_tiles(workload: dict, tile: dict, ow: int) -> list:
    """The AMX register tile of a bfloat16 conv of ``kh x kw > 1`` taps and stride 1 that stacks
    input tiles (knob ``pixel_tiles``: each kernel slice loaded once per that many tiles,
    ``docs/bf16.md``): along the row (``tile``'s rows, as many tiles as cover the width with at
    most an eighth padded, :func:`padded_rows_fit`) where a row holds more than one, else over
    the map flattened at its padded width (knob ``flat``: tiles of 16 rows, which a 7x7 map's 63
    flat pixels fill in 4 instead of 7 tiles of 7). Up to :data:`STACK_PIXEL_TILES` tiles, a
    power of two (fewer with wider output blocks: :data:`graphtune.x86.amx.MAX_TILES`
    accumulators in all). None for 1x1 convs (their kernel slices stream from L1), strided convs
    (their maps do not flatten; stacked along rows they were mostly slower) or int8.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload, runs_as
    >>> wl = runs_as("conv2d", conv2d_workload([1, 512, 7, 7], [512, 512, 3, 3], padding=[1, 1, 1, 1]),
    ...              {"precision": "bfloat16"})[1]
    >>> tile = {"ic_bn": 32, "oc_bn": 16, "reg_n": 7, "unroll_kw": False, "isa": "amxbf16"}
    >>> [{k: v for k, v in t.items() if k not in tile or v != tile[k]} for t in _stacked_tiles(wl, tile, 7)]
    [{'reg_n': 16, 'flat': 1, 'pixel_tiles': 4}]
    """
    if (element_of(workload) != "bfloat16" or workload["kernel"][2] * workload["kernel"][3] == 1
            or workload["strides"] != [1, 1] or workload["groups"] != 1):
        return []
    most = min(STACK_PIXEL_TILES, amx.MAX_TILES // _accumulators(tile["oc_bn"], "bfloat16"))
    most = 1 << (most.bit_length() - 1)
    if most < 2:
        return []
    along = max(p for p in range(1, most + 1) if p == 1 or padded_rows_fit(ow, tile["reg_n"] * p))
    if along > 1:
        return [{**tile, "pixel_tiles": along}]
    return [{**tile, "reg_n": amx.MAX_ROWS, "flat": 1, "pixel_tiles": most}]


def int8_order(ranked: list, workload: dict, target: TargetLike) -> list:
    """The int8 conv2d's candidates ``ranked`` by block tier and tile rank, reordered: those whose
    output block is whole vectors of the instruction take turns by register-tile shape (output
    vectors x pixels, ``oc_bn / lanes`` x ``reg_n * oh_bn``), each shape's in ranked order; the
    others (a partial vector runs on plain int32 vectors, many times slower) follow.

    Which shape is fastest varies by layer far more than anything else the candidates vary (the
    input block hardly matters), so the first few candidates each try another shape
    (``docs/candidates.md``, "int8 register tiles").

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 64, 56, 56], [64, 64, 1, 1], weight_pair_max=128)
    >>> haswell = {"kind": "llvm", "mcpu": "haswell"}
    >>> ranked = [{"ic_bn": i, "oc_bn": o, "reg_n": r, "unroll_kw": False, "oh_bn": 1, "isa": "avx2ubs"}
    ...           for i, o, r in ((8, 8, 8), (16, 8, 8), (8, 4, 8), (8, 64, 1), (16, 64, 1))]
    >>> [(k["ic_bn"], k["oc_bn"]) for k in int8_order(ranked, wl, haswell)]
    [(8, 8), (8, 64), (16, 8), (16, 64), (8, 4)]
    """
    shapes: dict[tuple[bool, int, int], list] = {}
    partial = []
    for knobs in ranked:
        isa = ISAS[knobs["isa"]]
        if knobs["oc_bn"] % isa.lanes and (isa.general or not amx.tile_columns(knobs["oc_bn"])):
            partial.append(knobs)
        else:  # (an AMX block of 8-channel tiles counts its tiles)
            pixels = knobs["reg_n"] * knobs.get("oh_bn", 1) * knobs.get("pixel_tiles", 1)
            vectors = knobs["oc_bn"] // (isa.lanes if isa.general else amx.tile_columns(knobs["oc_bn"]))
            shape = (isa.general, vectors, pixels)
            shapes.setdefault(shape, []).append(knobs)
    for (general, _, _), found in shapes.items():
        # the widest instruction first (a shape's vectors on zmm do twice the work of those on
        # ymm), then square blocks: a chain of them needs no layout transform; an AMX tile sums
        # ic_bn channels per instruction, so the widest input block before that
        found.sort(key=lambda knobs: (0 if general else -knobs["ic_bn"], -ISAS[knobs["isa"]].lanes,
                                      knobs["ic_bn"] != knobs["oc_bn"]))

    def turns(general: bool) -> list:
        groups = [found for shape, found in shapes.items() if shape[0] == general]
        if not general:  # AMX: the most pixels (stacked tiles), then the most accumulator tiles first
            groups.sort(key=lambda found: (-found[0]["reg_n"] * found[0].get("pixel_tiles", 1),
                                           -found[0]["oc_bn"]))
        return [knobs for turn in zip_longest(*groups) for knobs in turn if knobs is not None]

    # the AMX tiles take every other turn: the first few candidates try both instructions
    both = zip_longest(turns(True), turns(False))
    return [knobs for pair in both for knobs in pair if knobs is not None] + partial


def int8_default(workload: dict, block: int, target: TargetLike) -> dict:
    """The valid channel blocks nearest to ``block`` (ties: the larger)."""
    isa = isa_of(target, workload)

    def near(found: list) -> int:
        return min(found, key=lambda d: (abs(d - block), -d))

    ics = [d for d in divisors(workload["data"][1]) if d % isa.dot == 0]
    return {"ic_bn": near(ics or [workload["data"][1]]),
            "oc_bn": near(divisors(output_shape(workload, op_of(workload))[1]))}


def dense_int8_blocks(workload: dict, max_block: int, target: TargetLike) -> list:
    """``(tier, {"ic_bn", "oc_bn"})`` of an int8 dense. Its output block is its whole register tile
    (one pixel: each ``isa`` broadcast of the input feeds ``oc_bn / lanes`` instructions), so whole
    vectors come first, the most of them first (up to the register budget), then the vector fit
    of other blocks; its layout is ``NC`` whatever the blocks, so an input block is no layout
    choice: each after the best ranks one tier lower.

    Examples
    --------
    >>> from graphtune.ops import dense_int8_workload
    >>> wl = dense_int8_workload([1, 512], [1000, 512], out_dtype="float32")
    >>> haswell = {"kind": "llvm", "mcpu": "haswell"}
    >>> [(tier, b["oc_bn"], b["ic_bn"]) for tier, b in dense_int8_blocks(wl, 64, haswell)][:3]
    [(0, 40, 8), (1, 40, 16), (2, 40, 32)]
    """
    conv = as_conv2d_int8(workload)[0]
    isa = isa_of(target, workload)
    ics = _input_blocks(conv["data"][1], max_block, isa.lanes, isa.dot)
    cap = min(max_block, register_budget(target) * isa.lanes)

    def tier(block: int) -> int:
        return 0 if block % isa_for(target, workload, block).lanes == 0 else _block_penalty(block, isa.lanes)

    ocs = sorted(divisors(workload["weight"][0], cap), key=lambda o: (tier(o), -o))
    return [(tier(o) + rank, {"ic_bn": i, "oc_bn": o}) for o in ocs for rank, i in enumerate(ics)]


def dense_int8_tiles(workload: dict, blocks: dict, target: TargetLike) -> list:
    """Knobs of an int8 dense with ``blocks``: its 1x1-map conv2d_int8's (:func:`int8_tiles`: one
    pixel) without the tile knobs a 1x1 map fixes, unwidened first (``widen`` is a parallel pass
    of its own over an input each output block reads once).

    Examples
    --------
    >>> from graphtune.ops import dense_int8_workload
    >>> wl = dense_int8_workload([1, 2048], [1000, 2048], out_dtype="float32")
    >>> dense_int8_tiles(wl, {"ic_bn": 16, "oc_bn": 40}, {"kind": "llvm", "mcpu": "haswell"})
    [{'ic_bn': 16, 'oc_bn': 40, 'isa': 'avx2'}, {'ic_bn': 16, 'oc_bn': 40, 'isa': 'avx2', 'widen': True}]
    """
    names = DENSE_INT8_KNOBS.required + DENSE_INT8_KNOBS.optional
    found = [{k: v for k, v in knobs.items() if k in names}
             for knobs in int8_tiles(as_conv2d_int8(workload)[0], blocks, target)]
    return sorted(found, key=lambda knobs: knobs.get("widen", False))


def dense_int8_default(workload: dict, block: int, target: TargetLike) -> dict:
    """An int8 dense ignores ``block`` (its layout is always ``NC``): the best-ranked blocks
    (channels no ``dot`` divides get the nearest ones, which the knob check refuses by name)."""
    ranked = dense_int8_blocks(workload, MAX_BLOCK, target)
    if not ranked:
        return int8_default(as_conv2d_int8(workload)[0], block, target)
    return min(ranked, key=lambda pair: pair[0])[1]
