"""Compile a model with a Config: NCHW{x}c rewrite, x86 kernels, ``tvm.compile``.

Modules: :mod:`.plan` (:class:`~.plan.NodePlan`), :mod:`.rewrite` (per-node layout rewrite of
the Relax module), :mod:`.int8` (a quantized conv on the int8 kernels), :mod:`.lut` (uint8
activation functions as table lookups), :mod:`.legalize` (lowering with graphtune's x86
computes and schedules), :mod:`.model` (:class:`CompiledModel`), :mod:`.driver` (:func:`compile`).

Examples
--------
>>> from graphtune import Config, models
>>> from graphtune.compiler import compile, CompiledModel
>>> model = models.get("resnet18", image_size=32)
>>> isinstance(compile(model, Config.uniform(model)), CompiledModel)
True
"""

from .driver import compile
from .model import CompiledModel

__all__ = ["compile", "CompiledModel"]
