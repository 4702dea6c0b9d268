"""The host target enables only CPU features the host reports."""

import tvm

import graphtune.x86 as x86
from graphtune.x86.target import _features, vector_bits, with_host_features


def test_host_target_enables_exactly_the_features_the_host_reports():
    reported = {str(k): bool(v) for k, v in
                tvm.get_global_func("tvm.codegen.llvm.GetHostCPUFeatures")().items()}
    enabled = _features(x86.host_target())
    assert {f for f in enabled if reported.get(f) is False} == set()
    host = {f for f, on in reported.items() if on}
    assert host - enabled == set()
    assert vector_bits() == (512 if "avx512f" in host else 256 if "avx" in host else 128)


def test_a_user_target_is_taken_as_given():
    t = x86.host_target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2})
    assert "avx512f" in _features(t) and vector_bits(t) == 512


def test_features_beyond_the_cpu_name_are_switched_on():
    # a guest whose CPU model LLVM reads as an older CPU: the name implies neither AMX nor BF16
    named = {"kind": "llvm", "mcpu": "rocketlake", "num-cores": 2}
    assert not {"amx-int8", "avx512bf16"} & _features(tvm.target.Target(named))
    target = with_host_features(named, {"amx-tile": True, "amx-int8": True, "avx512bf16": True,
                                        "avx512vnni": True, "avx512f": True, "sha": False})
    assert {"amx-tile", "amx-int8", "avx512bf16"} <= _features(x86.host_target(target))
    assert "sha" not in _features(x86.host_target(target))  # rocketlake implies SHA; the host lacks it
