"""The dot-product instructions of x86 (exact int8; bfloat16) and their TIR tensor intrinsics.

An int8 kernel's innermost step is ``C[i] += sum_k A[k] * B[i, k]`` over ``lanes`` int32
accumulators ``C`` and ``dot`` input channels: ``A`` the ``dot`` uint8 activations of one pixel
(broadcast to every lane), ``B`` the weights of ``lanes`` output channels. Each :class:`Isa`
is one instruction (sequence) doing that step exactly — never saturating:

- ``avx2``: ``vpmaddwd`` (int16 x int16 -> int32 pairs, 16 MACs per ymm instruction); the
  weights are stored as int16, the two activations widened to int16 on load.
- ``avx2ubs``: ``vpmaddubsw`` (uint8 x int8 -> int16 pair sums, **saturating**) then
  ``vpmaddwd`` by int16 ones (-> int32) and ``vpaddd``: 32 MACs per 3 ymm instructions, weights
  int8 in the ``dot`` = 4 layout of ``avx512vnni``. Lane ``i`` of ``vpmaddubsw`` sums the
  products of input channels ``4k, 4k + 1`` and, in the next int16, ``4k + 2, 4k + 3`` (a dot
  group; the channel block is a multiple of 4, so these are the channel pairs ``2j, 2j + 1``).
  With activations up to 255 a pair sum is exact iff ``255 * (|w0| + |w1|) <= 32767``, i.e.
  ``|w0| + |w1| <= 128`` (:attr:`Isa.pair_limit`) for every pair: 7-bit weights (``|w| <= 64``,
  ``reduce_range=True``) always are. It is offered only for workloads whose
  ``weight_pair_max`` (:data:`graphtune.ops.WEIGHT_PAIR_MAX`) says so (:meth:`Isa.exact_for`).
- ``avx512bw``: ``vpmaddwd`` on zmm registers (32 MACs); ``avx512ubs``: ``avx2ubs`` on zmm.
- ``avx512vnni``: ``vpdpbusd`` (uint8 x int8 -> int32 quads, accumulating; 64 MACs), as TVM's
  ``dot_16x4_vnni`` intrinsic (whose call no longer type-checks with the LLVM 22 of the TVM
  0.27 wheel: the intrinsic now takes ``<64 x i8>`` operands); the weights stay int8.
- ``amx``: ``tdpbusd`` on AMX tiles (``rows x 16 x 64`` MACs per instruction) for undilated
  convs, offered beside the best general instruction where the process may run it
  (:mod:`graphtune.x86.amx`); not a tensor intrinsic of this module: the schedule takes its own
  path.
- ``avx512bf16`` (``vdpbf16ps``: 16 float32 lanes each adding the products of a bfloat16 pair,
  through :func:`graphtune.x86.bf16.dpbf16ps`) and ``amxbf16`` (AMX ``tdpbf16ps``) multiply
  bfloat16 instead (:attr:`Isa.element`): the bfloat16 conv2d's instructions, not exact
  (float32 sums), never offered for an int8 node nor an int8 one for a bfloat16 node.
- ``avx512vnni256``: ``vpdpbusd`` on ymm registers (AVX512-VL; 32 MACs), the same layout: it runs
  output blocks that are whole 8-lane vectors but not 16-lane ones (24, 40 channels; a 1000-class
  head, 8 x 125), which ``avx512vnni`` could only compute on plain int32 vectors;
  ``avx512bf16_256`` is ``vdpbf16ps`` on ymm for the same blocks of a bfloat16 node.

An output block runs on the best instruction whose ``lanes`` divide it among those of the same
layout (``dot`` and weight type) as the best one (:func:`isa_for`): ``avx512vnni256`` beside
``avx512vnni``, ``avx512bf16_256`` beside ``avx512bf16``, ``avx2ubs`` beside ``avx512ubs``, ``avx2``
beside ``avx512bw``.

:func:`isa_of` detects the best one a target has (features are read from the target, never
assumed: a Zen 4 guest may hide AVX-512) for a workload.

Examples
--------
>>> isa_of({"kind": "llvm", "mcpu": "haswell"}).name
'avx2'
>>> isa_of({"kind": "llvm", "mcpu": "haswell"}, {"weight_pair_max": 128}).name
'avx2ubs'
>>> isa_of({"kind": "llvm", "mcpu": "znver4"}).name, ISAS["avx512vnni"].dot
('avx512vnni', 4)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tvm import tirx
from tvm.s_tir import TensorIntrin
from tvm.script import tirx as T

from ..errors import KnobError
from ..ops import WEIGHT_PAIR_MAX
from . import bf16
from .amx import BF16_FEATURES as AMX_BF16_FEATURES
from .amx import FEATURES as AMX_FEATURES
from .target import TargetLike, _features, host_target

__all__ = ["Isa", "ISAS", "element_of", "isa_of", "isa_for", "isas_of", "fastest_int8_isa",
           "wants_7bit_weights", "check_isa", "check_exact", "tensor_intrin"]

_INT16_MAX = 32767
_UINT8_MAX = 255


@dataclass(frozen=True)
class Isa:
    """One exact int8 dot-product instruction (sequence).

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
        The LLVM intrinsic producing the int32 lanes.
    pairs : str
        The saturating ``vpmaddubsw`` intrinsic summing channel pairs into int16 before ``llvm``
        (``vpmaddwd`` by ones) adds them, or ``""``.
    general : bool
        Whether it runs any register tile of the conv (False: AMX tiles, undilated convs only,
        offered beside the best general one, :mod:`graphtune.x86.amx`).
    element : str
        What it multiplies: ``"int8"`` (uint8 activations, int32 accumulators, exact) or
        ``"bfloat16"`` (bfloat16 activations and weights, both stored as their bits,
        :mod:`graphtune.x86.bf16`, float32 accumulators).
    """

    name: str
    dot: int
    lanes: int
    weight_dtype: str
    features: tuple
    llvm: str
    pairs: str = ""
    general: bool = True
    element: str = "int8"

    @property
    def data_dtype(self) -> str:
        """The dtype of the activations it reads: uint8, or bfloat16's storage."""
        return "uint8" if self.element == "int8" else bf16.STORAGE

    @property
    def acc_dtype(self) -> str:
        """The dtype of its accumulators: int32 or float32."""
        return "int32" if self.element == "int8" else "float32"

    def operand(self, value: tirx.PrimExpr) -> tirx.PrimExpr:
        """An activation or weight as the instruction multiplies it: int32, or bfloat16 bits as
        float32 (the spelling the conv's TE compute and the tensor intrinsics share)."""
        return value.astype("int32") if self.element == "int8" else bf16.to_float32(value)

    @property
    def pair_limit(self) -> int | None:
        """The largest ``|w0| + |w1|`` of an input-channel pair (``2j, 2j + 1``) for which the
        int16 pair sum of uint8 activations cannot saturate (128), or None: always exact.

        Examples
        --------
        >>> ISAS["avx2ubs"].pair_limit, ISAS["avx2"].pair_limit
        (128, None)
        """
        return _INT16_MAX // _UINT8_MAX if self.pairs else None

    def exact_for(self, workload: dict) -> bool:
        """Whether the instruction is exact on ``workload``'s weights: always, or (``vpmaddubsw``)
        where its ``weight_pair_max`` is known and at most :attr:`pair_limit`.

        Examples
        --------
        >>> ubs = ISAS["avx2ubs"]
        >>> [ubs.exact_for(wl) for wl in ({"weight_pair_max": 128}, {"weight_pair_max": 200}, {})]
        [True, False, False]
        """
        limit = self.pair_limit
        return limit is None or workload.get(WEIGHT_PAIR_MAX, limit + 1) <= limit


