"""Keep a row region in TVM only where it runs faster there than in ONNX Runtime.

A row region (:mod:`graphtune.frontend.rows`) is one more call between ONNX Runtime's stages:
a head of a few microseconds of work costs more in calls (padding, a TVM call, one more ONNX
Runtime session) than TVM saves on it. :func:`check_regions` compiles each region with the
tuned config and times it against ONNX Runtime running the same nodes, on the rows a run of
the model hands it (the run :func:`graphtune.frontend.cut.plan` sampled, kept in
``Partition.region_inputs``), interleaved
(:func:`graphtune.latency.interleaved`); :func:`graphtune.tune` leaves to ONNX Runtime every
region whose median there is lower (:meth:`graphtune.frontend.cut.Partition.drop_regions`).

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> from graphtune.config import Config
>>> from graphtune.frontend.cut import plan
>>> graph = helper.make_graph(
...     [helper.make_node("Relu", ["x"], ["r"]),
...      helper.make_node("ReduceMax", ["r"], ["m"], axes=[1], keepdims=0),
...      helper.make_node("NonZero", ["m"], ["i2"]), helper.make_node("Squeeze", ["i2", "ax"], ["i"]),
...      helper.make_node("Gather", ["r", "i"], ["rows"], axis=0),
...      helper.make_node("Gemm", ["rows", "w"], ["y"], name="fc", transB=1)],
...     "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 4])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
...     [numpy_helper.from_array(np.ones((4, 4), np.float32), "w"),
...      numpy_helper.from_array(np.array([0], np.int64), "ax")])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
>>> part = plan(model)
>>> [t.nodes for t in check_regions(part, Config.uniform(model), rounds=3)]
[['fc']]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .compiler.driver import compile as gt_compile
from .compiler.partitioned import region_feeds
from .config import Config
from .frontend.cut import Partition, onnxruntime_session, sample
from .frontend.rows import run_rows
from .latency import interleaved

__all__ = ["RegionTiming", "check_regions", "ROUNDS"]

ROUNDS = 10
"""Interleaved rounds per region (medians of these)."""


@dataclass
class RegionTiming:
    """One region's medians (ms) in TVM (compiled with the config, in chunks of its rows) and
    in ONNX Runtime, on the rows of one run of the model."""

    nodes: list[str]
    rows: int
    sample_rows: int
    tvm_ms: float
    onnxruntime_ms: float

    @property
    def faster_in_tvm(self) -> bool:
        """True if TVM's median is the lower."""
        return self.tvm_ms < self.onnxruntime_ms

    def describe(self) -> str:
        """One line: where the region runs faster, by how much."""
        where = "tvm" if self.faster_in_tvm else "onnxruntime"
        return (f"row region {self.nodes[0]!r} ({len(self.nodes)} nodes, {self.sample_rows} rows "
                f"in {self.rows}-row calls): tvm {self.tvm_ms:.3f} ms, onnxruntime "
                f"{self.onnxruntime_ms:.3f} ms -> {where}")


def check_regions(partition: Partition, config: Config, target: Any = None,
                  rounds: int = ROUNDS) -> list[RegionTiming]:
    """Time each of ``partition``'s row regions in TVM (compiled with ``config``) and in ONNX
    Runtime, interleaved, on the rows one run of the model hands it (module docstring)."""
    if not partition.regions:
        return []
    names = sorted({n for r in partition.regions for n in r.inputs})
    values = (partition.region_inputs if set(names) <= set(partition.region_inputs)
              else sample(partition, names))  # plan's sample run, else one more
    found = []
    for k, region in enumerate(partition.regions):
        compiled = gt_compile(region.static_model(), partition.region_config(config, k), target)
        session = onnxruntime_session(region.model)
        feeds = {name: values[name] for name in region.inputs}
        calls = {"tvm": functools.partial(run_rows, compiled.views, region, region_feeds(region, feeds)),
                 "onnxruntime": functools.partial(session.run, None, feeds)}
        medians = {name: float(np.median(times))
                   for name, times in interleaved(calls, repeat=rounds).items()}
        found.append(RegionTiming(list(region.nodes), region.rows,
                                  int(np.shape(feeds[region.row_inputs[0]])[0]),
                                  medians["tvm"], medians["onnxruntime"]))
    return found
