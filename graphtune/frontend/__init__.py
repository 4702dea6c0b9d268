"""Model -> Relax -> layout graph: the frontend of graphtune.

:func:`rewrite_qdq` turns an ONNX graph's quantization nodes into fp32 (QDQ models);
:func:`fold_constants` evaluates an ONNX graph's shape computations;
:func:`pad_output_channels` pads odd output-channel counts where that is free,
:func:`pad_channel_chains` narrow channel counts between convs;
:func:`import_model` turns an ONNX model (or a Relax module) into a static
Relax ``IRModule`` (folding first); :func:`walk` and :func:`layout_ops` read its ``main`` the
same way for extraction and compilation, so node names agree; :func:`extract`
builds the :class:`~graphtune.graph.LayoutGraph`.

Examples
--------
>>> from graphtune import models
>>> from graphtune.frontend import import_model, layout_ops
>>> [op.name for op in layout_ops(import_model(models.get("resnet18", image_size=32)))][:3]
['conv1', 'layer1.0.conv1', 'layer1.0.conv2']
"""

from .extract import extract
from .fold import fold_constants
from .importer import import_model, prepare_onnx
from .pad import pad_channel_chains, pad_int8_input_channels, pad_output_channels
from .qdq import rewrite_qdq
from .roles import Form, Role
from .walk import ROLES, LayoutOp, Step, layout_ops, walk

__all__ = [
    "extract", "fold_constants", "import_model", "prepare_onnx", "pad_output_channels", "pad_channel_chains",
    "pad_int8_input_channels", "layout_ops",
    "walk", "LayoutOp", "Step", "ROLES", "Role", "Form", "rewrite_qdq",
]
