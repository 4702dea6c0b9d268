"""Models TVM cannot import whole: TVM compiles the part it imports, ONNX Runtime runs the rest.

:func:`graphtune.tune` and :func:`graphtune.compile` partition an ONNX model on their own
when the Relax ONNX frontend rejects a node (``Loop``), gives it a data-dependent shape
(``NonZero``, ``Compress`` and what reads their shapes), or a node reads a non-max
suppression (docs/partition.md):

- :func:`plan` → :class:`Partition`: the largest part, closed under producers, that Relax
  imports with static shapes (the backbone and heads of a detector) and the rest
  (post-processing); ``summary()`` and ``parts()`` say which nodes run where and why.
- ``tune`` tunes the TVM part only and records the partition in the config
  (``model.partition``: the node names of each runtime) with the ONNX Runtime part's
  measured time (``solution.onnxruntime_ms``, in ``predicted_ms``); ``TuneResult.partition``
  keeps it and ``TuneResult.summary()``, ``graphtune show`` and ``graphtune profile`` show it.
- ``compile`` returns a :class:`PartitionedModel` (a
  :class:`~graphtune.compiler.model.CompiledModel`): the TVM part compiled, then an ONNX
  Runtime session of the rest; numpy in, the model's outputs out in its order. A config
  recording another partition is refused, naming the first node placed apart.
- ``PartitionedModel.export_library(path)`` writes one archive; :func:`load`
  (``graphtune.load``) reads it back as a :class:`PartitionedModel`.

Examples
--------
A convolution, then a ``Loop`` Relax does not import:

>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> body = helper.make_graph(
...     [helper.make_node("Add", ["y", "one"], ["y2"]), helper.make_node("Identity", ["c"], ["c2"])],
...     "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
...              helper.make_tensor_value_info("c", TensorProto.BOOL, []),
...              helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
...     [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
...      helper.make_tensor_value_info("y2", TensorProto.FLOAT, [1, 4, 8, 8])],
...     [numpy_helper.from_array(np.float32(1), "one")])
>>> graph = helper.make_graph(
...     [helper.make_node("Conv", ["input", "w"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
...      helper.make_node("Loop", ["trips", "", "conv"], ["output"], name="loop", body=body)],
...     "conv_loop", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
...     [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 8, 8])],
...     [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w"),
...      numpy_helper.from_array(np.int64(2), "trips")])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
>>> part = plan(model)
>>> print(part.summary())
tvm: 1 nodes (Conv 1)
onnxruntime: 1 nodes (Loop 1), reading 1 tensor(s) from tvm (conv)
  cut at 'loop' (Loop): not supported by the Relax ONNX frontend
>>> part.record()
{'tvm_nodes': ['conv'], 'onnxruntime_nodes': ['loop']}
"""

from __future__ import annotations

from .compiler.partitioned import PartitionedModel, load
from .frontend.cut import DATA_DEPENDENT, PARTITION_KEY, Partition, plan

__all__ = ["Partition", "PartitionedModel", "plan", "load", "DATA_DEPENDENT", "PARTITION_KEY"]
