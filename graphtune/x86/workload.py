"""Workload dicts: which op they describe, validation and output shapes.

A workload is the JSON-able description of one op instance (see the team
contract): conv2d/depthwise/group conv ``{"data", "kernel", "strides", "padding",
"dilation", "groups", "dtype"}``, conv2d_transpose the same plus
``"output_padding"`` (kernel ``[C, O, KH, KW]``, IOHW as in ONNX) and dense
``{"data", "weight", "dtype"}`` (data ``[..., K]`` of rank 2 to 4: the leading
dims are rows).

Examples
--------
>>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> op_of(wl), output_shape(wl)
('conv2d', [1, 64, 56, 56])
"""

import math

from ..errors import ModelError

__all__ = [
    "op_of", "check_workload", "output_shape", "conv2d_workload", "conv2d_transpose_workload",
    "dense_workload", "flops",
]

_CONV_KEYS = ("data", "kernel", "strides", "padding", "dilation", "groups", "dtype")
_DENSE_KEYS = ("data", "weight", "dtype")
_TCONV_KEYS = ("data", "kernel", "strides", "padding", "output_padding", "dilation", "groups", "dtype")
_DTYPES = ("float32",)


def conv2d_workload(
    data: list,
    kernel: list,
    strides: list = (1, 1),
    padding: list = (0, 0, 0, 0),
    dilation: list = (1, 1),
    groups: int = 1,
    dtype: str = "float32",
) -> dict:
    """Build a (depthwise) conv2d workload dict with lists, not tuples.

    Examples
    --------
    >>> conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3])["strides"]
    [2, 2]
    """
    workload = {
        "data": [int(x) for x in data],
        "kernel": [int(x) for x in kernel],
        "strides": [int(x) for x in strides],
        "padding": [int(x) for x in padding],
        "dilation": [int(x) for x in dilation],
        "groups": int(groups),
        "dtype": dtype,
    }
    check_workload(workload)
    return workload


def conv2d_transpose_workload(
    data: list,
    kernel: list,
    strides: list = (1, 1),
    padding: list = (0, 0, 0, 0),
    output_padding: list = (0, 0),
    dtype: str = "float32",
) -> dict:
    """Build a transposed conv2d workload (kernel ``[C, O, KH, KW]``, groups 1, dilation 1).

    Examples
    --------
    >>> wl = conv2d_transpose_workload([1, 64, 28, 28], [64, 32, 2, 2], [2, 2])
    >>> op_of(wl), output_shape(wl)
    ('conv2d_transpose', [1, 32, 56, 56])
    """
    workload = {
        "data": [int(x) for x in data],
        "kernel": [int(x) for x in kernel],
        "strides": [int(x) for x in strides],
        "padding": [int(x) for x in padding],
        "output_padding": [int(x) for x in output_padding],
        "dilation": [1, 1],
        "groups": 1,
        "dtype": dtype,
    }
    check_workload(workload)
    return workload


def dense_workload(data: list, weight: list, dtype: str = "float32") -> dict:
    """Build a dense workload dict (``y = x @ W.T``).

    Examples
    --------
    >>> dense_workload([1, 2048], [1000, 2048])
    {'data': [1, 2048], 'weight': [1000, 2048], 'dtype': 'float32'}
    """
    workload = {"data": [int(x) for x in data], "weight": [int(x) for x in weight], "dtype": dtype}
    check_workload(workload)
    return workload


def _ints(workload: dict, field: str, length: int, minimum: int) -> list:
    value = workload[field]
    if (
        not isinstance(value, (list, tuple))
        or len(value) != length
        or not all(isinstance(x, int) and not isinstance(x, bool) and x >= minimum for x in value)
    ):
        raise ModelError(
            f"workload field {field!r} = {value!r}: expected a list of {length} ints >= {minimum}"
        )
    return list(value)


def _check_fields(workload: dict, keys: tuple) -> None:
    missing = [k for k in keys if k not in workload]
    extra = [k for k in workload if k not in keys]
    if missing or extra:
        raise ModelError(
            f"workload {workload!r}: missing fields {missing}, unknown fields {extra}; "
            f"a {_KIND[keys]} workload has exactly {list(keys)}"
        )
    if workload["dtype"] not in _DTYPES:
        raise ModelError(f"workload dtype {workload['dtype']!r} is not supported; use one of {_DTYPES}")


_KIND = {_CONV_KEYS: "conv2d", _DENSE_KEYS: "dense", _TCONV_KEYS: "conv2d_transpose"}


def _check_transpose(workload: dict) -> dict:
    _check_fields(workload, _TCONV_KEYS)
    n, c, h, w = _ints(workload, "data", 4, 1)
    c2, o, kh, kw = _ints(workload, "kernel", 4, 1)
    sh, sw = _ints(workload, "strides", 2, 1)
    _ints(workload, "padding", 4, 0)
    ph, pw = _ints(workload, "output_padding", 2, 0)
    if c2 != c:
        raise ModelError(f"conv2d_transpose workload: kernel {workload['kernel']} (IOHW) expects {c2} "
                         f"input channels but data has {c}")
    if workload["groups"] != 1 or _ints(workload, "dilation", 2, 1) != [1, 1]:
        raise ModelError(
            f"conv2d_transpose with groups={workload['groups']}, dilation={workload['dilation']} is not "
            "supported by graphtune.x86: only groups=1 and dilation [1, 1] are"
        )
    if ph >= sh or pw >= sw:
        raise ModelError(f"conv2d_transpose output_padding {[ph, pw]} must be smaller than the strides {[sh, sw]}")
    if min(output_shape(workload)) < 1:
        raise ModelError(f"workload {workload!r} has an empty output; check padding/strides/kernel")
    return workload