ISAS = {
    "avx2": Isa("avx2", 2, 8, "int16", ("avx2",), "llvm.x86.avx2.pmadd.wd"),
    "avx2ubs": Isa("avx2ubs", 4, 8, "int8", ("avx2",), "llvm.x86.avx2.pmadd.wd", "llvm.x86.avx2.pmadd.ub.sw"),
    "avx512bw": Isa("avx512bw", 2, 16, "int16", ("avx512bw",), "llvm.x86.avx512.pmaddw.d.512"),
    "avx512ubs": Isa("avx512ubs", 4, 16, "int8", ("avx512bw",), "llvm.x86.avx512.pmaddw.d.512",
                     "llvm.x86.avx512.pmaddubs.w.512"),
    "avx512vnni256": Isa("avx512vnni256", 4, 8, "int8", ("avx512vnni", "avx512vl"),
                         "llvm.x86.avx512.vpdpbusd.256"),
    "avx512vnni": Isa("avx512vnni", 4, 16, "int8", ("avx512vnni", "avx512bw"),
                      "llvm.x86.avx512.vpdpbusd.512"),
    "amx": Isa("amx", 4, 16, "int8", (*AMX_FEATURES, "avx512bw"), "llvm.x86.tdpbusd", general=False),
    "avx512bf16_256": Isa("avx512bf16_256", 2, 8, bf16.STORAGE, ("avx512bf16", "avx512vl"),
                          "llvm.x86.avx512bf16.dpbf16ps.256", element="bfloat16"),
    "avx512bf16": Isa("avx512bf16", 2, 16, bf16.STORAGE, ("avx512bf16", "avx512bw"),
                      "llvm.x86.avx512bf16.dpbf16ps.512", element="bfloat16"),
    "amxbf16": Isa("amxbf16", 2, 16, bf16.STORAGE, (*AMX_BF16_FEATURES, "avx512bw"), "llvm.x86.tdpbf16ps",
                   general=False, element="bfloat16"),
}
"""The dot-product instructions by knob name, worst first within an element type."""


