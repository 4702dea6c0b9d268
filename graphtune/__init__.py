"""graphtune: whole-graph layout and schedule tuning for CNN inference on x86 CPUs."""

import os as _os

# TVM starts one worker thread on these VMs unless told otherwise; this must
# happen before the TVM runtime creates its thread pool.
_os.environ.setdefault("TVM_NUM_THREADS", str(len(_os.sched_getaffinity(0))))

from .errors import (  # noqa: E402
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

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ConfigMismatchError",
    "GraphError",
    "GraphtuneError",
    "KnobError",
    "LayoutError",
    "MeasureError",
    "ModelError",
    "SolverError",
]
