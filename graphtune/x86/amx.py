"""Intel AMX for the int8 conv2d: the tile instructions as TIR tensor intrinsics.

AMX (Sapphire / Emerald Rapids and later) multiplies tiles: ``tdpbusd tmm0, tmm1, tmm2`` adds to
the int32 tile ``C`` (``rows x 16``) the products of the uint8 tile ``A`` (``rows x K`` bytes,
``K <= 64``) and the int8 tile ``B`` (``K/4 x 64`` bytes: 16 output channels x 4 input channels
per row), ``rows x 16 x K`` multiply-adds in one instruction (VNNI's ``vpdpbusd`` does 64).
The blocked layouts of the int8 conv2d already are the tiles' (:mod:`graphtune.x86.conv2d_int8`,
isa ``amx``): the ``ic_bn`` channels of the input pixels under consecutive output pixels are the
rows of ``A`` (``stride * ic_bn`` bytes apart: a strided conv loads every ``stride``-th pixel),
the packed kernel ``OIHW{ic_bn/4}i{oc_bn}o4i`` holds ``B`` (rows ``oc_bn * 4`` bytes apart, one
tile per 16 output channels), the int32 accumulator of a ``reg_n``-pixel register tile holds
``C``.

- :func:`reduction_intrin`: a register tile's whole reduction: its ``oc_bn / 16`` accumulator
  tiles zeroed, then for every ``(ic_chunk, kh)`` and chunk of the row's ``kw`` taps x
  ``ic_bn`` channels (contiguous bytes, :func:`chunk_bytes`) one input tile and, per 16
  channels, one kernel slice loaded and one ``tdpbusd``, the accumulators stored once;
- :func:`init_intrin`: the register tile's init, as nothing (the reduction zeroes its tiles);
- :func:`tile_config` / :func:`place_configs`: the tile configuration (``ldtilecfg``: the
  tiles' shapes) loaded at the start of every iteration of the loop the schedule annotates with
  :data:`CONFIG_ATTR` -- its parallel loop, each iteration a band of output rows, so every
  thread has it before its first tile. ``ldtilecfg`` takes about 200 ns (600 cycles) on
  Sapphire Rapids, as long as a few ``tdpbusd``: loaded once per register tile it cost AMX
  kernels up to half their time (``docs/int8.md``).

Linux hands AMX's tile state to a process only after it asks (``arch_prctl
ARCH_REQ_XCOMP_PERM``); until then the first tile instruction is a SIGILL.
:func:`request_permission` asks (once per process; graphtune asks before it runs a compiled
model or times a kernel), and :func:`usable` says whether this process may run AMX code for a
target: the target has ``amx-int8`` and ``amx-tile`` and the kernel granted the tile state.

Examples
--------
>>> reduction_intrin(14, 64, 2, (1, 3, 3)), init_intrin(14, 32)
('graphtune_amx_14x64x2_1x3x3', 'graphtune_amx_init_14x32_int32')
>>> reduction_intrin(7, 64, 4, (8, 1, 1), stride=2)
'graphtune_amx_7x64x4_8x1x1_s2'
>>> usable({"kind": "llvm", "mcpu": "znver4"})
False
"""

from __future__ import annotations

import ctypes
import json
import platform
from functools import cache

from tvm import tirx
from tvm.s_tir import TensorIntrin
from tvm.script import tirx as T
from tvm.script.parser import parse

from .target import TargetLike, _features, host_target

__all__ = ["FEATURES", "MAX_ROWS", "MAX_K", "MAX_TILES", "tile_columns", "accumulator_tiles", "CONFIG_ATTR",
           "request_permission",
           "usable", "reduction_intrin", "init_intrin", "tile_config", "place_configs", "chunk_bytes"]

FEATURES = ("amx-int8", "amx-tile")
"""The LLVM target features the int8 tile instructions need."""

BF16_FEATURES = ("amx-bf16", "amx-tile")
"""The LLVM target features the bfloat16 tile instructions need (``tdpbf16ps``)."""

_ELEMENTS = {"int8": ("uint8", "int8", "int32", "tdpbusd", FEATURES),
             "bfloat16": ("uint16", "uint16", "float32", "tdpbf16ps", BF16_FEATURES)}
"""Per element type: the input tile's and the kernel's storage, the accumulators, the
instruction, the features. A 4-byte group is 4 int8 or 2 bfloat16 (stored as their bits)."""

MAX_ROWS = 16
"""Rows of a tile: output pixels of one ``tdpbusd``."""

