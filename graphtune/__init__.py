"""graphtune: whole-graph layout and schedule tuning for CNN inference on x86 CPUs.

Public API (TVM-dependent names load on first use, so the graph and solvers
import without TVM):

- :func:`tune` -> :class:`TuneResult`: extract, measure, solve, config
- :func:`extract` -> :class:`LayoutGraph`; :func:`solve` -> :class:`Solution`
- :class:`Config`; :func:`compile` -> :class:`CompiledModel` (a :class:`PartitionedModel` for
  a model TVM imports only in part: :mod:`graphtune.partition`); :func:`load` reads the
  archive ``PartitionedModel.export_library`` writes
- :func:`profile` -> :class:`ProfileResult`: per-op in-model time vs prediction vs ONNX Runtime
- :func:`quantize` -> ``onnx.ModelProto``: int8 QDQ form by ONNX Runtime's static quantizer
- :mod:`graphtune.models` (the zoo: ``models.names()``, ``models.get(name)``)

Examples
--------
>>> import graphtune
>>> g = graphtune.LayoutGraph()
>>> g.add_node("a", costs=[2.0, 1.0])
>>> graphtune.solve(g).assignment
{'a': 1}
"""

import importlib as _importlib
import os as _os

# TVM may start a single worker thread on a VM unless told otherwise: use every usable core.
# This must happen before the TVM runtime creates its thread pool. An empty value counts as unset.
if not _os.environ.get("TVM_NUM_THREADS", "").strip():
    _os.environ["TVM_NUM_THREADS"] = str(len(_os.sched_getaffinity(0)))
# TVM pins its workers to cores by default and splits parallel loops statically, so on a shared
# host a kernel waits for a worker pinned to a busy core; graphtune leaves them unpinned unless
# TVM_BIND_THREADS is set (1: pin, for a dedicated machine). Measurements: docs/timing.md, "Threads".
_os.environ.setdefault("TVM_BIND_THREADS", "0")
# After a parallel loop TVM's workers spin for the next one: 300000 yields by default, ~180 ms on
# a 2-core AMD EPYC, which on a partitioned model ran into ONNX Runtime's stages and slowed them
# (Faster R-CNN 33-62 ms, bimodal). 20000 (~12 ms there) still outlasts any kernel's wait for
# the slower worker inside a model. Measurements: docs/timing.md, "Threads".
_os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "20000")

from .config import Config
from .errors import (
    ArgumentError,
    CompileError,
    ConfigError,
    ConfigMismatchError,
    GraphError,
    GraphtuneError,
    KnobError,
    LayoutError,
    MeasureError,
    ModelError,
    SolverError,
)
from .graph import Candidate, LayoutGraph
from .solve import Solution, solve

__version__ = "0.1.0"

_LAZY = {
    "compile": ("graphtune.compiler", "compile"),
    "CompiledModel": ("graphtune.compiler", "CompiledModel"),
    "extract": ("graphtune.pipeline", "extract"),
    "tune": ("graphtune.pipeline", "tune"),
    "TuneResult": ("graphtune.pipeline", "TuneResult"),
    "models": ("graphtune.models", None),
    "profile": ("graphtune.profiling", "profile"),
    "ProfileResult": ("graphtune.profiling", "ProfileResult"),
    "quantize": ("graphtune.quantization", "quantize"),
    "PartitionedModel": ("graphtune.partition", "PartitionedModel"),
    "load": ("graphtune.partition", "load"),
}


def __getattr__(name: str):
    """Load the TVM-dependent parts of the API on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'graphtune' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = _importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


__all__ = [
    "ArgumentError",
    "Candidate",
    "CompileError",
    "CompiledModel",
    "Config",
    "ConfigError",
    "ConfigMismatchError",
    "GraphError",
    "GraphtuneError",
    "KnobError",
    "LayoutError",
    "LayoutGraph",
    "MeasureError",
    "ModelError",
    "PartitionedModel",
    "ProfileResult",
    "Solution",
    "SolverError",
    "TuneResult",
    "compile",
    "extract",
    "load",
    "models",
    "profile",
    "quantize",
    "solve",
    "tune",
]
