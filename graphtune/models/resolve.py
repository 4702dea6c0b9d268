"""Turn what a user names as a model (zoo name, ``.onnx`` path, ModelProto) into a model.

Examples
--------
>>> model, name = resolve("resnet18", image_size=32)
>>> name, model.graph.input[0].name
('resnet18', 'input')
"""

from __future__ import annotations

import os
from typing import Any

import onnx

from ..errors import ModelError

__all__ = ["resolve"]


def resolve(model: Any, image_size: int | None = None, batch_size: int = 1) -> tuple[Any, str]:
    """Return ``(model, name)`` for a zoo name, an ``.onnx`` path, a ModelProto or an IRModule.

    Parameters
    ----------
    model : str, os.PathLike, onnx.ModelProto or tvm.IRModule
        A name from :func:`graphtune.models.names`, a path to an ``.onnx``
        file, or a model object (returned as is).
    image_size, batch_size : int
        Input size for zoo models (default the published size); ignored
        for files and model objects, whose shapes are their own.

    Returns
    -------
    (model, name)
        ``name`` is the zoo name, the file's stem, or the ONNX graph's name.

    Raises
    ------
    ModelError
        For a string that is neither a zoo name nor an existing file (the
        message lists the zoo names), or an unreadable ONNX file.

    Examples
    --------
    >>> resolve("resnet-18")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphtune.errors.ModelError: unknown model 'resnet-18': not a file, and not a zoo model;
        valid names: densenet121, ..., resnet18, ...
    """
    from . import get, names

    if isinstance(model, (str, os.PathLike)):
        spec = os.fspath(model)
        if spec in names():
            return get(spec, batch_size=batch_size, image_size=image_size), spec
        if not os.path.isfile(spec):
            raise ModelError(f"unknown model {spec!r}: not a file, and not a zoo model; "
                             f"valid names: {', '.join(names())}")
        try:
            proto = onnx.load(spec)
        except Exception as err:  # onnx raises DecodeError, OSError... for bad files
            raise ModelError(f"{spec}: not a readable ONNX model ({err})") from None
        return proto, os.path.splitext(os.path.basename(spec))[0]
    if isinstance(model, onnx.ModelProto):
        return model, model.graph.name or "model"
    if type(model).__name__ == "IRModule":
        return model, "model"
    raise ModelError(f"model: expected a zoo name, an .onnx path, an onnx.ModelProto or a "
                     f"tvm.IRModule, got {type(model).__name__}")
