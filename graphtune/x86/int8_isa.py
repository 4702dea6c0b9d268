"""The exact int8 dot-product instructions of x86 and their TIR tensor intrinsics.

An int8 kernel's innermost step is ``C[i] += sum_k A[k] * B[i, k]`` over ``lanes`` int32
accumulators ``C`` and ``dot`` input channels: ``A`` the ``dot`` uint8 activations of one pixel
(broadcast to every lane), ``B`` the weights of ``lanes`` output channels. Each :class:`Isa`
is one instruction doing that step exactly — never saturating:

- ``avx2``: ``vpmaddwd`` (int16 x int16 -> int32 pairs, 16 MACs per ymm instruction); the
  weights are stored as int16, the two activations widened to int16 on load. (``vpmaddubsw``,
  uint8 x int8, saturates its int16 pair sums: ``255 * 127 * 2 > 32767``.)
- ``avx512bw``: the same on zmm registers (32 MACs).
- ``avx512vnni``: ``vpdpbusd`` (uint8 x int8 -> int32 quads, accumulating; 64 MACs), as TVM's
  ``dot_16x4_vnni`` intrinsic (whose call no longer type-checks with the LLVM 22 of the TVM
  0.27 wheel: the intrinsic now takes ``<64 x i8>`` operands); the weights stay int8.

:func:`isa_of` detects the best one a target has (features are read from the target, never
assumed: a Zen 4 guest may hide AVX-512).

Examples
--------
>>> isa_of({"kind": "llvm", "mcpu": "haswell"}).name
'avx2'
>>> isa_of({"kind": "llvm", "mcpu": "znver4"}).name, ISAS["avx512vnni"].dot
('avx512vnni', 4)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tvm.s_tir import TensorIntrin
from tvm.script import tirx as T

from ..errors import KnobError
from .target import TargetLike, _features, host_target

__all__ = ["Isa", "ISAS", "isa_of", "isas_of", "check_isa", "tensor_intrin"]


@dataclass(frozen=True)
class Isa:
    """One exact int8 dot-product instruction.

    Attributes
    ----------
    name : str
        The knob value (``isa``) naming it.
    dot : int
        Input channels one int32 lane sums per instruction (the packed kernel's innermost axis).
    lanes : int
        int32 accumulators per instruction (output channels of one step).
    weight_dtype : str
        How the packed kernel stores the int8 weights.
    features : tuple of str
        LLVM target features the instruction needs.
    llvm : str
        The LLVM intrinsic.
    """

    name: str
    dot: int
    lanes: int
    weight_dtype: str
    features: tuple
    llvm: str


ISAS = {
    "avx2": Isa("avx2", 2, 8, "int16", ("avx2",), "llvm.x86.avx2.pmadd.wd"),
    "avx512bw": Isa("avx512bw", 2, 16, "int16", ("avx512bw",), "llvm.x86.avx512.pmaddw.d.512"),
    "avx512vnni": Isa("avx512vnni", 4, 16, "int8", ("avx512vnni", "avx512bw"),
                      "llvm.x86.avx512.vpdpbusd.512"),
}
"""The exact int8 instructions by knob name, worst first."""


def _step(isa: Isa, data_dtype: str):
    """``(desc, impl)`` of one step of ``isa``: ``lanes`` int32 += ``dot`` activation x weight
    products (activations ``data_dtype``: uint8, or int16 already widened for ``vpmaddwd``)."""
    lanes, dot, wtype = isa.lanes, isa.dot, isa.weight_dtype
    words = lanes * dot

    @T.prim_func(s_tir=True)
    def desc(A: T.Buffer((dot,), data_dtype, offset_factor=1),  # type: ignore[valid-type]
             B: T.Buffer((lanes, dot), wtype, offset_factor=1),  # type: ignore[valid-type]
             C: T.Buffer((lanes,), "int32", offset_factor=1, scope="local")) -> None:  # type: ignore[valid-type]
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:dot], B[0:lanes, 0:dot])
            T.writes(C[0:lanes])
            for i in T.serial(0, lanes):
                for k in T.serial(0, dot):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        C[vi] = C[vi] + T.cast(A[vk], "int32") * T.cast(B[vi, vk], "int32")

    if data_dtype == "int16":
        @T.prim_func(s_tir=True)
        def wide(A: T.Buffer((dot,), "int16", offset_factor=1),  # type: ignore[valid-type]
                 B: T.Buffer((lanes, dot), wtype, offset_factor=1),  # type: ignore[valid-type]
                 C: T.Buffer((lanes,), "int32", offset_factor=1, scope="local")) -> None:  # type: ignore[valid-type]
            with T.sblock("root"):
                T.reads(C[0:lanes], A[0:dot], B[0:lanes, 0:dot])
                T.writes(C[0:lanes])
                pair = T.reinterpret(A.vload([0], "int16x2"), dtype="int32")
                C[T.ramp(T.int32(0), 1, lanes)] = C.vload([0], f"int32x{lanes}") + T.call_llvm_pure_intrin(
                    T.llvm_lookup_intrinsic_id(isa.llvm),
                    T.reinterpret(T.broadcast(pair, lanes), dtype=f"int16x{words}"),
                    B.vload([0, 0], f"int16x{words}"),
                    dtype=f"int32x{lanes}",
                )

        return desc, wide

    if dot == 2:
        @T.prim_func(s_tir=True)
        def pmaddwd(A: T.Buffer((dot,), "uint8", offset_factor=1),  # type: ignore[valid-type]
                    B: T.Buffer((lanes, dot), wtype, offset_factor=1),  # type: ignore[valid-type]
                    C: T.Buffer((lanes,), "int32", offset_factor=1, scope="local")) -> None:  # type: ignore[valid-type]
            with T.sblock("root"):
                T.reads(C[0:lanes], A[0:dot], B[0:lanes, 0:dot])
                T.writes(C[0:lanes])
                pair = T.reinterpret(T.Cast("int16x2", A.vload([0], "uint8x2")), dtype="int32")
                C[T.ramp(T.int32(0), 1, lanes)] = C.vload([0], f"int32x{lanes}") + T.call_llvm_pure_intrin(
                    T.llvm_lookup_intrinsic_id(isa.llvm),
                    T.reinterpret(T.broadcast(pair, lanes), dtype=f"int16x{words}"),
                    B.vload([0, 0], f"int16x{words}"),
                    dtype=f"int32x{lanes}",
                )

        return desc, pmaddwd

    @T.prim_func(s_tir=True)
    def vpdpbusd(A: T.Buffer((dot,), "uint8", offset_factor=1),  # type: ignore[valid-type]
                 B: T.Buffer((lanes, dot), wtype, offset_factor=1),  # type: ignore[valid-type]
                 C: T.Buffer((lanes,), "int32", offset_factor=1, scope="local")) -> None:  # type: ignore[valid-type]
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:dot], B[0:lanes, 0:dot])
            T.writes(C[0:lanes])
            quad = T.reinterpret(A.vload([0], "uint8x4"), dtype="int32")
            C[T.ramp(T.int32(0), 1, lanes)] = T.call_llvm_pure_intrin(
                T.llvm_lookup_intrinsic_id(isa.llvm),
                C.vload([0], f"int32x{lanes}"),
                T.reinterpret(T.broadcast(quad, lanes), dtype=f"uint8x{words}"),
                B.vload([0, 0], f"int8x{words}"),
                dtype=f"int32x{lanes}",
            )

    return desc, vpdpbusd


@cache
def tensor_intrin(name: str, data_dtype: str = "uint8") -> str:
    """The name of the registered :class:`tvm.s_tir.TensorIntrin` of one step of ISA ``name``
    on ``data_dtype`` activations (registered on first use: parsing TVMScript is slow,
    importing graphtune.x86 stays fast).

    Examples
    --------
    >>> tensor_intrin("avx2"), tensor_intrin("avx2", "int16")
    ('graphtune_int8_avx2_uint8', 'graphtune_int8_avx2_int16')
    """
    intrin = f"graphtune_int8_{name}_{data_dtype}"
    TensorIntrin.register(intrin, *_step(ISAS[name], data_dtype), override=True)
    return intrin


def isas_of(target: TargetLike = None) -> list[Isa]:
    """The instructions ``target`` has (its LLVM features), best first.

    Examples
    --------
    >>> [i.name for i in isas_of({"kind": "llvm", "mcpu": "skylake-avx512"})]
    ['avx512bw', 'avx2']
    """
    features = _features(host_target(target))
    return [isa for isa in reversed(ISAS.values()) if all(f in features for f in isa.features)]


def isa_of(target: TargetLike = None) -> Isa:
    """The best exact int8 instruction of ``target``.

    Raises
    ------
    KnobError
        If the target has none (no AVX2).

    Examples
    --------
    >>> isa_of({"kind": "llvm", "mcpu": "znver4", "mattr": ["-avx512f"]}).name
    'avx2'
    """
    found = isas_of(target)
    if not found:
        raise KnobError(f"target {host_target(target)} has no AVX2: graphtune's int8 kernels need it")
    return found[0]


def check_isa(name: str, target: TargetLike = None) -> Isa:
    """The :class:`Isa` named ``name`` if ``target`` has it, else a KnobError naming what it has.

    Examples
    --------
    >>> check_isa("avx512vnni", {"kind": "llvm", "mcpu": "haswell"})
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: conv2d_int8 knob 'isa' = 'avx512vnni' needs ['avx512vnni', 'avx512bw'], \
which the target lacks; it has: avx2
    """
    isa = ISAS[name]
    if isa not in isas_of(target):
        have = ", ".join(i.name for i in isas_of(target)) or "none"
        raise KnobError(f"conv2d_int8 knob 'isa' = {name!r} needs {list(isa.features)}, which the "
                        f"target lacks; it has: {have}")
    return isa