def _call(intrin: str, dtype: str, *args) -> tirx.PrimExpr:
    return T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id(intrin), *args, dtype=dtype)


def _group(A: tirx.Buffer, isa: Isa) -> tirx.PrimExpr:
    """The ``dot`` activations of one pixel as one int32 (to broadcast): a uint8 quad, an int16
    pair (widened here from uint8 unless ``A`` is int16 already)."""
    if isa.dot == 4:
        return T.reinterpret(A.vload([0], "uint8x4"), dtype="int32")
    pair = A.vload([0], "int16x2") if A.dtype == "int16" else T.Cast("int16x2", A.vload([0], "uint8x2"))
    return T.reinterpret(pair, dtype="int32")


def _accumulated(isa: Isa, A: tirx.Buffer, B: tirx.Buffer, C: tirx.Buffer) -> tirx.PrimExpr:
    """``C + sum_k A[k] * B[:, k]`` as ``lanes`` int32 (float32), by the instruction(s) of ``isa``
    (``vdpbf16ps``: the kernel's PrimFunc carries :data:`graphtune.x86.bf16.LLVM_IR`)."""
    acc, words = f"{isa.acc_dtype}x{isa.lanes}", isa.lanes * isa.dot
    old = C.vload([0], acc)
    if isa.element == "bfloat16":
        pair = T.reinterpret(A.vload([0], f"{bf16.STORAGE}x2"), dtype="int32")
        weights = T.reinterpret(B.vload([0, 0], f"{bf16.STORAGE}x{words}"), dtype=f"int32x{isa.lanes}")
        return bf16.dpbf16ps(old, T.broadcast(pair, isa.lanes), weights, isa.lanes)
    groups = T.broadcast(_group(A, isa), isa.lanes)
    if isa.dot == 2:
        return old + _call(isa.llvm, acc, T.reinterpret(groups, dtype=f"int16x{words}"),
                           B.vload([0, 0], f"int16x{words}"))
    quads, weights = T.reinterpret(groups, dtype=f"uint8x{words}"), B.vload([0, 0], f"int8x{words}")
    if not isa.pairs:
        return _call(isa.llvm, acc, old, quads, weights)
    sums = _call(isa.pairs, f"int16x{words // 2}", quads, weights)
    return old + _call(isa.llvm, acc, sums, T.broadcast(T.int16(1), words // 2))


def _step(isa: Isa, data_dtype: str):
    """``(desc, impl)`` of one step of ``isa``: ``lanes`` accumulators += ``dot`` activation x
    weight products (activations ``data_dtype``: uint8, int16 already widened for ``vpmaddwd``,
    or bfloat16 bits)."""
    lanes, dot, wtype, acc = isa.lanes, isa.dot, isa.weight_dtype, isa.acc_dtype

    @T.prim_func(s_tir=True)
    def desc(A: T.Buffer((dot,), data_dtype, offset_factor=1),  # type: ignore[valid-type]
             B: T.Buffer((lanes, dot), wtype, offset_factor=1),  # type: ignore[valid-type]
             C: T.Buffer((lanes,), acc, offset_factor=1, scope="local")) -> None:  # type: ignore[valid-type]
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:dot], B[0:lanes, 0:dot])
            T.writes(C[0:lanes])
            for i in T.serial(0, lanes):
                for k in T.serial(0, dot):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        C[vi] = C[vi] + isa.operand(A[vk]) * isa.operand(B[vi, vk])

    @T.prim_func(s_tir=True)
    def impl(A: T.Buffer((dot,), data_dtype, offset_factor=1),  # type: ignore[valid-type]
             B: T.Buffer((lanes, dot), wtype, offset_factor=1),  # type: ignore[valid-type]
             C: T.Buffer((lanes,), acc, offset_factor=1, scope="local")) -> None:  # type: ignore[valid-type]
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:dot], B[0:lanes, 0:dot])
            T.writes(C[0:lanes])
            C[T.ramp(T.int32(0), 1, lanes)] = _accumulated(isa, A, B, C)

    return desc, impl


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


