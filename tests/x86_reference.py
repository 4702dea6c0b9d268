"""NumPy references, knob grids and build-and-run helpers shared by the kernel and schedule tests."""

import itertools

import numpy as np
import pytest
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
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            patch = xp[:, :, rows, cols]
            grouped = patch.reshape(n, groups, cg, oh, ow)
            weight = w[:, :, i, j].reshape(groups, o // groups, cg)
            out += np.einsum("ngchw,goc->ngohw", grouped, weight).reshape(n, o, oh, ow)
    return out


def grid(knob_grid: dict) -> list:
    """Every combination of the knob values of ``knob_grid`` (knob: list of values)."""
    names = list(knob_grid)
    return [dict(zip(names, values)) for values in itertools.product(*knob_grid.values())]


def cases(table: dict) -> list:
    """One ``pytest.param(name, knobs)`` per case of ``table`` (name: (workload, knob grid)) and knobs."""
    return [
        pytest.param(name, knobs, id=f"{name}-" + "-".join(f"{k}{v}" for k, v in knobs.items()))
        for name, (_, knob_grid) in table.items()
        for knobs in grid(knob_grid)
    ]


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


def run_prim_func(func, inputs: list) -> np.ndarray:
    """Build ``func`` for the host, run it on ``inputs`` (numpy arrays); its last parameter."""
    lib = tvm.compile(func.with_attr("global_symbol", "main"), target=TARGET).jit()
    out_shape = [int(d) for d in func.params[-1].shape]
    out = tvm.runtime.tensor(np.zeros(out_shape, "float32"), tvm.cpu(0))
    lib["main"](*[tvm.runtime.tensor(a, tvm.cpu(0)) for a in inputs], out)
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
