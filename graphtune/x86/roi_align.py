"""ROI align (average mode, fixed sampling ratio) vectorised along channels.

TVM's ROI align computes every output element ``(roi, c, ph, pw)`` on its own: the sample
positions and bilinear weights once per channel, and four neighbours read from ``NCHW``
data, each a scalar load, none of it vectorised. The positions and weights do not depend on the
channel, and they are separable: sample ``(iy, ix)`` of bin ``(ph, pw)`` reads rows
``y_low, y_high`` and columns ``x_low, x_high`` with weight ``wy * wx``. So:

1. per ROI, bin and sample, the two source rows and their weights (``(R, P, 2 S)`` int and
   float tables), likewise the columns — a few thousand numbers;
2. the feature map transposed to ``NHWC`` once (channels contiguous);
3. ``pooled[r, ph, pw, c] = sum over the 2S x 2S taps of wy * wx * data[row, column, c]``:
   every tap one vector load and one FMA per 16 channels;
4. the result transposed back to ``(R, C, P, P)``.

ONNX Runtime's rule is kept exactly: a sample outside ``[-1, size]`` on either axis adds
nothing, coordinates below 0 clamp to 0, a low index at ``size - 1`` reads that edge twice, the
sum is divided by the sample count; ``aligned`` drops the minimum ROI size of 1 (as TVM's
``aligned``: the half-pixel shift of ONNX's ``half_pixel`` mode is in the ROIs the importer
passes, :func:`graphtune.frontend.importer.roi_align_half_pixel`). Adaptive sampling (a ratio
of 0: the sample count depends on the ROI) stays TVM's.

Examples
--------
>>> from tvm import te
>>> data = te.placeholder((1, 32, 10, 10), name="data")
>>> rois = te.placeholder((6, 5), name="rois")   # [batch index, x1, y1, x2, y2]
>>> out = roi_align_nchw(data, rois, (7, 7), 0.25, 2)
>>> [int(d) for d in out.shape]
[6, 32, 7, 7]
"""

from __future__ import annotations

from typing import Sequence

from tvm import te, tirx

__all__ = ["supported", "roi_align_nchw"]


def supported(layout: str, mode: str, sample_ratio: int) -> bool:
    """True if :func:`roi_align_nchw` implements ROI align with these attributes.

    >>> supported("NCHW", "avg", 2), supported("NCHW", "max", 2), supported("NCHW", "avg", 0)
    (True, False, False)
    """
    return layout == "NCHW" and mode == "avg" and sample_ratio > 0


def _f(value: float) -> tirx.PrimExpr:
    return tirx.const(value, "float32")


def _axis(rois: te.Tensor, start_column: int, pooled: int, size: int, scale: float,
          samples: int, aligned: bool, name: str) -> tuple[te.Tensor, te.Tensor]:
    """Source indices and weights along one axis: ``(R, pooled, 2 * samples)`` tables, entry
    ``2 * i + t`` the low (``t = 0``) or high neighbour of sample ``i``, its weight carrying the
    ``1 / samples`` share of the average and zero for a sample outside the map."""
    def coordinate(r, p, k):
        start = rois[r, start_column] * _f(scale)
        length = rois[r, start_column + 2] * _f(scale) - start
        if not aligned:
            length = te.max(length, _f(1.0))
        bin_size = length / _f(pooled)
        offset = (tirx.Cast("float32", k // 2) + _f(0.5)) * bin_size / _f(samples)
        return start + tirx.Cast("float32", p) * bin_size + offset

    def low(value):
        return tirx.Cast("int32", te.max(value, _f(0.0)))

    def index(r, p, k):
        return te.min(low(coordinate(r, p, k)) + k % 2, size - 1)

    def weight(r, p, k):
        value = coordinate(r, p, k)
        clamped = te.max(value, _f(0.0))
        fraction = tirx.if_then_else(low(value) >= size - 1, _f(0.0),
                                     clamped - tirx.Cast("float32", low(value)))
        share = tirx.if_then_else(k % 2 == 0, _f(1.0) - fraction, fraction) / _f(samples)
        inside = tirx.all(value >= _f(-1.0), value <= _f(float(size)))
        return tirx.if_then_else(inside, share, _f(0.0))

    shape = (rois.shape[0], pooled, 2 * samples)
    return (te.compute(shape, index, name=f"{name}_index"),
            te.compute(shape, weight, name=f"{name}_weight"))


def roi_align_nchw(data: te.Tensor, rois: te.Tensor, pooled_size: Sequence[int] | int,
                   spatial_scale: float, sample_ratio: int, aligned: bool = False) -> te.Tensor:
    """ROI align in average mode: ``data`` ``(N, C, H, W)``, ``rois`` ``(R, 5)`` rows of
    ``[batch index, x1, y1, x2, y2]`` (as Relax's ``roi_align`` takes them), output
    ``(R, C, ph, pw)``; ``sample_ratio`` samples per bin along each axis (> 0).

    Raises
    ------
    ValueError
        A ``sample_ratio`` below 1 (adaptive sampling, see :func:`supported`).
    """
    if sample_ratio < 1:
        raise ValueError(f"sample ratio {sample_ratio}: only a fixed ratio (>= 1) is vectorised")
    pooled_h, pooled_w = (pooled_size, pooled_size) if isinstance(pooled_size, int) \
        else (int(pooled_size[0]), int(pooled_size[1]))
    batch, channels, height, width = (int(d) for d in data.shape)
    count = rois.shape[0]
    rows, row_weights = _axis(rois, 2, pooled_h, height, spatial_scale, sample_ratio, aligned, "rows")
    columns, column_weights = _axis(rois, 1, pooled_w, width, spatial_scale, sample_ratio,
                                    aligned, "columns")
    nhwc = te.compute((batch, height, width, channels), lambda n, h, w, c: data[n, c, h, w],
                      name="nhwc")
    ky = te.reduce_axis((0, 2 * sample_ratio), "ky")
    kx = te.reduce_axis((0, 2 * sample_ratio), "kx")
    pooled = te.compute(
        (count, pooled_h, pooled_w, channels),
        lambda r, ph, pw, c: te.sum(
            row_weights[r, ph, ky] * column_weights[r, pw, kx]
            * nhwc[tirx.Cast("int32", rois[r, 0]), rows[r, ph, ky], columns[r, pw, kx], c],
            axis=[ky, kx]),
        name="pooled")
    return te.compute((count, channels, pooled_h, pooled_w),
                      lambda r, c, ph, pw: pooled[r, ph, pw, c], name="roi_align")
