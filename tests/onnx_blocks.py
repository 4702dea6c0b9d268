"""Small ONNX models (onnx.helper) of decoder, dilated-head and token-MLP blocks for the tests."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def onnx_model(nodes: list, inits: list, name: str, input_shape, output: str = "output",
               output_shape=None, opset: int = 13) -> onnx.ModelProto:
    """A one-input ONNX model (``input``, fp32) of ``nodes``, in an IR version ONNX Runtime reads."""
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, output_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


class Builder:
    """Grows an ONNX graph node by node with seeded random weights."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def const(self, name: str, shape, scale: float = 0.2) -> str:
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list, name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, name, src, cin, cout, k=(3, 3), pads=None, group=1, op="Conv", **attrs) -> str:
        kh, kw = k
        shape = (cin, cout // group, kh, kw) if op == "ConvTranspose" else (cout, cin // group, kh, kw)
        pads = [kh // 2, kw // 2] * 2 if pads is None else pads
        self.const(name + ".w", shape)
        self.const(name + ".b", (cout,))
        return self.node(op, [src, name + ".w", name + ".b"], name, kernel_shape=[kh, kw], pads=pads,
                         group=group, **attrs)

    def model(self, name: str, shape: list, out: str, opset: int = 13) -> onnx.ModelProto:
        return onnx_model(self.nodes, self.inits, name, shape, out, opset=opset)


def unet_decoder(kernel: int = 2, pads: int = 0, output_padding: int = 0) -> onnx.ModelProto:
    """conv -> strided conv -> ConvTranspose stride 2 -> concat skip -> conv (16x16 out)."""
    b = Builder(1)
    enc = b.node("Relu", [b.conv("enc", "input", 8, 16)], "enc.relu")
    down = b.node("Relu", [b.conv("down", enc, 16, 32, strides=[2, 2])], "down.relu")
    up = b.conv("up", down, 32, 16, k=(kernel, kernel), pads=[pads] * 4, op="ConvTranspose",
                strides=[2, 2], output_padding=[output_padding] * 2)
    cat = b.node("Concat", [b.node("Relu", [up], "up.relu"), enc], "cat", axis=1)
    return b.model("unet_decoder", [1, 8, 16, 16], b.conv("head", cat, 32, 8))


def dilated_head() -> onnx.ModelProto:
    """DeepLab-style head: dilated 3x3s, asymmetric padding, 1x7 / 7x1, a dilated depthwise conv."""
    b = Builder(2)
    x = b.node("Relu", [b.conv("stem", "input", 8, 16)], "stem.relu")
    d2 = b.conv("aspp_d2", x, 16, 16, pads=[2, 2, 2, 2], dilations=[2, 2])
    d3 = b.conv("aspp_d3", x, 16, 16, pads=[3, 3, 3, 3], dilations=[3, 3])
    asym = b.conv("asym", x, 16, 16, k=(3, 3), pads=[0, 1, 2, 1])
    row = b.conv("row_1x7", x, 16, 16, k=(1, 7), pads=[0, 3, 0, 3])
    col = b.conv("col_7x1", row, 16, 16, k=(7, 1), pads=[3, 0, 3, 0])
    dw = b.conv("dw_d2", x, 16, 16, pads=[2, 2, 2, 2], dilations=[2, 2], group=16)
    cat = b.node("Concat", [d2, d3, asym, col, dw], "aspp_cat", axis=1)
    proj = b.conv("proj", b.node("Relu", [cat], "cat.relu"), 80, 8, k=(1, 1))
    return b.model("dilated_head", [1, 8, 12, 12], proj)


def token_mlp(act: str = "Relu") -> onnx.ModelProto:
    """conv -> Transpose to NHWC -> MatMul+bias -> act -> MatMul+bias -> Transpose back -> + skip; a
    3-D token MatMul and a Gemm head."""
    b = Builder(3)
    x = b.conv("stem", "input", 8, 16, k=(1, 1))
    nhwc = b.node("Transpose", [x], "to_nhwc", perm=[0, 2, 3, 1])
    h = b.node("MatMul", [nhwc, b.const("fc1.w", (16, 64))], "fc1")
    h = b.node("Add", [h, b.const("fc1.b", (64,))], "fc1.add")
    if act == "Gelu":  # x * 0.5 * (1 + erf(x / sqrt 2)), the opset-13 spelling of Gelu
        half = b.node("Mul", [h, b.const("half", (), 0.0)], "gelu.half")
        b.inits[-1] = numpy_helper.from_array(np.array(0.5, np.float32), "half")
        scaled = b.node("Mul", [h, b.const("rsqrt2", (), 0.0)], "gelu.scaled")
        b.inits[-1] = numpy_helper.from_array(np.array(1 / np.sqrt(2), np.float32), "rsqrt2")
        b.inits.append(numpy_helper.from_array(np.array(1.0, np.float32), "one"))
        erf_1p = b.node("Add", [b.node("Erf", [scaled], "gelu.erf"), "one"], "gelu.1p")
        h = b.node("Mul", [half, erf_1p], "gelu")
    else:
        h = b.node(act, [h], "act")
    h = b.node("MatMul", [h, b.const("fc2.w", (64, 16))], "fc2")
    h = b.node("Add", [h, b.const("fc2.b", (16,))], "fc2.add")
    back = b.node("Transpose", [h], "to_nchw", perm=[0, 3, 1, 2])
    y = b.node("Add", [back, x], "residual")
    tokens = b.node("Reshape", [y, b.const("tok.shape", (3,))], "tokens")
    b.inits[-1] = numpy_helper.from_array(np.array([1, 16, 49], np.int64), "tok.shape")
    mixed = b.node("MatMul", [tokens, b.const("mix.w", (49, 24))], "token_mix")
    flat = b.node("Flatten", [mixed], "flat", axis=1)
    head = b.node("Gemm", [flat, b.const("head.w", (10, 384)), b.const("head.b", (10,))], "head",
                  transB=1)
    return b.model("token_mlp", [1, 8, 7, 7], head)


def _scalar(b: Builder, name: str, value: float) -> str:
    b.inits.append(numpy_helper.from_array(np.array(value, np.float32), name))
    return name


# layout-agnostic op chains between two convs: name -> (opset, chain builder on x)
CHAINS = {
    "erf": (13, lambda b, x: b.node("Erf", [x], "erf")),
    "abs_sqrt": (13, lambda b, x: b.node("Sqrt", [b.node("Abs", [x], "abs")], "sqrt")),
    "square": (13, lambda b, x: b.node("Mul", [x, x], "square")),
    "pow_scalar": (13, lambda b, x: b.node("Pow", [x, _scalar(b, "two", 2.0)], "pow")),
    "pow_per_channel": (13, lambda b, x: b.node(
        "Pow", [b.node("Sigmoid", [x], "sig"), b.const("exponent", (16, 1, 1), 1.0)], "pow")),
    "reciprocal": (13, lambda b, x: b.node("Reciprocal", [b.node("Sigmoid", [x], "sig")], "recip")),
    "log": (13, lambda b, x: b.node("Log", [b.node("Sigmoid", [x], "sig")], "log")),
    "gelu_tanh": (20, lambda b, x: b.node("Gelu", [x], "gelu", approximate="tanh")),
    "hardswish": (14, lambda b, x: b.node("HardSwish", [x], "hswish")),
    "x_times_mean": (13, lambda b, x: b.node(
        "Mul", [x, b.node("ReduceMean", [x], "mean", axes=[2, 3], keepdims=1)], "gate")),
}


def elementwise_chain(kind: str) -> onnx.ModelProto:
    """conv (8 -> 16) -> the chain ``CHAINS[kind]`` -> conv (16 -> 16): the chain runs in the
    blocked layout between the convs."""
    opset, chain = CHAINS[kind]
    b = Builder(4)
    x = b.conv("a", "input", 8, 16)
    return b.model(f"chain_{kind}", [1, 8, 8, 8], b.conv("b", chain(b, x), 16, 16), opset=opset)


def squeeze_excite() -> onnx.ModelProto:
    """conv -> SE (GlobalAveragePool -> conv -> Relu -> conv -> HardSigmoid) gating mul -> conv."""
    b = Builder(5)
    x = b.node("Relu", [b.conv("stem", "input", 8, 32)], "stem.relu")
    s = b.node("GlobalAveragePool", [x], "se.pool")
    s = b.node("Relu", [b.conv("se.fc1", s, 32, 8, k=(1, 1))], "se.relu")
    s = b.node("HardSigmoid", [b.conv("se.fc2", s, 8, 32, k=(1, 1))], "se.gate", alpha=1 / 6, beta=0.5)
    y = b.node("Mul", [x, s], "se.mul")
    return b.model("squeeze_excite", [1, 8, 8, 8], b.conv("proj", y, 32, 16, k=(1, 1)))


def shared_producer_joins() -> onnx.ModelProto:
    """Two joins reading the same two convs (an Add and a Mul of a and b), joined again."""
    b = Builder(6)
    a = b.conv("a", "input", 8, 16)
    c = b.conv("c", "input", 8, 16)
    y = b.node("Add", [b.node("Add", [a, c], "sum"), b.node("Mul", [a, c], "prod")], "both")
    return b.model("shared_producer_joins", [1, 8, 8, 8], b.conv("head", y, 16, 8))
