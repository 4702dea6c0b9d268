"""graphtune: whole-graph layout and schedule tuning for CNN inference on x86 CPUs.

Public API (TVM-dependent names load on first use, so the graph and solvers
import without TVM):

- :func:`tune` -> :class:`TuneResult`: extract, measure, solve, config
- :func:`extract` -> :class:`LayoutGraph`; :func:`solve` -> :class:`Solution`
- :class:`Config`; :func:`compile` -> :class:`CompiledModel`
- :func:`profile` -> :class:`ProfileResult`: per-op in-model time vs prediction vs ONNX Runtime
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

# TVM starts one worker thread on these VMs unless told otherwise; this must
# happen before the TVM runtime creates its thread pool. An empty value counts as unset.
if not _os.environ.get("TVM_NUM_THREADS", "").strip():
    _os.environ["TVM_NUM_THREADS"] = str(len(_os.sched_getaffinity(0)))
# TVM pins its workers to cores by default; its parallel loops are split statically, so on a
# shared host every kernel waited for a worker pinned to a busy core (MobileNetV3-Large: 6.8-9.3 ms
# pinned, 3.3-3.7 ms not, ORT 3.1-3.3 ms). Set TVM_BIND_THREADS=1 to pin on a dedicated machine.
_os.environ.setdefault("TVM_BIND_THREADS", "0")

from .config import Config  # noqa: E402
from .errors import (  # noqa: E402
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
from .graph import Candidate, LayoutGraph  # noqa: E402
from .solve import Solution, solve  # noqa: E402

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
    "ProfileResult",
    "Solution",
    "SolverError",
    "TuneResult",
    "compile",
    "extract",
    "models",
    "profile",
    "solve",
    "tune",
]
