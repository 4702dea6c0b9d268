"""Quantize a model to int8 QDQ form with ONNX Runtime's static quantizer.

:func:`quantize` is a thin wrapper over ``onnxruntime.quantization``: ``quant_pre_process``
(ONNX Runtime's graph optimizations and shape inference; symbolic shape inference only when
``sympy`` is installed; the model is quantized as it is, with a warning, where the step
fails), then ``quantize_static`` in QDQ format with uint8 activations and int8 weights,
calibrated on ``calibration_data``. The result is an ``onnx.ModelProto`` that ONNX Runtime
runs with its int8 kernels and :func:`graphtune.compile` / :func:`graphtune.tune` take like any
model (its quantized convs on graphtune's int8 kernels, the ops between them in fp32 with the
model's rounding: :mod:`graphtune.frontend.qdq`).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> data = [{"input": rng.standard_normal((1, 3, 32, 32), dtype=np.float32)} for _ in range(2)]
>>> qdq = quantize("resnet18", data, image_size=32)
>>> sorted({n.op_type for n in qdq.graph.node} - {"Conv", "Add", "Gemm", "Flatten"})
['DequantizeLinear', 'GlobalAveragePool', 'MaxPool', 'QuantizeLinear']
>>> quantize("resnet18", [{"image": data[0]["input"]}], image_size=32)
Traceback (most recent call last):
...
graphtune.errors.ArgumentError: calibration_data[0] names 'image', which is not an input of the model; ...
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import helper

from .checks import check_choice
from .errors import ArgumentError, ModelError
from .models.resolve import resolve
from .x86.int8_isa import wants_7bit_weights

if TYPE_CHECKING:
    from onnxruntime.quantization import CalibrationDataReader

__all__ = ["quantize", "CALIBRATE_METHODS", "REDUCE_RANGE_KEY"]

REDUCE_RANGE_KEY = "graphtune.reduce_range"
"""``metadata_props`` key of a model :func:`quantize` wrote: ``"True"`` for 7-bit weights."""

CALIBRATE_METHODS = ("minmax", "entropy", "percentile", "distribution")
"""Values of ``calibrate_method`` (``onnxruntime.quantization.CalibrationMethod``)."""


def quantize(model: Any, calibration_data: Any, *, per_channel: bool = True,
             reduce_range: bool | None = None, calibrate_method: str = "minmax",
             nodes_to_exclude: Iterable[str] = (), image_size: int | None = None,
             target: Any = None) -> onnx.ModelProto:
    """``model`` quantized to QDQ form (uint8 activations, int8 weights) by ONNX Runtime.

    Parameters
    ----------
    model : str, path or onnx.ModelProto
        A zoo name (:func:`graphtune.models.names`), an ``.onnx`` file or a model.
    calibration_data : list of dict or onnxruntime.quantization.CalibrationDataReader
        Representative inputs: ``{input_name: array}`` dicts naming every graph input
        (checked, with the shapes, before any work), or a reader yielding such dicts
        (each checked as it comes).
    per_channel : bool
        One weight scale per output channel (default) or per tensor.
    reduce_range : bool, optional
        7-bit weights. ONNX Runtime's uint8 x int8 kernels on x86 CPUs without VNNI
        (AVX2's ``vpmaddubsw``) saturate sums of two products at int16 and then differ
        from the model's own arithmetic; 7-bit weights cannot overflow there, and graphtune's
        int8 kernels then run that instruction too, exactly (``isa`` ``avx2ubs``, docs/int8.md),
        where with 8-bit weights they take the exact 16-bit path at half its speed. Default
        (None): 7-bit weights exactly where ``target``'s fastest int8 instruction needs them
        (:func:`graphtune.x86.int8_isa.wants_7bit_weights`: no VNNI / AMX), as ONNX Runtime
        recommends; the choice is kept in the model's ``metadata_props``
        (:data:`REDUCE_RANGE_KEY`).
    calibrate_method : {"minmax", "entropy", "percentile", "distribution"}
        How activation ranges are found from the calibration data.
    nodes_to_exclude : iterable of str
        ONNX node names left in fp32.
    image_size : int, optional
        Input size of a zoo model (default its published size).
    target : tvm.target.Target or dict, optional
        The CPU the model will run on, for ``reduce_range=None`` (default: this one,
        :func:`graphtune.x86.host_target`).

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    ArgumentError
        For calibration data that does not fit the model's inputs (names the item, the
        input and what it expects), or an unknown ``calibrate_method``.
    ModelError
        For an unknown model, or when ONNX Runtime cannot quantize it.

    Examples
    --------
    >>> import numpy as np
    >>> quantize("resnet18", [{"input": np.zeros((1, 3, 64, 64), np.float32)}], image_size=32)
    Traceback (most recent call last):
    ...
    graphtune.errors.ArgumentError: calibration_data[0]['input'] has shape [1, 3, 64, 64]; the model's ...
    """
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quant_pre_process,
        quantize_static,
    )

    method = check_choice(calibrate_method, CALIBRATE_METHODS, "calibrate_method")
    if reduce_range is None:
        reduce_range = wants_7bit_weights(target)
    elif not isinstance(reduce_range, bool):
        raise ArgumentError(f"reduce_range must be True, False or None (decided by the target's "
                            f"int8 instructions), got {reduce_range!r}")
    proto, _ = resolve(model, image_size=image_size)
    if not isinstance(proto, onnx.ModelProto):
        raise ModelError(f"quantize takes an ONNX model, got {type(proto).__name__}")
    inputs = _graph_inputs(proto)
    reader = _reader(calibration_data, inputs)
    with tempfile.TemporaryDirectory(prefix="graphtune-quantize-") as tmp:
        source, prepared, output = (os.path.join(tmp, f) for f in ("model.onnx", "pre.onnx",
                                                                      "qdq.onnx"))
        onnx.save(proto, source)
        try:
            quant_pre_process(source, prepared,
                              skip_symbolic_shape=importlib.util.find_spec("sympy") is None)
        except Exception as err:  # ORT's optimizer and shape inference raise anything
            warnings.warn(f"graphtune.quantize: onnxruntime's quant_pre_process failed "
                          f"({type(err).__name__}: {err}); quantizing the model as it is",
                          UserWarning, stacklevel=2)
            prepared = source
        try:
            quantize_static(
                prepared, output, reader, quant_format=QuantFormat.QDQ,
                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                per_channel=per_channel, reduce_range=reduce_range,
                calibrate_method=getattr(CalibrationMethod, _METHOD_NAMES[method]),
                nodes_to_exclude=list(nodes_to_exclude))
        except ArgumentError:
            raise
        except Exception as err:  # ORT raises ValueError, RuntimeError, its own Fail...
            raise ModelError(f"onnxruntime could not quantize the model ({type(err).__name__}: "
                             f"{err})") from None
        quantized = onnx.load(output)
    helper.set_model_props(quantized, {**{p.key: p.value for p in quantized.metadata_props},
                                       REDUCE_RANGE_KEY: str(reduce_range)})
    return quantized


_METHOD_NAMES = dict(zip(CALIBRATE_METHODS, ("MinMax", "Entropy", "Percentile", "Distribution")))


def _graph_inputs(proto: onnx.ModelProto) -> dict[str, tuple[list, np.dtype]]:
    """Each true graph input's ``(shape, dtype)``; a dynamic dimension is None."""
    initializers = {t.name for t in proto.graph.initializer}
    specs = {}
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        t = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        specs[value.name] = (shape, helper.tensor_dtype_to_np_dtype(t.elem_type))
    return specs


