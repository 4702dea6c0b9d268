"""The host target enables only CPU features the host reports."""

import tvm

import graphtune.x86 as x86
from graphtune.x86.target import _features, vector_bits


def test_host_target_enables_no_feature_the_host_lacks():
    reported = {str(k): bool(v) for k, v in
                tvm.get_global_func("tvm.codegen.llvm.GetHostCPUFeatures")().items()}
    enabled = _features(x86.host_target())
    assert {f for f in enabled if reported.get(f) is False} == set()
    host = {f for f, on in reported.items() if on}
    assert vector_bits() == (512 if "avx512f" in host else 256 if "avx" in host else 128)


def test_a_user_target_is_taken_as_given():
    t = x86.host_target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2})
    assert "avx512f" in _features(t) and vector_bits(t) == 512
