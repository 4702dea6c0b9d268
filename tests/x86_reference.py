"""NumPy references and a build-and-run helper shared by the tests/test_x86_*.py files."""

import numpy as np
import tvm

import graphtune.x86 as x86

TARGET = x86.host_target()


def conv2d_reference(x, w, strides, padding, dilation, groups=1):
    """Direct NCHW/OIHW convolution (any groups), in float64."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, left, bottom, right = padding
    sh, sw = strides
    dh, dw = dilation
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (h + top + bottom - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + left + right - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh, j * dw : j * dw + sw * (ow - 1) + 1 : sw]
            grouped = patch.reshape(n, groups, cg, oh, ow)
            weight = w[:, :, i, j].reshape(groups, o // groups, cg)
            out += np.einsum("ngchw,goc->ngohw", grouped, weight).reshape(n, o, oh, ow)
    return out


def random(shape, rng):
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def run(func, inputs, out_shape, target=TARGET):
    """Build ``func`` for ``target``, run it on ``inputs``; return the output as NumPy."""
    lib = tvm.compile(tvm.IRModule({"main": func}), target=target)
    dev = tvm.cpu(0)
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    out = tvm.runtime.tensor(np.full(out_shape, np.nan, dtype="float32"), dev)
    lib["main"](*args, out)
    return out.numpy()


def conv2d_transpose_reference(x, w, strides, padding, output_padding):
    """ConvTranspose NCHW x IOHW (groups 1, dilation 1) by scattering every tap, in float64."""
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    sh, sw = strides
    top, left, bottom, right = padding
    ph, pw = output_padding
    full = np.zeros((n, o, (h - 1) * sh + kh + ph, (wd - 1) * sw + kw + pw))
    for i in range(kh):
        for j in range(kw):
            contrib = np.einsum("nchw,co->nohw", x.astype("float64"), w[:, :, i, j])
            full[:, :, i : i + sh * (h - 1) + 1 : sh, j : j + sw * (wd - 1) + 1 : sw] += contrib
    return full[:, :, top : full.shape[2] - bottom, left : full.shape[3] - right]