def isas_of(target: TargetLike = None, element: str = "int8") -> list[Isa]:
    """The instructions multiplying ``element`` values that ``target`` has (its LLVM features),
    best first, whatever the weights.

    Examples
    --------
    >>> [i.name for i in isas_of({"kind": "llvm", "mcpu": "skylake-avx512"})]
    ['avx512ubs', 'avx512bw', 'avx2ubs', 'avx2']
    >>> [i.name for i in isas_of({"kind": "llvm", "mcpu": "znver4"}, "bfloat16")]
    ['avx512bf16', 'avx512bf16_256']
    """
    features = _features(host_target(target))
    return [isa for isa in reversed(ISAS.values())
            if isa.element == element and all(f in features for f in isa.features)]


def element_of(workload: dict | None) -> str:
    """What a workload's kernel multiplies: ``"bfloat16"`` (a conv2d_bf16's ``dtype``) or ``"int8"``.

    Examples
    --------
    >>> element_of({"dtype": "bfloat16"}), element_of({"dtype": "uint8"}), element_of(None)
    ('bfloat16', 'int8', 'int8')
    """
    return "bfloat16" if workload is not None and workload.get("dtype") == "bfloat16" else "int8"


def isa_of(target: TargetLike = None, workload: dict | None = None) -> Isa:
    """The best instruction of ``target`` multiplying ``workload``'s element type
    (:func:`element_of`) exact on its weights (:meth:`Isa.exact_for`; no workload: the best int8
    one exact on any weights).

    Raises
    ------
    KnobError
        If the target has none (no AVX2).

    Examples
    --------
    >>> isa_of({"kind": "llvm", "mcpu": "znver4", "mattr": ["-avx512f"]}, {"weight_pair_max": 200}).name
    'avx2'
    """
    element = element_of(workload)
    found = [isa for isa in isas_of(target, element) if isa.general and isa.exact_for(workload or {})]
    if not found:
        needs = "AVX2" if element == "int8" else "AVX512-BF16"
        raise KnobError(f"target {host_target(target)} has no {needs}: graphtune's {element} kernels need it")
    return found[0]


def fastest_int8_isa(target: TargetLike = None) -> Isa | None:
    """The int8 instruction of ``target`` with the most products per instruction among those
    general kernels use (AMX aside), exact or not on a given model's weights; None without AVX2.

    Examples
    --------
    >>> fastest_int8_isa({"kind": "llvm", "mcpu": "haswell"}).name
    'avx2ubs'
    """
    return next((isa for isa in isas_of(target) if isa.general), None)


