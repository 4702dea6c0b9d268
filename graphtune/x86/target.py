"""The x86 target graphtune compiles and measures for.

TVM 0.27 only accepts targets in dict form. :func:`host_target` builds one for
the machine we run on (host ``mcpu``, ``num-cores``); :func:`target_key` turns
any target into the JSON-able description stored with every record and config.

Examples
--------
>>> import graphtune.x86 as x86
>>> t = x86.host_target({"kind": "llvm", "mcpu": "haswell", "num-cores": 4})
>>> x86.target_key(t)["vector_bits"]
256
"""

import os
from collections.abc import Mapping
from typing import Union

import tvm

from ..errors import MeasureError

__all__ = [
    "host_target", "with_host_features", "target_key", "vector_lanes", "vector_bits", "num_threads",
]

TargetLike = Union[tvm.target.Target, dict, None]
"""What every ``target`` argument of graphtune.x86 accepts (``None`` = the host)."""


def num_threads() -> int:
    """Worker threads the TVM runtime of this process uses (``TVM_NUM_THREADS``).

    ``import graphtune`` sets the variable to the core count unless the user
    set it; TVM itself would start a single thread on these VMs.

    Examples
    --------
    >>> num_threads() >= 1
    True
    """
    value = os.environ.get("TVM_NUM_THREADS") or str(len(os.sched_getaffinity(0)))
    try:
        threads = int(value)
    except ValueError:
        raise MeasureError(f"TVM_NUM_THREADS={value!r} is not an integer; set it to e.g. 2") from None
    return max(threads, 1)


def host_target(target: TargetLike = None) -> tvm.target.Target:
    """The LLVM target of this machine, or ``target`` converted to a Target.

    Parameters
    ----------
    target : tvm.target.Target or dict, optional
        A user target; it overrides the detected one and is returned as a
        Target. ``None`` detects the host: ``{"kind": "llvm", "mcpu": <host
        cpu>, "num-cores": <cores>}``.

    Returns
    -------
    tvm.target.Target

    Raises
    ------
    MeasureError
        If ``target`` is neither a Target nor a dict TVM accepts.

    Examples
    --------
    >>> host_target().kind.name
    'llvm'
    """
    if isinstance(target, tvm.target.Target):
        return target
    if target is None:
        target = _detected_host()
    if not isinstance(target, dict):
        raise MeasureError(
            f"target {target!r} must be a tvm.target.Target or a dict such as "
            "{'kind': 'llvm', 'mcpu': 'znver5', 'num-cores': 2} (TVM 0.27 rejects target strings)"
        )
    try:
        return tvm.target.Target(dict(target))
    except Exception as err:  # TVM raises assorted FFI errors for bad dicts
        raise MeasureError(f"TVM rejects target {target!r}: {err}") from None


def _detected_host() -> dict:
    """This machine as a target dict: LLVM's host CPU name, its core count, and
    the features the machine reports (:func:`with_host_features`)."""
    cpu = str(tvm.get_global_func("target.llvm_get_system_cpu")())
    target: dict = {"kind": "llvm", "mcpu": cpu, "num-cores": len(os.sched_getaffinity(0))}
    host = tvm.get_global_func("tvm.codegen.llvm.GetHostCPUFeatures")()
    return with_host_features(target, {str(k): bool(v) for k, v in host.items()})


def with_host_features(target: dict, host_features: Mapping[str, bool]) -> dict:
    """``target`` (a dict naming an ``mcpu``) with ``mattr`` set to what the machine
    reports (``host_features``, LLVM's ``GetHostCPUFeatures`` of that machine): every
    feature the CPU name implies but the machine lacks switched off, every feature the
    machine has but the name does not imply switched on (what ``-march=native`` does).

    A virtual machine may hide features of its CPU model (a Zen 4 guest without
    AVX-512: code built for the name alone would die of SIGILL there), or report a CPU
    model older than the CPU (a Sapphire Rapids guest whose model number LLVM reads as
    ``rocketlake``: built for the name alone, AMX and AVX512-BF16 would go unused). So
    features are detected, never assumed, in both directions.

    Examples
    --------
    >>> t = with_host_features({"kind": "llvm", "mcpu": "skylake-avx512"}, {"avx512f": False})
    >>> t["mattr"], vector_bits(t)
    (['-avx512f'], 256)
    >>> t = with_host_features({"kind": "llvm", "mcpu": "rocketlake"}, {"amx-int8": True, "amx-tile": True})
    >>> t["mattr"]
    ['+amx-int8', '+amx-tile']
    >>> "mattr" in with_host_features({"kind": "llvm", "mcpu": "haswell"}, {"avx2": True})
    False
    """
    implied = _features(tvm.target.Target(dict(target)))
    hidden = sorted(f for f in implied if host_features.get(f) is False)
    extra = sorted(f for f, present in host_features.items() if present and f not in implied)
    if not hidden and not extra:
        return dict(target)
    switches = [*(f"-{f}" for f in hidden), *(f"+{f}" for f in extra)]
    return {**target, "mattr": [*target.get("mattr", []), *switches]}


def _features(target: tvm.target.Target) -> set:
    if target.kind.name != "llvm":
        return set()
    return set(tvm.get_global_func("target.llvm_get_cpu_features")(target).keys())


def vector_bits(target: TargetLike = None) -> int:
    """Width in bits of the widest float SIMD register of ``target`` (512, 256 or 128).

    Examples
    --------
    >>> vector_bits({"kind": "llvm", "mcpu": "skylake-avx512"})
    512
    """
    features = _features(host_target(target))
    if "avx512f" in features:
        return 512
    if "avx" in features or "avx2" in features:
        return 256
    return 128


def vector_lanes(target: TargetLike = None, dtype: str = "float32") -> int:
    """How many ``dtype`` values fit in one SIMD register of ``target``.

    Examples
    --------
    >>> vector_lanes({"kind": "llvm", "mcpu": "haswell"})
    8
    """
    return vector_bits(target) // tvm.DataType(dtype).bits


def target_key(target: TargetLike = None) -> dict:
    """JSON-able description of ``target`` used to key records and configs.

    Contains ``kind``, ``mcpu`` (``""`` when generic), ``num-cores``, ``mattr``
    (sorted list, when given), ``vector_bits`` and ``threads`` (the runtime
    thread count of this process, which timings depend on).

    Examples
    --------
    >>> key = target_key({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})
    >>> key["kind"], key["mcpu"], key["num-cores"], key["vector_bits"]
    ('llvm', 'haswell', 2, 256)
    """
    resolved = host_target(target)
    attrs = resolved.attrs
    key = {
        "kind": resolved.kind.name,
        "mcpu": str(attrs["mcpu"]) if "mcpu" in attrs else "",
        "num-cores": int(attrs["num-cores"]) if "num-cores" in attrs else len(os.sched_getaffinity(0)),
    }
    if "mattr" in attrs and len(attrs["mattr"]):
        key["mattr"] = sorted(str(m) for m in attrs["mattr"])
    key["vector_bits"] = vector_bits(resolved)
    key["threads"] = num_threads()
    return key