def _checked(item: Any, where: str, inputs: Mapping[str, tuple]) -> dict[str, np.ndarray]:
    """``item`` as ``{input: array}`` of the inputs' dtypes, or ArgumentError saying what is wrong."""
    if not isinstance(item, Mapping):
        raise ArgumentError(f"{where} is a {type(item).__name__}; expected a dict "
                            f"{{input_name: array}} naming the inputs {list(inputs)}")
    unknown = [name for name in item if name not in inputs]
    if unknown:
        raise ArgumentError(f"{where} names {', '.join(map(repr, unknown))}, which "
                            f"{'is' if len(unknown) == 1 else 'are'} not an input of the model; "
                            f"its inputs are {list(inputs)}")
    missing = [name for name in inputs if name not in item]
    if missing:
        raise ArgumentError(f"{where} lacks the input(s) {missing}; give every input of the "
                            f"model: {list(inputs)}")
    arrays = {}
    for name, (shape, dtype) in inputs.items():
        try:
            array = np.asarray(item[name], dtype=dtype)
        except (TypeError, ValueError) as err:
            raise ArgumentError(f"{where}[{name!r}] is not a {dtype} array ({err})") from None
        if array.ndim != len(shape) or any(d is not None and d != n for d, n in zip(shape, array.shape)):
            expected = [d if d is not None else "?" for d in shape]
            raise ArgumentError(f"{where}[{name!r}] has shape {list(array.shape)}; the model's "
                                f"input {name!r} is {expected}")
        arrays[name] = array
    return arrays


def _reader(data: Any, inputs: Mapping[str, tuple]) -> CalibrationDataReader:
    """A CalibrationDataReader over ``data``, its items checked against ``inputs`` (those of a
    list all at once, before any work; those of a reader as they come)."""
    from onnxruntime.quantization import CalibrationDataReader

    class _Reader(CalibrationDataReader):
        def __init__(self, items: Iterator[dict]) -> None:
            self.items = items

        def get_next(self) -> dict | None:
            return next(self.items, None)

    if callable(getattr(data, "get_next", None)):
        return _Reader(_checked(item, f"calibration_data item {k}", inputs)
                       for k, item in enumerate(iter(data.get_next, None)))
    if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Iterable):
        raise ArgumentError(f"calibration_data is a {type(data).__name__}; expected a list of "
                            "{input_name: array} dicts or an onnxruntime.quantization."
                            "CalibrationDataReader")
    items = [_checked(item, f"calibration_data[{k}]", inputs) for k, item in enumerate(data)]
    if not items:
        raise ArgumentError("calibration_data is empty; give at least one {input_name: array} dict")
    return _Reader(iter(items))