MAX_K = 64
"""Bytes per tile row: input channels one ``tdpbusd`` sums."""

MAX_TILES = 6
"""Accumulator tiles of a register tile (16 output channels each, or 8: :func:`tile_columns`):
AMX has 8 tile registers, one holds the input row, one the kernel slice."""


def tile_columns(block: int) -> int:
    """Output channels per accumulator tile of an output block of ``block`` channels: 16 (a
    tile's 64-byte rows of float32 / int32), or 8 where 16 does not divide it (24, 40, 72...:
    the tiles' rows configured 32 bytes long; ``tdpbf16ps`` takes about as long, half the
    work, still far faster than the vector instructions). 0: neither divides it.

    Examples
    --------
    >>> tile_columns(64), tile_columns(24), tile_columns(12)
    (16, 8, 0)
    """
    return 16 if block % 16 == 0 else 8 if block % 8 == 0 else 0


def accumulator_tiles(block: int) -> int:
    """Accumulator tiles of an output block of ``block`` channels (:func:`tile_columns` each);
    0 where no tile width divides it.

    Examples
    --------
    >>> accumulator_tiles(64), accumulator_tiles(24), accumulator_tiles(12)
    (4, 3, 0)
    """
    columns = tile_columns(block)
    return block // columns if columns else 0

_SYS_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


@cache
def request_permission() -> bool:
    """Ask Linux for the AMX tile state for this process (once); whether it was granted.

    False where the CPU has no AMX, the kernel predates the request (Linux < 5.16) or this is
    not Linux x86-64: then no AMX candidate is offered.
    """
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        with open("/proc/cpuinfo") as info:
            flags = info.read().split()
    except OSError:
        return False
    if "amx_tile" not in flags:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0


def usable(target: TargetLike = None, element: str = "int8") -> bool:
    """Whether AMX candidates multiplying ``element`` values may be offered for ``target``: it has
    the instruction's features (:data:`FEATURES`, :data:`BF16_FEATURES`) and this process was
    granted the tile state (it runs and measures them)."""
    key = json.dumps(target, sort_keys=True) if isinstance(target, dict) else str(target)
    if key not in _TARGET_FEATURES:  # resolving a target takes a millisecond; candidates ask often
        _TARGET_FEATURES[key] = set(_features(host_target(target)))
    return _TARGET_FEATURES[key].issuperset(_ELEMENTS[element][4]) and request_permission()


_TARGET_FEATURES: dict[str, set] = {}


