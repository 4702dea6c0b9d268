"""graphtune's built-in model zoo: published CNN architectures as ONNX graphs.

Every model has one input ``"input"`` ``[N, 3, H, W]`` float32 and is built
with seeded random weights (the same bytes every time), batch norm folded
into the convs, readable torchvision-style node names (``layer1.0.conv1``),
opset 13 and IR version 8. Classifiers output ``"output"`` ``[N, 1000]``
through ``GlobalAveragePool``/``Flatten``/``Gemm`` (``shufflenet_v2``:
``ReduceMean``/``Gemm``); ``ssd_resnet50_512`` outputs ``"loc"`` ``[N, A, 4]``
and ``"conf"`` ``[N, A, 81]``; ``unet`` outputs ``"output"`` ``[N, 2, H, W]``.
Models with ``info(name).unfused_bn`` also build as exporters without
constant folding emit them, with ``BatchNormalization`` nodes:
``get(name, fold_bn=False)``.

Examples
--------
>>> from graphtune import models
>>> "resnet50" in models.names()
True
>>> model = models.get("resnet18", image_size=64)
>>> [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
[1, 3, 64, 64]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import onnx

from ..errors import ModelError
from .builder import param_count
from .densenet import densenet121, densenet201
from .efficientnet import efficientnet_b0
from .googlenet import googlenet
from .inception import inception_v3
from .mobilenet import mobilenet_v2
from .mobilenet_v3 import mobilenet_v3_large
from .regnet import regnet_y_800mf
from .resnet import resnet18, resnet50, resnext50_32x4d
from .shufflenet import shufflenet_v2
from .ssd import ssd_resnet50_512
from .unet import unet
from .vgg import vgg16, vgg19

__all__ = ["names", "get", "info", "param_count", "ModelInfo"]


class ModelInfo(NamedTuple):
    """What the zoo knows about one model.

    Attributes
    ----------
    build : callable
        ``build(batch_size, image_size) -> onnx.ModelProto``.
    image_size : int
        Default (published) input height and width.
    min_image_size : int
        Smallest supported input: the last feature map is then 1x1 (the
        fastest size for tests).
    params : int
        Published parameter count (torchvision's, batch norm unfolded) or, where
        none is published, this zoo's own count. Folding batch norm removes one
        parameter per folded channel, so zoo models are up to 0.5% smaller.
    unfused_bn : bool
        Whether ``get(name, fold_bn=False)`` builds the model with
        ``BatchNormalization`` nodes (``build`` takes ``fold_bn``).
    """

    build: Callable[..., onnx.ModelProto]
    image_size: int
    min_image_size: int
    params: int
    unfused_bn: bool = False


_ZOO: dict[str, ModelInfo] = {
    "resnet18": ModelInfo(resnet18, 224, 32, 11_689_512),
    "resnet50": ModelInfo(resnet50, 224, 32, 25_557_032),
    "vgg16": ModelInfo(vgg16, 224, 32, 138_357_544),
    "vgg19": ModelInfo(vgg19, 224, 32, 143_667_240),
    "inception_v3": ModelInfo(inception_v3, 299, 75, 23_834_568),
    "densenet121": ModelInfo(densenet121, 224, 32, 7_978_856),
    "densenet201": ModelInfo(densenet201, 224, 32, 20_013_928),
    "mobilenet_v2": ModelInfo(mobilenet_v2, 224, 32, 3_504_872),
    "ssd_resnet50_512": ModelInfo(ssd_resnet50_512, 512, 32, 49_693_302),
    "resnext50_32x4d": ModelInfo(resnext50_32x4d, 224, 32, 25_028_904),
    "regnet_y_800mf": ModelInfo(regnet_y_800mf, 224, 32, 6_432_512),
}

# Models that look like what users export (h-zoo): unfused BatchNormalization on request,
# SiLU / hardswish as exported, shape-computing subgraphs (shufflenet), resize skips (unet).
_ZOO.update({
    "efficientnet_b0": ModelInfo(efficientnet_b0, 224, 32, 5_288_548, unfused_bn=True),
    "mobilenet_v3_large": ModelInfo(mobilenet_v3_large, 224, 32, 5_483_032, unfused_bn=True),
    "shufflenet_v2": ModelInfo(shufflenet_v2, 224, 32, 2_278_604, unfused_bn=True),
    "googlenet": ModelInfo(googlenet, 224, 32, 6_624_904, unfused_bn=True),
    "unet": ModelInfo(unet, 256, 8, 1_948_322, unfused_bn=True),
})
_ZOO["densenet121"] = _ZOO["densenet121"]._replace(unfused_bn=True)
_ZOO["densenet201"] = _ZOO["densenet201"]._replace(unfused_bn=True)
"""The zoo. ``params`` is torchvision's count (``inception_v3`` and ``googlenet`` without
their training-only auxiliary classifiers: 27.16M with it); ``ssd_resnet50_512`` and ``unet``
have no published count and list this zoo's own (``unet``: with batch norm unfolded). VGG's count
holds at 224x224 only (see :mod:`graphtune.models.vgg`)."""


def names() -> list[str]:
    """Names of the zoo's models, sorted.

    Examples
    --------
    >>> names()[:2]
    ['densenet121', 'densenet201']
    """
    return sorted(_ZOO)


def info(name: str) -> ModelInfo:
    """The :class:`ModelInfo` of a zoo model.

    Raises
    ------
    ModelError
        If ``name`` is not a zoo model; the message lists the valid names.

    Examples
    --------
    >>> info("resnet50").image_size
    224
    """
    try:
        return _ZOO[name]
    except (KeyError, TypeError):
        raise ModelError(f"unknown model {name!r}; valid names: {', '.join(names())}") from None


def get(name: str, batch_size: int = 1, image_size: int | None = None,
        fold_bn: bool = True) -> onnx.ModelProto:
    """Build a zoo model as an ONNX ``ModelProto``.

    Parameters
    ----------
    name : str
        One of :func:`names`.
    batch_size : int
        Batch dimension ``N`` of the input (and outputs).
    image_size : int, optional
        Input height and width; default the published size (224, 299 for
        ``inception_v3``, 512 for ``ssd_resnet50_512``). Small sizes make
        fast tests; each model has a minimum (``info(name).min_image_size``).
        Weights do not depend on the size, except VGG's first dense layer,
        whose input follows the feature map (exactly torchvision's at 224).
    fold_bn : bool
        ``False`` keeps batch norm as ``BatchNormalization`` nodes (models with
        ``info(name).unfused_bn``; parameter count then exactly torchvision's).

    Returns
    -------
    onnx.ModelProto
        The model, deterministic for equal arguments.

    Raises
    ------
    ModelError
        For an unknown name, a batch size below 1, an image size below the
        model's minimum, or ``fold_bn=False`` for a model without that option.

    Examples
    --------
    >>> model = get("resnet50", batch_size=2, image_size=32)
    >>> [o.name for o in model.graph.output]
    ['output']
    """
    entry = info(name)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ModelError(f"{name}: batch_size must be an int >= 1, got {batch_size!r}")
    size = entry.image_size if image_size is None else image_size
    if isinstance(size, bool) or not isinstance(size, int):
        raise ModelError(f"{name}: image_size must be an int, got {size!r}")
    if size < entry.min_image_size:
        raise ModelError(f"{name}: image_size {size} is too small; use at least "
                         f"{entry.min_image_size} (default {entry.image_size})")
    if fold_bn:
        return entry.build(batch_size=batch_size, image_size=size)
    if not entry.unfused_bn:
        with_option = sorted(n for n, e in _ZOO.items() if e.unfused_bn)
        raise ModelError(f"{name}: fold_bn=False is not available (batch norm is always folded "
                         f"in it); models with unfused batch norm: {', '.join(with_option)}")
    return entry.build(batch_size=batch_size, image_size=size, fold_bn=False)