def wants_7bit_weights(target: TargetLike = None) -> bool:
    """Whether ``target``'s fastest int8 instruction (:func:`fastest_int8_isa`) sums products in
    pairs at int16 (``vpmaddubsw``: AVX2 and AVX-512 without VNNI), so that only 7-bit weights run
    on it exactly: there 8-bit weights fall back to the 16-bit ``vpmaddwd`` path at half its
    products per instruction (ONNX Runtime and OpenVINO saturate instead). False where the
    fastest one is exact on any int8 weights (VNNI ``vpdpbusd``).

    :func:`graphtune.quantize` quantizes to 7-bit weights (``reduce_range``) where this holds.

    Examples
    --------
    >>> wants_7bit_weights({"kind": "llvm", "mcpu": "haswell"})
    True
    >>> wants_7bit_weights({"kind": "llvm", "mcpu": "skylake-avx512"})  # AVX-512 without VNNI
    True
    >>> wants_7bit_weights({"kind": "llvm", "mcpu": "znver4"})
    False
    """
    fastest = fastest_int8_isa(target)
    return fastest is not None and fastest.pair_limit is not None


def isa_for(target: TargetLike, workload: dict | None, oc_bn: int) -> Isa:
    """The instruction an output block of ``oc_bn`` channels runs on: the best of ``target``
    exact on ``workload`` (:func:`isa_of`), or, when its ``lanes`` do not divide ``oc_bn``, the
    best one of the same layout (``dot``, weight type) whose lanes do; else the best (the block
    then runs on plain int32 vectors).

    Examples
    --------
    >>> spr = {"kind": "llvm", "mcpu": "sapphirerapids"}
    >>> isa_for(spr, None, 64).name, isa_for(spr, None, 40).name, isa_for(spr, None, 20).name
    ('avx512vnni', 'avx512vnni256', 'avx512vnni')
    """
    best = isa_of(target, workload)
    if oc_bn % best.lanes == 0:
        return best
    same = [isa for isa in isas_of(target, best.element) if isa.general and isa.exact_for(workload or {})
            and (isa.dot, isa.weight_dtype) == (best.dot, best.weight_dtype) and oc_bn % isa.lanes == 0]
    return same[0] if same else best


def check_isa(name: str, target: TargetLike = None) -> Isa:
    """The :class:`Isa` named ``name`` if ``target`` has it, else a KnobError naming what it has.

    Examples
    --------
    >>> check_isa("avx512vnni", {"kind": "llvm", "mcpu": "haswell"})
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: conv2d_int8 knob 'isa' = 'avx512vnni' needs ['avx512vnni', 'avx512bw'], \
which the target lacks; it has: avx2ubs, avx2
    """
    isa = ISAS[name]
    if isa not in isas_of(target, isa.element):
        have = ", ".join(i.name for i in isas_of(target, isa.element)) or "none"
        raise KnobError(f"conv2d_int8 knob 'isa' = {name!r} needs {list(isa.features)}, which the "
                        f"target lacks; it has: {have}")
    return isa


def check_exact(op: str, isa: Isa, workload: dict) -> None:
    """Raise a KnobError unless ``isa`` is exact on ``workload``'s weights (:meth:`Isa.exact_for`).

    Examples
    --------
    >>> check_exact("conv2d_int8", ISAS["avx2ubs"], {"weight_pair_max": 200})
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: conv2d_int8 knob 'isa' = 'avx2ubs' sums input-channel pairs in int16 \
(vpmaddubsw), exact only if 255 * (|w0| + |w1|) <= 32767 for every pair, i.e. weight_pair_max <= 128; \
this workload's weight_pair_max is 200: quantize the model with reduce_range=True \
(graphtune.quantize(..., reduce_range=True): 7-bit weights), or use isa 'avx2'
    """
    if isa.exact_for(workload):
        return
    known = workload.get(WEIGHT_PAIR_MAX, "unknown (no such field)")
    raise KnobError(f"{op} knob 'isa' = {isa.name!r} sums input-channel pairs in int16 (vpmaddubsw), exact "
                    f"only if {_UINT8_MAX} * (|w0| + |w1|) <= {_INT16_MAX} for every pair, i.e. "
                    f"{WEIGHT_PAIR_MAX} <= {isa.pair_limit}; this workload's {WEIGHT_PAIR_MAX} is {known}: "
                    "quantize the model with reduce_range=True (graphtune.quantize(..., reduce_range=True): "
                    f"7-bit weights), or use isa {_widening(isa).name!r}")


def _widening(isa: Isa) -> Isa:
    """The always-exact ``vpmaddwd`` instruction on ``isa``'s registers."""
    return next(other for other in ISAS.values() if other.lanes == isa.lanes and other.dot == 2)