def chunk_bytes(k: int, kw: int, dot: int = 4) -> int:
    """Bytes one tile instruction sums per pixel when a register tile reduces over ``kw`` taps of
    ``k`` channels of ``4 / dot`` bytes each (``dot``: 4 int8 or 2 bfloat16 per 4-byte group): in
    a ``NCHW{k}c`` row the ``k`` channels of the ``kw`` pixels under one output pixel are
    contiguous, so the taps of a row fold into the tile's reduction, cut into the fewest equal
    chunks of at most :data:`MAX_K` bytes (a multiple of 4: the instruction's groups); ``k``'s
    own bytes when no fewer chunks than ``kw`` do (or when they are no tile row: not a
    multiple of 4 or above :data:`MAX_K`).

    Examples
    --------
    >>> chunk_bytes(32, 3), chunk_bytes(40, 3), chunk_bytes(4, 7), chunk_bytes(64, 3), chunk_bytes(44, 3)
    (48, 60, 28, 64, 44)
    >>> chunk_bytes(16, 3, dot=2), chunk_bytes(32, 3, dot=2), chunk_bytes(2, 7, dot=2)
    (48, 64, 28)
    """
    size = 4 // dot
    total = k * kw * size
    return next((total // n for n in range(1, kw + 1)
                 if total % n == 0 and total // n % 4 == 0 and total // n <= MAX_K), k * size)


def _source(name: str, lines: list[str]) -> str:
    signature = f"def {name}(a: T.handle, b: T.handle, c: T.handle) -> None:"
    return "\n".join(["@T.prim_func(s_tir=True)", signature, *("    " + line for line in lines)])


def _tile_op(op: str, *args: str) -> str:
    """TVMScript of one AMX intrinsic call (tile register numbers and pointers as given)."""
    return f"T.evaluate(T.call_llvm_intrin('void', 'llvm.x86.{op}', {', '.join(args)}))"


def _product(a: str, b: str, element: str) -> str:
    """TVMScript of one product of the update block, as the conv's TE compute spells it."""
    if element == "int8":
        return f"T.Cast('int32', {a}) * T.Cast('int32', {b})"
    return " * ".join(f"T.reinterpret('float32', T.shift_left(T.Cast('uint32', {x}), T.uint32(16)))"
                      for x in (a, b))


@cache
def reduction_intrin(rows: int, k: int, tiles: int, steps: tuple[int, int, int], stride: int = 1,
                     element: str = "int8", row: int = 0, pixel_tiles: int = 1, columns: int = 16) -> str:
    """Register (once) and name the whole reduction of a register tile: for every ``(ic_chunk,
    kh)`` of ``steps`` (the extents of ``ic_chunk, kh, kw``), every chunk of the row's taps
    (:func:`chunk_bytes`: the ``k`` channels of the ``kw`` pixels under an output pixel lie next
    to each other) and each of ``tiles`` tiles of ``columns`` (16 or 8) output channels,
    ``C[rows, columns * tiles] += A . B`` by
    ``tdpbusd`` (``element`` int8: uint8 x int8 into int32) or ``tdpbf16ps`` (bfloat16, stored
    as uint16, into float32), in the tiles ``tmm0..`` (zeroed first, stored to ``C`` after),
    ``A`` (``rows`` pixels x the chunk, every ``stride``-th pixel: the tile load's row stride is
    ``stride`` pixels) loaded into ``tmm6``, each ``B`` (the chunk's 4-byte groups x 16 output
    channels of the packed kernel, whose ``(kw, ic_bn / dot)`` rows are as contiguous) into
    ``tmm7``. A 3x3 int8 conv of 32-channel blocks sums 48 bytes per instruction instead of 32;
    the RGB stem's 7 taps of 4 channels, 28 instead of 4.

    The tiles start from zero, not from ``C``: the schedule puts this right after the register
    tile's init (:func:`init_intrin`, which therefore does nothing), and the reduction is the
    conv's whole one, so ``C`` holds zeros there anyway.

    The description spells the conv's update block as the schedule leaves it: loops ``[tile,]
    pixel, lane, ic_chunk, kh, kw, ic_outer, ic_inner`` (one extent-1 ``tile`` loop is never
    split off), block axes only for the reduction loops longer than 1 (TVM drops the others).

    With ``row`` (a conv over its map flattened at the padded width ``row``, knob ``flat``), ``A``
    is one flattened map per input chunk: the taps of kernel row ``kh`` start ``kh * row``
    pixels after those of row 0, so a tile's pixels may span rows of the map.

    With ``pixel_tiles`` > 1 the register tile is that many input tiles of ``rows`` pixels each,
    one after the other, by ``tiles`` accumulators each: per reduction step each kernel slice is
    loaded once and multiplied by every input tile (loaded again per slice, from L1), so a
    kernel streamed from L2 or memory is read a ``pixel_tiles``-th as often.
    """
    a_type, b_type, c_type, instruction, _ = _ELEMENTS[element]
    dot = 4 if element == "int8" else 2
    size = 4 // dot  # bytes per element
    icc, kh, kw = steps
    groups, width = k // dot, columns * tiles
    pixels = rows * pixel_tiles
    span = (pixels - 1) * stride + kw
    a_shape = f"{icc}, {(kh - 1) * row + span}" if row else f"{icc}, {kh}, {span}"
    a_region = ", ".join(f"0:{extent}" for extent in a_shape.split(", "))
    head = [f"A = T.match_buffer(a, ({a_shape}, {k}), '{a_type}', "
            f"strides=[{'T.int32(), ' * (2 if row else 3)}1], offset_factor=1)",
            f"B = T.match_buffer(b, ({icc}, {kh}, {kw}, {groups}, {width}, {dot}), '{b_type}', "
            f"strides=[T.int32(), T.int32(), T.int32(), T.int32(), {dot}, 1], offset_factor=1)",
            f"C = T.match_buffer(c, ({pixels}, {width}), '{c_type}', strides=[T.int32(), 1], "
            "offset_factor=1, scope='local')",
            "with T.sblock('root'):",
            f"    T.reads(C[0:{pixels}, 0:{width}], A[{a_region}, 0:{k}], "
            f"B[0:{icc}, 0:{kh}, 0:{kw}, 0:{groups}, 0:{width}, 0:{dot}])",
            f"    T.writes(C[0:{pixels}, 0:{width}])"]
    loops = ([("v", tiles)] if tiles > 1 else []) + [("i", pixels), ("j", columns), ("q", icc), ("h", kh),
                                                      ("w", kw), ("ko", groups), ("ki", dot)]
    reduce = {name: (f"v{name}" if extent > 1 else "0") for name, extent in loops[-5:]}
    pixel = f" * {stride}" if stride > 1 else ""
    channel = f"{reduce['ko']} * {dot} + {reduce['ki']}"
    if row:
        a_value = f"A[{reduce['q']}, {reduce['h']} * {row} + vi{pixel} + {reduce['w']}, {channel}]"
    else:
        a_value = f"A[{reduce['q']}, {reduce['h']}, vi{pixel} + {reduce['w']}, {channel}]"
    b_value = f"B[{reduce['q']}, {reduce['h']}, {reduce['w']}, {reduce['ko']}, vj, {reduce['ki']}]"
    desc = head + [
        f"    for {', '.join(n for n, _ in loops)} in T.grid({', '.join(str(e) for _, e in loops)}):",
        "        with T.sblock('update'):",
        f"            vi = T.axis.spatial({pixels}, i)",
        f"            vj = T.axis.spatial({width}, {f'v * {columns} + j' if tiles > 1 else 'j'})",
        *(f"            v{name} = T.axis.reduce({extent}, {name})" for name, extent in loops[-5:]
          if extent > 1),
        f"            C[vi, vj] = C[vi, vj] + {_product(a_value, b_value, element)}"]
    c_tile = f"C.access_ptr('w', offset=s * {rows} * C.strides[0] + t * {columns}), T.int64(C.strides[0] * 4)"
    chunk = chunk_bytes(k, kw, dot) // size  # elements: the kw taps' k channels are contiguous
    kernel_row = f"h * {row} * A.strides[1]" if row else "h * A.strides[1]"
    pixel_stride = "A.strides[1]" if row else "A.strides[2]"
    b_slice = ("B.access_ptr('r', offset=q * B.strides[0] + h * B.strides[1]"
               f" + c * {chunk // dot} * B.strides[3] + t * {columns * dot})")
    load_b = _tile_op("tileloadd64", "T.int8(7)", b_slice, f"T.int64(B.strides[3] * {size})")

    def load_a(tile: str) -> str:  # input tile ``tile`` (an expression) of the register tile
        a_row = (f"A.access_ptr('r', offset=q * A.strides[0] + {kernel_row} + c * {chunk}"
                 f" + {tile} * {rows * stride} * {pixel_stride})")
        return _tile_op("tileloadd64", "T.int8(6)", a_row, f"T.int64({pixel_stride} * {stride * size})")

    def accumulator(tile: str) -> str:  # the tile register of input tile ``tile``'s accumulator t
        return f"T.int8({tile} * {tiles} + t)"

    if pixel_tiles == 1:  # the input tile once, the kernel slices one after the other
        step = ["        " + load_a("0"), f"        for t in T.unroll({tiles}):",
                "            " + load_b, "            " + _tile_op(instruction, accumulator("0"), "T.int8(6)",
                                                                   "T.int8(7)")]
    else:  # each kernel slice once, the input tiles one after the other
        step = [f"        for t in T.unroll({tiles}):", "            " + load_b,
                f"            for s in T.unroll({pixel_tiles}):", "                " + load_a("s"),
                "                " + _tile_op(instruction, accumulator("s"), "T.int8(6)", "T.int8(7)")]
    every_tile = [f"    for s in T.unroll({pixel_tiles}):", f"        for t in T.unroll({tiles}):"]
    impl = head + [
        *every_tile, "            " + _tile_op("tilezero", accumulator("s")),
        f"    for q, h, c in T.grid({icc}, {kh}, {kw * k // chunk}):",
        *step,
        *every_tile, "            " + _tile_op("tilestored64", accumulator("s"), c_tile)]
    name = (f"graphtune_amx{'' if element == 'int8' else '_bf16'}_{rows}x{k}x{tiles}_{icc}x{kh}x{kw}"
            + (f"_s{stride}" if stride > 1 else "") + (f"_r{row}" if row else "")
            + (f"_p{pixel_tiles}" if pixel_tiles > 1 else "") + (f"_c{columns}" if columns != 16 else ""))
    TensorIntrin.register(name, parse(_source("desc", desc), extra_vars={"T": T}, s_tir=True),
                          parse(_source("impl", impl), extra_vars={"T": T}, s_tir=True), override=True)
    return name


CONFIG_ATTR = "graphtune_amx_config"
"""Annotation of the loop whose every iteration loads the tile configuration first
(:func:`place_configs`): ``[rows, k, width, kw, element, columns]`` of :func:`tile_config`."""


def tile_config(rows: int, k: int, width: int, kw: int = 1, element: str = "int8",
                columns: int = 16) -> tirx.Stmt:
    """The statements loading the tile configuration (``ldtilecfg``) of the tiles
    :func:`reduction_intrin` uses over ``kw`` taps of ``k`` channels: ``tmm0..`` one C per
    ``columns`` (16 or 8) of ``width`` channels and ``tmm6`` A, ``rows`` rows each of the
    reduction's :func:`chunk_bytes`, ``tmm7`` B of a quarter as many rows (palette 1); C's and
    B's rows ``4 * columns`` bytes long."""
    chunk = chunk_bytes(k, kw, 4 if element == "int8" else 2)

    @T.prim_func(s_tir=True)
    def config_func() -> None:
        config = T.decl_buffer((64,), "uint8", scope="local")  # palette 1, per tile: bytes, rows
        for i in range(64):
            config[i] = T.uint8(0)
        config[0] = T.uint8(1)
        for t in range(width // columns):  # C: tmm0.. (bytes per row: uint16 at 16 + 2t; rows: 48 + t)
            config[16 + 2 * t] = T.uint8(4 * columns)
            config[48 + t] = T.uint8(rows)
        config[28] = T.uint8(chunk)  # A: tmm6
        config[54] = T.uint8(rows)
        config[30] = T.uint8(4 * columns)  # B: tmm7
        config[55] = T.uint8(chunk // 4)
        T.evaluate(T.call_llvm_intrin("void", "llvm.x86.ldtilecfg", T.address_of(config[0])))

    return config_func.body


def place_configs(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with :func:`tile_config` at the start of the body of every loop annotated
    :data:`CONFIG_ATTR` (the annotation dropped); ``func`` itself when none is. The loops are
    looked for through blocks, sequences and other loops (where a schedule puts its threads)."""
    from tvm.s_tir import SBlock, SBlockRealize

    def place(stmt):
        if isinstance(stmt, tirx.For):
            body = place(stmt.body)
            notes = dict(stmt.annotations)
            if CONFIG_ATTR in notes:
                rows, k, width, kw, element, columns = notes.pop(CONFIG_ATTR)
                body = tirx.SeqStmt([tile_config(int(rows), int(k), int(width), int(kw), str(element),
                                                 int(columns)), body])
            elif body.same_as(stmt.body):
                return stmt
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding, notes)
        if isinstance(stmt, tirx.SeqStmt):
            parts = [place(part) for part in stmt.seq]
            return stmt if all(a.same_as(b) for a, b in zip(parts, stmt.seq)) else tirx.SeqStmt(parts)
        if isinstance(stmt, SBlockRealize):
            block = stmt.block
            body = place(block.body)
            if body.same_as(block.body):
                return stmt
            return SBlockRealize(stmt.iter_values, stmt.predicate,
                                 SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, body,
                                        block.init, block.alloc_buffers, block.match_buffers,
                                        block.annotations))
        return stmt

    body = place(func.body)
    return func if body.same_as(func.body) else func.with_body(body)


@cache
def init_intrin(rows: int, width: int, element: str = "int8") -> str:
    """Register (once) and name the register tile's init ``C[rows, width] = 0`` (int32 or, for
    bfloat16 ``element``, float32), done as nothing: the reduction right after it zeroes its
    tiles itself and overwrites ``C`` whole, so the zeros are never stored (the tile
    configuration is loaded where the schedule says, :func:`place_configs`)."""

    acc = _ELEMENTS[element][2]
    zero = tirx.const(0, acc)

    @T.prim_func(s_tir=True)
    def desc(c: T.handle) -> None:
        sc = T.int32()
        C = T.match_buffer(c, (rows, width), acc, strides=[sc, 1], offset_factor=1, scope="local")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:rows, 0:width])
            for i, j in T.grid(rows, width):
                with T.sblock("init"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = zero

    @T.prim_func(s_tir=True)
    def impl(c: T.handle) -> None:
        sc = T.int32()
        C = T.match_buffer(c, (rows, width), acc, strides=[sc, 1], offset_factor=1, scope="local")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:rows, 0:width])
            T.evaluate(0)

    name = f"graphtune_amx_init_{rows}x{width}_{acc}"
    TensorIntrin.register(name, desc, impl, override=True)
    return name
