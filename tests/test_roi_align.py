"""ROI align (issue 31, two-stage detectors' box and mask pools): graphtune's kernel vectorised
along channels equals ONNX Runtime's RoiAlign in both coordinate modes, ROIs partly or wholly
outside the map, several images, non-square bins; its feature-map transpose is computed once,
not per sample; the importer shifts ``half_pixel`` ROIs by half a *scaled* pixel; modes it does
not implement stay TVM's and still match."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from tvm import te

import graphtune
from graphtune.config import Config
from graphtune.x86.generic import audit, schedule_generic
from graphtune.x86.roi_align import roi_align_nchw, supported
from x86_reference import run_prim_func

CHANNELS, HEIGHT, WIDTH, SCALE = 24, 9, 11, 0.25


def _rois(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Boxes in image coordinates (4x the map): inside, across the border, wholly outside,
    smaller than a pixel; batch indices 0 and 1."""
    rng = np.random.default_rng(seed)
    corner = rng.uniform(-12, 4 * WIDTH + 4, (count, 2))
    size = rng.uniform(0.1, 30, (count, 2))
    size[::5] = 0.2  # below the minimum ROI size of output_half_pixel
    boxes = np.concatenate([corner, corner + size], axis=1).astype(np.float32)
    return boxes, (np.arange(count) % 2).astype(np.int64)


def _onnxruntime(features, boxes, index, pooled, ratio, mode, coordinates):
    node = helper.make_node("RoiAlign", ["x", "rois", "index"], ["y"], output_height=pooled[0],
                            output_width=pooled[1], sampling_ratio=ratio, spatial_scale=SCALE,
                            mode=mode, coordinate_transformation_mode=coordinates)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, list(features.shape)),
        helper.make_tensor_value_info("rois", TensorProto.FLOAT, list(boxes.shape)),
        helper.make_tensor_value_info("index", TensorProto.INT64, list(index.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": features, "rois": boxes, "index": index})[0]


@pytest.mark.unit
@pytest.mark.parametrize("pooled,ratio", [((7, 7), 2), ((3, 5), 3)])
@pytest.mark.parametrize("coordinates", ["output_half_pixel", "half_pixel"])
def test_the_kernel_equals_onnxruntime(pooled, ratio, coordinates):
    features = np.random.default_rng(1).standard_normal((2, CHANNELS, HEIGHT, WIDTH)).astype(np.float32)
    boxes, index = _rois(30)
    data = te.placeholder(features.shape, name="data")
    rois = te.placeholder((len(boxes), 5), name="rois")
    aligned = coordinates == "half_pixel"
    func, _ = schedule_generic(te.create_prim_func(
        [data, rois, roi_align_nchw(data, rois, pooled, SCALE, ratio, aligned)]))
    # Relax's rois: [batch index, x1, y1, x2, y2]; half_pixel's shift is the importer's
    shifted = boxes - (0.5 / SCALE if aligned else 0.0)
    got = run_prim_func(func, [features, np.concatenate([index[:, None], shifted], 1).astype(np.float32)])
    want = _onnxruntime(features, boxes, index, pooled, ratio, "avg", coordinates)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.unit
def test_the_transposed_map_is_computed_once_and_every_loop_nest_is_scheduled():
    data = te.placeholder((1, 64, 10, 10), name="data")
    rois = te.placeholder((40, 5), name="rois")
    func, kind = schedule_generic(te.create_prim_func([data, rois, roi_align_nchw(data, rois, 7, SCALE, 2)]))
    script = func.script()
    assert audit(func) == [] and kind == "reduction"
    assert "nhwc[v_n, v_h, v_w, v_c] = data[" in script  # its own loop nest, not inlined per tap
    # the taps accumulate whole vectors of channels
    assert re.search(r"T\.vectorized\(\d+\):\s*with T\.sblock\(\"pooled_update\"\)", script)


@pytest.mark.unit
def test_only_average_mode_with_a_fixed_sampling_ratio_is_graphtunes():
    assert supported("NCHW", "avg", 2)
    assert not supported("NCHW", "max", 2) and not supported("NCHW", "avg", 0)
    with pytest.raises(ValueError, match="sample ratio 0"):
        roi_align_nchw(te.placeholder((1, 4, 5, 5)), te.placeholder((3, 5)), 7, 1.0, 0)


def _pool_model(coordinates: str, ratio: int, count: int):
    """Conv 3x3 (3 -> CHANNELS) on two images, then RoiAlign on ``count`` given boxes."""
    rng = np.random.default_rng(2)
    weight = numpy_helper.from_array(rng.standard_normal((CHANNELS, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["image", "w"], ["features"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("RoiAlign", ["features", "rois", "index"], ["pooled"], name="pool",
                              output_height=7, output_width=7, sampling_ratio=ratio,
                              spatial_scale=SCALE, coordinate_transformation_mode=coordinates)]
    graph = helper.make_graph(nodes, "pool", [
        helper.make_tensor_value_info("image", TensorProto.FLOAT, [2, 3, HEIGHT, WIDTH]),
        helper.make_tensor_value_info("rois", TensorProto.FLOAT, [count, 4]),
        helper.make_tensor_value_info("index", TensorProto.INT64, [count])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [count, CHANNELS, 7, 7])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.integration
@pytest.mark.parametrize("coordinates,ratio", [("output_half_pixel", 2), ("half_pixel", 2),
                                               ("output_half_pixel", 0)],
                         ids=["output_half_pixel", "half_pixel", "adaptive_sampling_is_tvms"])
def test_a_compiled_model_pools_as_onnxruntime(coordinates, ratio):
    model = _pool_model(coordinates, ratio, 20)
    compiled = graphtune.compile(model, Config.uniform(model))
    image = np.random.default_rng(4).standard_normal((2, 3, HEIGHT, WIDTH)).astype(np.float32)
    boxes, index = _rois(20, seed=5)
    got = compiled(image, boxes, index)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"image": image, "rois": boxes, "index": index})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
