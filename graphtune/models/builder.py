"""A small ONNX graph builder for the model zoo.

:class:`GraphBuilder` appends ONNX nodes one layer at a time, tracks every
tensor's static shape, and draws seeded random weights. By default batch norm
is folded: a conv is emitted with the weight and bias that folding would
produce, and a pre-activation batch norm that cannot be folded (DenseNet) is a
per-channel ``Mul`` + ``Add`` (:meth:`GraphBuilder.affine`). With
``fold_bn=False``, :meth:`GraphBuilder.conv_bn` and :meth:`GraphBuilder.norm`
emit what an exporter without constant folding emits: a bias-free ``Conv``
followed by ``BatchNormalization`` (parameters ``.weight``, ``.bias``,
``.running_mean``, ``.running_var``, torchvision's names and count).

Weights are He-initialised (uniform with ``std = gain * sqrt(2 / fan_in)``,
6x faster to draw than normal values) so that activations stay of order one
through deep nets; the model families damp the last conv of residual
branches and the convs that feed no ReLU with ``gain < 1`` so that sums of
many branches do not grow. Zoo outputs (logits, box and class predictions)
have a standard deviation of about 0.1 to 3 at every supported image size,
so comparisons at ``rtol = atol = 1e-4`` are meaningful.

Examples
--------
>>> b = GraphBuilder("tiny", seed=0, batch_size=1, image_size=8)
>>> x = b.conv(b.input, "conv1", 4, kernel=3, padding=1)
>>> x = b.relu(x, "relu")
>>> x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
>>> b.dense(x, "fc", 10, output="output")
'output'
>>> model = b.model(["output"])
>>> [n.op_type for n in model.graph.node]
['Conv', 'Relu', 'GlobalAveragePool', 'Flatten', 'Gemm']
>>> param_count(model)
162
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import ModelError

__all__ = ["GraphBuilder", "param_count", "OPSET", "IR_VERSION"]

OPSET = 13
"""ONNX opset of every zoo model."""

IR_VERSION = 8
"""ONNX IR version of every zoo model (ONNX Runtime 1.31 rejects 14)."""

_BIAS_STD = 0.05


def _pair(value: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    first, second = value
    return int(first), int(second)


class GraphBuilder:
    """Build one ONNX CNN graph layer by layer with seeded random weights.

    Parameters
    ----------
    name : str
        Graph name (the zoo model's name).
    seed : int
        Seed of the weights' random generator; equal seeds give equal bytes.
    batch_size : int
        ``N`` of the input ``"input"`` ``[N, 3, H, W]``.
    image_size : int
        ``H == W`` of the input.
    fold_bn : bool
        Whether :meth:`conv_bn` and :meth:`norm` fold batch norm (the default)
        or emit ``BatchNormalization`` nodes.

    Examples
    --------
    >>> b = GraphBuilder("tiny", seed=0, batch_size=2, image_size=8)
    >>> b.shape(b.conv(b.input, "conv1", 4, kernel=3, stride=2, padding=1))
    (2, 4, 4, 4)
    """

    def __init__(self, name: str, seed: int, batch_size: int, image_size: int,
                 fold_bn: bool = True) -> None:
        self.name = name
        self.fold_bn = fold_bn
        self.input = "input"
        self._rng = np.random.default_rng(seed)
        self._nodes: list[onnx.NodeProto] = []
        self._inits: list[onnx.TensorProto] = []
        self._init_names: set[str] = set()
        self._shapes: dict[str, tuple[int, ...]] = {
            self.input: (batch_size, 3, image_size, image_size)
        }

    # ------------------------------------------------------------------ helpers
    def shape(self, tensor: str) -> tuple[int, ...]:
        """Static shape of a tensor built so far.

        Examples
        --------
        >>> GraphBuilder("t", 0, 1, 32).shape("input")
        (1, 3, 32, 32)
        """
        return self._shapes[tensor]

    def _const(self, name: str, array: np.ndarray) -> str:
        if name not in self._init_names:
            self._init_names.add(name)
            self._inits.append(numpy_helper.from_array(array, name))
        return name

    def _random(self, shape: tuple[int, ...], std: float) -> np.ndarray:
        # uniform on [-std * sqrt(3), std * sqrt(3)): its standard deviation is std
        out = self._rng.random(shape, dtype=np.float32)
        out -= np.float32(0.5)
        out *= np.float32(std * math.sqrt(12.0))
        return out

    def _node(self, op: str, inputs: list[str], name: str, shape: tuple[int, ...],
              output: str | None = None, **attrs: Any) -> str:
        out = output or name
        if out in self._shapes:
            raise ModelError(f"{self.name}: tensor {out!r} is produced twice; "
                             "node names must be unique")
        if any(d <= 0 for d in shape):
            h, w = self._shapes[self.input][2:]
            raise ModelError(
                f"{self.name}: node {name!r} would produce an empty tensor {list(shape)} "
                f"for input {h}x{w}; use a larger image_size"
            )
        self._nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        self._shapes[out] = tuple(int(d) for d in shape)
        return out

    @staticmethod
    def _window(size: int, kernel: int, stride: int, pad: int) -> int:
        return (size + 2 * pad - kernel) // stride + 1

    # ------------------------------------------------------------------ layers
    def conv(self, x: str, name: str, out_channels: int, kernel: int | Sequence[int],
             stride: int = 1, padding: int | Sequence[int] = 0, groups: int = 1,
             bias: bool = True, gain: float = 1.0, output: str | None = None) -> str:
        """2-D convolution with He-initialised weight ``name.weight`` and bias ``name.bias``.

        Parameters
        ----------
        x : str
            Input tensor (NCHW).
        name : str
            Node name and output tensor name (e.g. ``"layer1.0.conv1"``).
        out_channels : int
            Output channels.
        kernel, padding : int or (int, int)
            Kernel size and symmetric padding, (height, width) when a pair.
        stride : int
            Stride in both dimensions.
        groups : int
            Group count; ``groups == in_channels == out_channels`` is depthwise.
        bias : bool
            Whether the conv has a bias (a folded batch norm always gives one).
        gain : float
            Multiplier of the He standard deviation (``< 1`` damps residual branches).
        output : str, optional
            Output tensor name (default ``name``; a graph output's name).

        Returns
        -------
        str
            The output tensor's name.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 16)
        >>> b.shape(b.conv("input", "dw", 3, kernel=3, padding=1, groups=3))
        (1, 3, 16, 16)
        """
        n, cin, h, w = self._shapes[x]
        kh, kw = _pair(kernel)
        ph, pw = _pair(padding)
        if cin % groups or out_channels % groups:
            raise ModelError(f"{self.name}: conv {name!r}: groups={groups} must divide "
                             f"in_channels={cin} and out_channels={out_channels}")
        fan_in = cin // groups * kh * kw
        weight = self._random((out_channels, cin // groups, kh, kw), gain * math.sqrt(2.0 / fan_in))
        inputs = [x, self._const(f"{name}.weight", weight)]
        if bias:
            inputs.append(self._const(f"{name}.bias", self._random((out_channels,), _BIAS_STD)))
        shape = (n, out_channels, self._window(h, kh, stride, ph), self._window(w, kw, stride, pw))
        return self._node("Conv", inputs, name, shape, output=output, kernel_shape=[kh, kw],
                          strides=[stride, stride], pads=[ph, pw, ph, pw],
                          dilations=[1, 1], group=groups)

    def relu(self, x: str, name: str) -> str:
        """``Relu``.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.relu("input", "relu")
        'relu'
        """
        return self._node("Relu", [x], name, self._shapes[x])

    def relu6(self, x: str, name: str) -> str:
        """ReLU6 as ``Clip(x, 0, 6)`` (min/max as shared constant inputs).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.relu6("input", "act"))
        (1, 3, 4, 4)
        """
        lo = self._const("relu6.min", np.array(0.0, dtype=np.float32))
        hi = self._const("relu6.max", np.array(6.0, dtype=np.float32))
        return self._node("Clip", [x, lo, hi], name, self._shapes[x])

    def sigmoid(self, x: str, name: str) -> str:
        """``Sigmoid``.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.sigmoid("input", "gate"))
        (1, 3, 4, 4)
        """
        return self._node("Sigmoid", [x], name, self._shapes[x])

    def scale(self, x: str, gate: str, name: str) -> str:
        """``Mul`` of ``x`` ``[N, C, H, W]`` by a per-channel ``gate`` ``[N, C, 1, 1]``
        (squeeze-excitation).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.scale("input", b.global_avg_pool("input", "pool"), "se"))
        (1, 3, 4, 4)
        """
        if self._shapes[gate] != self._shapes[x][:2] + (1, 1):
            raise ModelError(f"{self.name}: scale {name!r}: gate shape {self._shapes[gate]} is not "
                             f"[N, C, 1, 1] of {self._shapes[x]}")
        return self._node("Mul", [x, gate], name, self._shapes[x])

    def affine(self, x: str, name: str) -> str:
        """Per-channel ``x * name.weight + name.bias``: an inference batch norm that cannot be
        folded into a conv (it precedes a ReLU), as ``Mul`` + ``Add`` with ``[C, 1, 1]`` constants.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.affine("input", "norm")
        'norm'
        >>> [n.op_type for n in b.model(["norm"]).graph.node]
        ['Mul', 'Add']
        """
        c = self._shapes[x][1]
        scale = 1.0 + self._random((c, 1, 1), 0.1)
        shift = self._random((c, 1, 1), _BIAS_STD)
        scaled = self._node("Mul", [x, self._const(f"{name}.weight", scale)], f"{name}.mul",
                            self._shapes[x])
        return self._node("Add", [scaled, self._const(f"{name}.bias", shift)], name,
                          self._shapes[x])

    def norm(self, x: str, name: str, eps: float = 1e-5) -> str:
        """Inference batch norm ``name`` of ``x``'s channels: :meth:`affine` when folding,
        else a ``BatchNormalization`` node with seeded statistics.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4, fold_bn=False)
        >>> b.norm("input", "bn")
        'bn'
        >>> [n.op_type for n in b.model(["bn"]).graph.node]
        ['BatchNormalization']
        """
        if self.fold_bn:
            return self.affine(x, name)
        c = self._shapes[x][1]
        scale = self._const(f"{name}.weight", 1.0 + self._random((c,), 0.1))
        shift = self._const(f"{name}.bias", self._random((c,), _BIAS_STD))
        mean = self._const(f"{name}.running_mean", self._random((c,), _BIAS_STD))
        var = self._const(f"{name}.running_var", 1.0 + self._random((c,), 0.1))
        return self._node("BatchNormalization", [x, scale, shift, mean, var], name,
                          self._shapes[x], epsilon=eps)

    def conv_bn(self, x: str, name: str, bn_name: str, out_channels: int,
                kernel: int | Sequence[int], stride: int = 1, padding: int | Sequence[int] = 0,
                groups: int = 1, gain: float = 1.0, eps: float = 1e-5) -> str:
        """Conv ``name`` followed by batch norm ``bn_name``: one biased conv when folding,
        else a bias-free conv and a ``BatchNormalization`` with epsilon ``eps`` (see
        :meth:`conv` for the other arguments).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 8, fold_bn=False)
        >>> b.shape(b.conv_bn("input", "conv", "bn", 4, 3, padding=1))
        (1, 4, 8, 8)
        >>> [n.op_type for n in b.model(["bn"]).graph.node]
        ['Conv', 'BatchNormalization']
        """
        if self.fold_bn:
            return self.conv(x, name, out_channels, kernel, stride, padding, groups, gain=gain)
        y = self.conv(x, name, out_channels, kernel, stride, padding, groups, bias=False, gain=gain)
        return self.norm(y, bn_name, eps)

    def squeeze_excitation(self, x: str, name: str, squeeze: int, act: str = "relu",
                           gate: str = "sigmoid") -> str:
        """Squeeze-and-excitation (torchvision ``SqueezeExcitation``): ``GlobalAveragePool``
        (``name.avgpool``), 1x1 conv ``name.fc1`` to ``squeeze`` channels, ``act``
        (``"relu"``, ``"silu"``), 1x1 conv ``name.fc2`` back, ``gate`` (``"sigmoid"``,
        ``"hardsigmoid"``), and the channel scaling ``Mul`` ``name``.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.squeeze_excitation("input", "se", 2))
        (1, 3, 4, 4)
        """
        acts = {"relu": self.relu, "silu": self.silu}
        gates = {"sigmoid": lambda t, n: self.unary("Sigmoid", t, n),
                 "hardsigmoid": self.hardsigmoid}
        if act not in acts or gate not in gates:
            raise ModelError(f"{self.name}: squeeze_excitation {name!r}: act must be one of "
                             f"{sorted(acts)}, gate one of {sorted(gates)}")
        c = self._shapes[x][1]
        s = acts[act](self.conv(self.global_avg_pool(x, f"{name}.avgpool"), f"{name}.fc1",
                                squeeze, 1), f"{name}.act")
        s = gates[gate](self.conv(s, f"{name}.fc2", c, 1), f"{name}.gate")
        return self.mul(x, s, name)

    def unary(self, op: str, x: str, name: str, **attrs: Any) -> str:
        """A shape-preserving one-input op ``op`` (``Sigmoid``, ``Identity``, ``HardSigmoid``...).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.unary("Sigmoid", "input", "gate"))
        (1, 3, 4, 4)
        """
        return self._node(op, [x], name, self._shapes[x], **attrs)

    def mul(self, a: str, b: str, name: str) -> str:
        """Broadcasting ``Mul`` of an activation ``a`` by ``b`` (same shape, or ``[N, C, 1, 1]``).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.mul("input", b.global_avg_pool("input", "pool"), "scale"))
        (1, 3, 4, 4)
        """
        return self._node("Mul", [a, b], name, self._shapes[a])

    def silu(self, x: str, name: str) -> str:
        """SiLU as exported at opset 13: ``Mul(x, Sigmoid(x))`` (nodes ``name.sigmoid``, ``name``).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> [n.op_type for n in b.model([b.silu("input", "act")]).graph.node]
        ['Sigmoid', 'Mul']
        """
        return self.mul(x, self.unary("Sigmoid", x, f"{name}.sigmoid"), name)

    def hardsigmoid(self, x: str, name: str) -> str:
        """PyTorch's hardsigmoid: ``HardSigmoid(alpha=1/6, beta=0.5)``.

        Examples
        --------
        >>> GraphBuilder("t", 0, 1, 4).hardsigmoid("input", "gate")
        'gate'
        """
        return self.unary("HardSigmoid", x, name, alpha=1.0 / 6.0, beta=0.5)

    def hardswish(self, x: str, name: str) -> str:
        """Hardswish as exported at opset 13: ``Mul(x, HardSigmoid(x))``.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> [n.op_type for n in b.model([b.hardswish("input", "act")]).graph.node]
        ['HardSigmoid', 'Mul']
        """
        return self.mul(x, self.hardsigmoid(x, f"{name}.hardsigmoid"), name)

    def resize(self, x: str, name: str, scale: int) -> str:
        """Bilinear ``Resize`` by an integer ``scale`` (``align_corners``, as PyTorch's
        ``Upsample(mode="bilinear", align_corners=True)`` exports).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.resize("input", "up", 2))
        (1, 3, 8, 8)
        """
        n, c, h, w = self._shapes[x]
        scales = self._const(f"{name}.scales", np.array([1, 1, scale, scale], dtype=np.float32))
        return self._node("Resize", [x, "", scales], name, (n, c, h * scale, w * scale),
                          mode="linear", coordinate_transformation_mode="align_corners")

    def _pool(self, op: str, x: str, name: str, kernel: int, stride: int, padding: int,
              ceil: bool = False, **attrs) -> str:
        n, c, h, w = self._shapes[x]
        size = [(d + 2 * padding - kernel + (stride - 1 if ceil else 0)) // stride + 1
                for d in (h, w)]
        if ceil:  # PyTorch/ONNX: the last window must start inside the (left-padded) input
            size = [s - 1 if (s - 1) * stride >= d + padding else s for s, d in zip(size, (h, w))]
            attrs["ceil_mode"] = 1
        return self._node(op, [x], name, (n, c, *size), kernel_shape=[kernel, kernel],
                          strides=[stride, stride], pads=[padding] * 4, **attrs)

    def max_pool(self, x: str, name: str, kernel: int, stride: int, padding: int = 0,
                 ceil: bool = False) -> str:
        """``MaxPool`` (floor mode unless ``ceil``, symmetric padding).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 8)
        >>> b.shape(b.max_pool("input", "pool", 3, 2, 1))
        (1, 3, 4, 4)
        >>> b.shape(b.max_pool("input", "ceil", 3, 2, ceil=True))
        (1, 3, 4, 4)
        """
        return self._pool("MaxPool", x, name, kernel, stride, padding, ceil)

    def avg_pool(self, x: str, name: str, kernel: int, stride: int, padding: int = 0) -> str:
        """``AveragePool`` with ``count_include_pad=1`` (PyTorch's default).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 8)
        >>> b.shape(b.avg_pool("input", "pool", 2, 2))
        (1, 3, 4, 4)
        """
        return self._pool("AveragePool", x, name, kernel, stride, padding,
                          count_include_pad=1)

    def global_avg_pool(self, x: str, name: str) -> str:
        """``GlobalAveragePool`` to ``[N, C, 1, 1]``.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 8)
        >>> b.shape(b.global_avg_pool("input", "avgpool"))
        (1, 3, 1, 1)
        """
        n, c = self._shapes[x][:2]
        return self._node("GlobalAveragePool", [x], name, (n, c, 1, 1))

    def add(self, a: str, b: str, name: str) -> str:
        """Element-wise ``Add`` of two equal-shape tensors (a residual join).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.add("input", "input", "sum")
        'sum'
        """
        if self._shapes[a] != self._shapes[b]:
            raise ModelError(f"{self.name}: add {name!r}: shapes {self._shapes[a]} and "
                             f"{self._shapes[b]} differ")
        return self._node("Add", [a, b], name, self._shapes[a])

    def concat(self, xs: Sequence[str], name: str, axis: int = 1, output: str | None = None) -> str:
        """``Concat`` along ``axis`` (channels by default).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.concat(["input", "input"], "cat"))
        (1, 6, 4, 4)
        """
        shapes = [self._shapes[x] for x in xs]
        shape = list(shapes[0])
        shape[axis] = sum(s[axis] for s in shapes)
        return self._node("Concat", list(xs), name, tuple(shape), output=output, axis=axis)

    def flatten(self, x: str, name: str) -> str:
        """``Flatten(axis=1)`` to ``[N, C*H*W]``.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.flatten("input", "flatten"))
        (1, 48)
        """
        n, *rest = self._shapes[x]
        return self._node("Flatten", [x], name, (n, math.prod(rest)), axis=1)

    def dense(self, x: str, name: str, out_features: int, gain: float = 1.0,
              output: str | None = None) -> str:
        """Fully connected layer as ``Gemm(x, W, b, transB=1)``, ``W`` is ``[out, in]``.

        The weight's standard deviation is ``gain * sqrt(2 / in)``; the default
        ``gain=1.0`` (He) keeps a classifier's logits of order one.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.dense(b.flatten("input", "flatten"), "fc", 10))
        (1, 10)
        """
        n, k = self._shapes[x]
        weight = self._random((out_features, k), gain * math.sqrt(2.0 / k))
        bias = self._random((out_features,), _BIAS_STD)
        return self._node("Gemm", [x, self._const(f"{name}.weight", weight),
                                   self._const(f"{name}.bias", bias)],
                          name, (n, out_features), output=output, transB=1)

    def transpose(self, x: str, name: str, perm: Sequence[int]) -> str:
        """``Transpose`` with permutation ``perm``.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.transpose("input", "nhwc", [0, 2, 3, 1]))
        (1, 4, 4, 3)
        """
        shape = self._shapes[x]
        return self._node("Transpose", [x], name, tuple(shape[p] for p in perm), perm=list(perm))

    def reshape(self, x: str, name: str, shape: Sequence[int]) -> str:
        """``Reshape`` to a fully static ``shape`` (stored as ``name.shape``).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.reshape("input", "r", [1, 16, 3]))
        (1, 16, 3)
        """
        if math.prod(shape) != math.prod(self._shapes[x]):
            raise ModelError(f"{self.name}: reshape {name!r}: {list(self._shapes[x])} has no "
                             f"view {list(shape)}")
        target = self._const(f"{name}.shape", np.array(shape, dtype=np.int64))
        return self._node("Reshape", [x, target], name, tuple(shape))

    def node(self, op: str, inputs: Sequence[str], name: str, shape: Sequence[int],
             **attrs: Any) -> str:
        """Any one-output ONNX node ``op`` whose output (named ``name``) has static ``shape``;
        for what the named layers do not cover (shape computations, reductions).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.node("Shape", ["input"], "shape", [4]))
        (4,)
        """
        return self._node(op, list(inputs), name, tuple(shape), **attrs)

    def constant(self, name: str, array: np.ndarray) -> str:
        """A ``Constant`` node (as exporters emit for scalars and indices) of value ``array``.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> b.shape(b.constant("two", np.array(2, dtype=np.int64)))
        ()
        """
        return self._node("Constant", [], name, array.shape,
                          value=numpy_helper.from_array(np.asarray(array), name))

    def split(self, x: str, name: str, parts: int, axis: int = 1) -> list[str]:
        """``Split`` into ``parts`` equal chunks (``name.0``, ``name.1``...), sizes as a constant.

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> [b.shape(y) for y in b.split(b.concat(["input", "input"], "cat"), "chunk", 2)]
        [(1, 3, 4, 4), (1, 3, 4, 4)]
        """
        shape = list(self._shapes[x])
        if shape[axis] % parts:
            raise ModelError(f"{self.name}: split {name!r}: {shape[axis]} is not a multiple "
                             f"of {parts}")
        shape[axis] //= parts
        sizes = self._const(f"{name}.split", np.full(parts, shape[axis], dtype=np.int64))
        outputs = [f"{name}.{i}" for i in range(parts)]
        for out in outputs:
            if out in self._shapes:
                raise ModelError(f"{self.name}: tensor {out!r} is produced twice")
            self._shapes[out] = tuple(shape)
        self._nodes.append(helper.make_node("Split", [x, sizes], outputs, name=name, axis=axis))
        return outputs

    # ------------------------------------------------------------------ output
    def model(self, outputs: Sequence[str]) -> onnx.ModelProto:
        """Assemble the ONNX model with graph outputs ``outputs`` (opset 13, IR version 8).

        Examples
        --------
        >>> b = GraphBuilder("t", 0, 1, 4)
        >>> m = b.model([b.relu("input", "output")])
        >>> m.ir_version, m.opset_import[0].version
        (8, 13)
        """
        def info(tensor: str) -> onnx.ValueInfoProto:
            shape = list(self._shapes[tensor])
            return helper.make_tensor_value_info(tensor, TensorProto.FLOAT, shape)

        graph = helper.make_graph(self._nodes, self.name, [info(self.input)],
                                  [info(t) for t in outputs], initializer=self._inits)
        model = helper.make_model(graph, producer_name="graphtune.models",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        return model


def param_count(model: onnx.ModelProto) -> int:
    """Number of learnable parameters: elements of initializers named ``*.weight`` / ``*.bias``.

    Constants that are not parameters (reshape shapes, clip bounds) are not counted.

    Examples
    --------
    >>> b = GraphBuilder("t", 0, 1, 4)
    >>> param_count(b.model([b.conv("input", "conv", 2, kernel=1)]))
    8
    """
    return sum(math.prod(t.dims) for t in model.graph.initializer
               if t.name.endswith((".weight", ".bias")))
