"""Exceptions raised by graphtune.

Every error graphtune raises on bad input derives from :class:`GraphtuneError`
and names the node, edge, field or file at fault together with the fix.

Examples
--------
>>> from graphtune.errors import GraphError
>>> try:
...     raise GraphError("edge conv1 -> conv9: unknown node 'conv9'; add it first")
... except ValueError as err:  # input errors are ValueErrors too
...     print(err)
edge conv1 -> conv9: unknown node 'conv9'; add it first
"""

__all__ = [
    "GraphtuneError",
    "GraphError",
    "LayoutError",
    "KnobError",
    "SolverError",
    "ConfigError",
    "ConfigMismatchError",
    "MeasureError",
    "ModelError",
    "ArgumentError",
    "CompileError",
]


class GraphtuneError(Exception):
    """Base class of every error graphtune raises deliberately."""


class GraphError(GraphtuneError, ValueError):
    """A layout graph is malformed (bad cost, unknown node, wrong matrix shape...)."""


class LayoutError(GraphtuneError, ValueError):
    """A layout name is not one graphtune knows (``NCHW``, ``NCHW{x}c``, ``NC``...)."""


class KnobError(GraphtuneError, ValueError):
    """A schedule knob combination is invalid for its workload; it is never built."""


class SolverError(GraphtuneError):
    """A solver cannot handle an instance (too large for its memory cap, unknown method...)."""


class ConfigError(GraphtuneError, ValueError):
    """A config file is malformed: the message names the field and what it should be."""


class ConfigMismatchError(ConfigError):
    """A config was made for another model, or a node's workload differs from the model's."""


class MeasureError(GraphtuneError):
    """Measuring could not run at all (no usable target, unreadable records file...)."""


class ModelError(GraphtuneError, ValueError):
    """A model cannot be loaded or is not supported (unknown zoo name, bad ONNX file...)."""


class ArgumentError(GraphtuneError, ValueError):
    """An argument, option or output path is unusable (unknown solver, repeat < 1, unwritable file).

    Raised before any work starts, so nothing measured or compiled is lost.
    """


class CompileError(GraphtuneError):
    """TVM failed while compiling a model; the message names the ONNX node (or the stage)."""