def check_workload(workload: dict) -> dict:
    """Validate ``workload``; return it unchanged or raise ModelError naming the field.

    Raises
    ------
    ModelError
        Missing/unknown fields, bad shapes, mismatched channels, an empty
        output, or an unsupported dtype.

    Examples
    --------
    >>> check_workload({"data": [1, 8], "weight": [4, 8], "dtype": "float32"})["weight"]
    [4, 8]
    """
    if not isinstance(workload, dict):
        raise ModelError(f"workload must be a dict, got {type(workload).__name__}")
    if "output_padding" in workload:
        return _check_transpose(workload)
    if "weight" in workload:
        _check_fields(workload, _DENSE_KEYS)
        data = workload["data"]
        if not isinstance(data, (list, tuple)) or not 2 <= len(data) <= 4:
            raise ModelError(f"dense workload field 'data' = {data!r}: expected 2 to 4 ints (rows..., features)")
        k = _ints(workload, "data", len(data), 1)[-1]
        m, k2 = _ints(workload, "weight", 2, 1)
        if k != k2:
            raise ModelError(f"dense workload: data has {k} features but weight expects {k2}")
        return workload
    _check_fields(workload, _CONV_KEYS)
    n, c, h, w = _ints(workload, "data", 4, 1)
    o, cg, kh, kw = _ints(workload, "kernel", 4, 1)
    _ints(workload, "strides", 2, 1)
    _ints(workload, "padding", 4, 0)
    _ints(workload, "dilation", 2, 1)
    groups = workload["groups"]
    if not isinstance(groups, int) or groups < 1 or c % groups or o % groups:
        raise ModelError(
            f"workload groups={groups!r} must be a positive int dividing the {c} input and {o} output channels"
        )
    if cg * groups != c:
        raise ModelError(
            f"workload kernel {workload['kernel']} expects {cg * groups} input channels "
            f"(kernel[1] * groups) but data has {c}"
        )
    if min(output_shape(workload)) < 1:
        raise ModelError(f"workload {workload!r} has an empty output; check padding/strides/kernel")
    return workload


def op_of(workload: dict) -> str:
    """``"conv2d"``, ``"depthwise_conv2d"`` (``groups == C == O``), ``"group_conv2d"``
    (other ``groups > 1``), ``"conv2d_transpose"`` or ``"dense"`` for a valid workload.

    Raises
    ------
    ModelError
        If the workload is malformed or its op is not supported.

    Examples
    --------
    >>> op_of(conv2d_workload([1, 32, 8, 8], [32, 1, 3, 3], groups=32, padding=[1, 1, 1, 1]))
    'depthwise_conv2d'
    """
    check_workload(workload)
    if "output_padding" in workload:
        return "conv2d_transpose"
    if "weight" in workload:
        return "dense"
    groups, channels = workload["groups"], workload["data"][1]
    if groups == 1:
        return "conv2d"
    return "depthwise_conv2d" if groups == channels == workload["kernel"][0] else "group_conv2d"


def output_shape(workload: dict) -> list:
    """Logical output shape: ``[N, O, OH, OW]`` for convs, ``[..., M]`` for dense.

    Examples
    --------
    >>> output_shape(conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3]))
    [1, 64, 112, 112]
    """
    if "weight" in workload:
        return list(workload["data"][:-1]) + [workload["weight"][0]]
    if "output_padding" in workload:
        n, _, h, w = workload["data"]
        _, o, kh, kw = workload["kernel"]
        (sh, sw), (top, left, bottom, right) = workload["strides"], workload["padding"]
        ph, pw = workload["output_padding"]
        return [n, o, (h - 1) * sh - top - bottom + kh + ph, (w - 1) * sw - left - right + kw + pw]
    n, _, h, w = workload["data"]
    o, _, kh, kw = workload["kernel"]
    sh, sw = workload["strides"]
    top, left, bottom, right = workload["padding"]
    dh, dw = workload["dilation"]
    oh = (h + top + bottom - (kh - 1) * dh - 1) // sh + 1
    ow = (w + left + right - (kw - 1) * dw - 1) // sw + 1
    return [n, o, oh, ow]


def flops(workload: dict) -> int:
    """Floating-point operations (multiply + add = 2) of one run of the workload.

    Examples
    --------
    >>> flops(dense_workload([1, 4], [3, 4]))
    24
    """
    if "weight" in workload:
        m, k = workload["weight"]
        return 2 * math.prod(workload["data"][:-1]) * k * m
    if "output_padding" in workload:  # every input pixel meets every kernel tap once
        n, c, h, w = workload["data"]
        return 2 * n * h * w * math.prod(workload["kernel"])
    n, o, oh, ow = output_shape(workload)
    _, cg, kh, kw = workload["kernel"]
    return 2 * n * o * oh * ow * cg * kh * kw
