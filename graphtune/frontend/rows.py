"""Row regions: the parts of a model's ONNX Runtime side that TVM compiles for a fixed row count.

After the cut (:mod:`graphtune.frontend.cut`) everything downstream of a data-dependent op runs
in ONNX Runtime — in a two-stage detector that is the ROI heads: the box head's large dense
layers on every proposal, Mask R-CNN's mask head convs on every detection. Their row count (the
first dimension) depends on the data, but each row is computed from the same row of their inputs
alone. A **row region** is such a connected set of nodes: TVM compiles it for ``rows`` rows,
and a run feeds it the rows it has in chunks of ``rows`` (the last one padded with zeros, the
padding's results dropped), so any count runs, none included.

The rule for a node to join a region (:func:`row_wise`): an op that computes each row of its
outputs from the same row of its one non-constant input (:data:`ROW_OPS`; ``Gemm`` and
``MatMul`` by a constant weight, ``Flatten`` on axis 1, ``Softmax`` on an axis other than 0,
elementwise ops with a constant that does not index rows), and, on a sample run, every tensor it
reads and writes has rank 2 or more and the same first dimension as the region's inputs.
``RoiAlign`` joins too: its output row ``i`` is ROI ``i`` (``rois`` and ``batch_indices``,
rank 1, are row inputs) pooled from a feature map it reads whole (:data:`WHOLE_INPUTS`); a
region passes such an input to every call as it is, so it must be an input of the ONNX Runtime
part with a static shape (a tensor the TVM part hands over). A region holds at least one of
:data:`WORK_OPS` (a lone activation is not worth a call). ONNX Runtime runs the rest in stages
between the regions (:func:`stages`).

Examples
--------
A 1x1 conv and a ReLU on rows whose count depends on the data:

>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> graph = helper.make_graph(
...     [helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
...      helper.make_node("Relu", ["y"], ["z"], name="relu")],
...     "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 2, 2])],
...     [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 8, 2, 2])],
...     [numpy_helper.from_array(np.ones((8, 4, 1, 1), np.float32), "w")])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
>>> [sorted(c) for c in candidates(model)]
[[0, 1]]
>>> region = RowRegion.of(model, [0, 1], {"x": np.ones((11, 4, 2, 2), np.float32),
...                                       "y": np.ones((11, 8, 2, 2), np.float32),
...                                       "z": np.ones((11, 8, 2, 2), np.float32)})
>>> region.nodes, region.inputs, region.outputs, region.rows  # 11 rows on the sample: 16 per call
(['conv', 'relu'], ['x'], ['z'], 16)
>>> [d.dim_value for d in region.static_model().graph.input[0].type.tensor_type.shape.dim]
[16, 4, 2, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import onnx
from onnx import helper

from .fold import names_read, submodel

__all__ = ["RowRegion", "candidates", "row_wise", "row_inputs", "find_regions", "stages",
           "run_rows", "ROW_OPS", "WORK_OPS", "WHOLE_INPUTS", "ROW_MULTIPLE", "ROWS", "ONNXRUNTIME"]

ROW_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Relu", "Sigmoid", "Tanh",
                     "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "Clip", "Identity",
                     "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization",
                     "Flatten", "Softmax", "LogSoftmax", "Add", "Sub", "Mul", "Div", "RoiAlign"})
"""Op types that may compute each output row from the same input row (:func:`row_wise` has
the conditions on their attributes and constant operands)."""

WORK_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "RoiAlign"})
"""A region holds at least one of these (graphtune tunes them or has a kernel for them)."""

WHOLE_INPUTS = {"RoiAlign": frozenset({0})}
"""Op types with inputs every output row reads whole (ROI align's feature map), by position."""

_RANK_ONE_INPUTS = {"RoiAlign": frozenset({2})}
"""Row inputs of rank 1, by position (ROI align's batch indices)."""

ROW_MULTIPLE = 8
"""A region's ``rows`` is the sample run's row count rounded up to a multiple of this (a chunk
of a few more rows costs little, a count just above ``rows`` two calls); a count up to this is
kept as it is (a head after a ``Loop`` on one row), none gives this. A region reading a tensor
whole (ROI align) always rounds up: its rows are the proposals one pyramid level got, which
vary with the image."""

ROWS, ONNXRUNTIME = "rows", "onnxruntime"
"""Kinds of :func:`stages`: a row region TVM runs, or an ONNX Runtime session."""

_ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div"})


def _constant_inputs(node: onnx.NodeProto, constants: Mapping[str, Any]) -> list[int]:
    return [k for k, name in enumerate(node.input) if name in constants]


def row_wise(node: onnx.NodeProto, constants: Mapping[str, Any]) -> bool:
    """True if ``node`` computes each output row from the same row of its one non-constant
    input, by its op type, attributes and which inputs are constants (``constants``: the
    model's initializers by name). Ranks are checked on a sample run (:meth:`RowRegion.of`).

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import helper
    >>> w = {"w": np.ones((4, 8), np.float32)}
    >>> row_wise(helper.make_node("Gemm", ["x", "w"], ["y"], transB=1), w)
    True
    >>> row_wise(helper.make_node("Gemm", ["x", "w"], ["y"], transA=1), w)  # mixes rows
    False
    >>> row_wise(helper.make_node("Softmax", ["x"], ["y"], axis=0), {})
    False
    """
    if node.op_type not in ROW_OPS or len(node.output) != 1:
        return False
    if node.op_type in WHOLE_INPUTS:
        return True
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    variable = [k for k, name in enumerate(node.input) if name and name not in constants]
    if variable != [0]:
        return False
    if node.op_type == "Gemm":
        return attrs.get("transA", 0) == 0
    if node.op_type == "MatMul":
        return np.ndim(constants[node.input[1]]) == 2
    if node.op_type == "Flatten":
        return attrs.get("axis", 1) == 1
    if node.op_type in ("Softmax", "LogSoftmax"):
        return attrs.get("axis", -1) != 0
    if node.op_type in _ELEMENTWISE:
        return True  # the constant's rank is checked against the row tensor's on the sample
    return True


def row_inputs(node: onnx.NodeProto, constants: Mapping[str, Any]) -> list[str]:
    """The inputs of a :func:`row_wise` ``node`` that carry its rows: not constant, not read
    whole (:data:`WHOLE_INPUTS`).

    >>> from onnx import helper
    >>> row_inputs(helper.make_node("RoiAlign", ["features", "rois", "index"], ["y"]), {})
    ['rois', 'index']
    """
    whole = WHOLE_INPUTS.get(node.op_type, frozenset())
    return [name for k, name in enumerate(node.input)
            if name and name not in constants and k not in whole]


def candidates(model: onnx.ModelProto) -> list[set[int]]:
    """Connected sets of :func:`row_wise` nodes of ``model`` holding a :data:`WORK_OPS` node
    (node indices), by structure alone.

    Examples
    --------
    >>> from onnx import helper
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [], [])
    >>> candidates(helper.make_model(graph))
    []
    """
    nodes = list(model.graph.node)
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    rowish = [i for i, n in enumerate(nodes) if row_wise(n, constants)]
    producer = {o: i for i in rowish for o in nodes[i].output}
    links = nx.Graph()
    links.add_nodes_from(rowish)
    links.add_edges_from((producer[name], i) for i in rowish
                         for name in row_inputs(nodes[i], constants) if name in producer)
    return [set(c) for c in nx.connected_components(links)
            if any(nodes[i].op_type in WORK_OPS for i in c)]


@dataclass
class RowRegion:
    """A connected set of row-wise nodes TVM compiles for ``rows`` rows per call.

    Attributes
    ----------
    nodes : list of str
        Node names, in graph order.
    inputs, outputs : list of str
        The tensors it reads (from ONNX Runtime; :attr:`model`'s inputs, in order) and the row
        tensors it writes that are read after it or are model outputs.
    rows : int
        Rows per call.
    model : onnx.ModelProto
        The region as a model whose row inputs' first dimension is symbolic (``rows``); other
        dimensions, whole inputs and every output type as on the sample run.
    whole : list of str
        The inputs passed whole to every call (:data:`WHOLE_INPUTS`), with static shapes.
    """

    nodes: list[str]
    inputs: list[str]
    outputs: list[str]
    rows: int
    model: onnx.ModelProto
    whole: list[str] = field(default_factory=list)

    @property
    def row_inputs(self) -> list[str]:
        """The inputs a run feeds in chunks of :attr:`rows` rows."""
        return [name for name in self.inputs if name not in self.whole]

    @classmethod
    def of(cls, model: onnx.ModelProto, indices: Sequence[int] | set[int],
           sample: Mapping[str, np.ndarray], rows: int | None = None) -> RowRegion:
        """The region of the nodes ``indices`` of ``model``, checked and typed on ``sample``
        (every tensor the region reads or writes, by name, from one run), ``rows`` per call
        (default: the sample's row count rounded up to :data:`ROW_MULTIPLE`, see there).

        Raises
        ------
        ValueError
            A tensor of rank below 2 (but ROI align's batch indices), first dimensions that
            differ, an elementwise constant that indexes rows, or a tensor read whole that is
            not an input of ``model`` with a static shape: the nodes are not one row region.
        """
        keep = sorted(indices)
        nodes = [model.graph.node[i] for i in keep]
        made = {o for n in nodes for o in n.output}
        constants = {t.name: t for t in model.graph.initializer}
        inputs = list(dict.fromkeys(name for n in nodes for name in n.input
                                    if name and name not in made and name not in constants))
        rowed = {name for n in nodes for name in row_inputs(n, constants)}
        whole = [name for name in inputs if name not in rowed]
        declared = {v.name: [d.dim_value if d.HasField("dim_value") else None
                             for d in v.type.tensor_type.shape.dim] for v in model.graph.input}
        for name in whole:
            if declared.get(name) != list(sample[name].shape):
                raise ValueError(f"{name!r} is read whole but is not an input of static shape")
        others = [n for i, n in enumerate(model.graph.node) if i not in set(keep)]
        read_after = set().union(*(names_read(n) for n in others)) if others else set()
        graph_outputs = {o.name for o in model.graph.output}
        outputs = [o for n in nodes for o in n.output if o in read_after or o in graph_outputs]
        rank_one = {n.input[k] for n in nodes for k in _RANK_ONE_INPUTS.get(n.op_type, ())
                    if k < len(n.input)}
        counts = set()
        for name in [i for i in inputs if i in rowed] + [o for n in nodes for o in n.output]:
            value = sample[name]
            if value.ndim < (1 if name in rank_one else 2):
                raise ValueError(f"{name!r} has rank {value.ndim}: a row region's tensors have rank >= 2")
            counts.add(value.shape[0])
        if len(counts) != 1:
            raise ValueError(f"the region's tensors have first dimensions {sorted(counts)}")
        for n in nodes:
            for name in n.input[1:]:
                if n.op_type in _ELEMENTWISE and name in constants:
                    shape = list(constants[name].dims)
                    rank = sample[n.input[0]].ndim
                    if len(shape) == rank and shape[0] != 1:
                        raise ValueError(f"{n.name!r}: its constant {name!r} indexes rows")
        (count,) = counts
        rows = rows or (count if 0 < count <= ROW_MULTIPLE and not whole else
                        max(ROW_MULTIPLE, -(-count // ROW_MULTIPLE) * ROW_MULTIPLE))

        def typed(name: str) -> onnx.ValueInfoProto:
            value = sample[name]
            shape = list(value.shape) if name in whole else ["rows"] + list(value.shape[1:])
            return helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), shape)

        sub = submodel(model, keep, [typed(name) for name in inputs],
                       [typed(name) for name in outputs], model.graph.name + ".rows")
        return cls([n.name for n in nodes], inputs, outputs, rows, sub, whole)

    def input_shapes(self) -> dict[str, list[int]]:
        """Static shapes of the inputs of :meth:`static_model`, by name."""
        return {v.name: [self.rows if k == 0 and v.name not in self.whole else d.dim_value
                         for k, d in enumerate(v.type.tensor_type.shape.dim)]
                for v in self.model.graph.input}

    def static_model(self) -> onnx.ModelProto:
        """:attr:`model` with the first dimension of every row input and output ``rows`` (what
        TVM compiles and graphtune tunes)."""
        static = onnx.ModelProto()
        static.CopyFrom(self.model)
        for value in list(static.graph.input) + list(static.graph.output):
            if value.name not in self.whole:
                value.type.tensor_type.shape.dim[0].dim_value = self.rows
        return static

    def record(self) -> dict[str, Any]:
        """What a config keeps of the region: its nodes and rows per call."""
        return {"nodes": list(self.nodes), "rows": self.rows}


def run_rows(call: Callable[..., Any], region: RowRegion,
             values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The region's outputs on the rows of ``values`` (its inputs by name): ``call`` (the
    compiled region: its inputs in order, row inputs of ``rows`` rows, its outputs out) on
    chunks of ``rows`` rows, the last padded with zeros and the padding's rows dropped, the
    inputs read whole passed to every call as they are (numpy arrays or tensors ``call``
    takes); no call for no rows.

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 2])])
    >>> region = RowRegion(["relu"], ["x"], ["y"], 4, helper.make_model(g))
    >>> x = np.arange(-10, 10, dtype=np.float32).reshape(10, 2)
    >>> calls = []
    >>> def relu(a):
    ...     calls.append(a.shape[0]); return np.maximum(a, 0)
    >>> y = run_rows(relu, region, {"x": x})["y"]
    >>> calls, y.shape, bool((y == np.maximum(x, 0)).all())
    ([4, 4, 4], (10, 2), True)
    >>> run_rows(relu, region, {"x": x[:0]})["y"].shape
    (0, 2)
    """
    rowed = [name not in region.whole for name in region.inputs]
    arrays = [np.asarray(values[name]) if r else values[name] for name, r in zip(region.inputs, rowed)]
    count = next(a for a, r in zip(arrays, rowed) if r).shape[0]
    chunks: list[list[np.ndarray]] = [[] for _ in region.outputs]

    def chunk(array: np.ndarray, start: int, taken: int) -> np.ndarray:
        part = array[start:start + taken]
        if taken == region.rows:
            return np.ascontiguousarray(part)
        padded = _aligned_zeros((region.rows,) + part.shape[1:], part.dtype)
        padded[:taken] = part
        return padded

    for start in range(0, count, region.rows):
        taken = min(region.rows, count - start)
        got = call(*[chunk(a, start, taken) if r else a for a, r in zip(arrays, rowed)])
        for k, array in enumerate(got if isinstance(got, (list, tuple)) else [got]):
            chunks[k].append(np.asarray(array)[:taken])
    found = {}
    for name, parts in zip(region.outputs, chunks):
        if not parts:
            value = next(v for v in region.model.graph.output if v.name == name)
            shape = [0] + [d.dim_value for d in value.type.tensor_type.shape.dim[1:]]
            dtype = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
            found[name] = np.zeros(shape, dtype)
        else:
            found[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return found


def _aligned_zeros(shape: tuple[int, ...], dtype: np.dtype, alignment: int = 64) -> np.ndarray:
    """Zeros whose data starts at a multiple of ``alignment`` bytes (TVM takes such an array
    without copying it, :func:`graphtune.compiler.model.device_tensor`)."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(size + alignment, np.uint8)
    offset = -raw.ctypes.data % alignment
    return raw[offset:offset + size].view(dtype).reshape(shape)


def find_regions(model: onnx.ModelProto, sample: Callable[[list[str]], Mapping[str, np.ndarray]],
                 rows: Mapping[str, int] | None = None) -> list[RowRegion]:
    """The row regions of ``model`` (the ONNX Runtime part), in graph order.

    ``sample(names)`` runs the model once and returns those tensors; it is called only when
    :func:`candidates` finds any. ``rows`` maps the first node of each region to keep to its
    rows per call (a config's record: other candidates stay in ONNX Runtime); None keeps
    every region, :meth:`RowRegion.of` choosing its rows. Candidates the sample shows are not
    row regions, or that would make ONNX Runtime's side cyclic (a region reading what a node
    after it computes), are left to ONNX Runtime.
    """
    found = [c for c in candidates(model) if rows is None or model.graph.node[min(c)].name in rows]
    if not found:
        return []
    nodes = model.graph.node
    names = sorted({name for c in found for i in c for name in
                    list(nodes[i].input) + list(nodes[i].output) if name})
    initializers = {t.name for t in model.graph.initializer}
    values = sample([n for n in names if n not in initializers])
    regions = []
    for group in sorted(found, key=min):
        first = nodes[min(group)].name
        try:
            regions.append(RowRegion.of(model, group, values, None if rows is None else rows[first]))
        except ValueError:
            continue
    while regions and _levels(model, regions) is None:
        regions.pop()
    return regions


def _levels(model: onnx.ModelProto, regions: Sequence[RowRegion]
            ) -> tuple[dict[int, int], list[int]] | None:
    """The stage of each ONNX Runtime node (by index) and of each region, or None if the
    regions make the graph of nodes and regions cyclic. A node after a region runs in a later
    stage."""
    nodes = model.graph.node
    owner = {name: r for r, region in enumerate(regions) for name in region.nodes}
    unit = [("r", owner[n.name]) if n.name in owner else ("n", i) for i, n in enumerate(nodes)]
    producer = {o: unit[i] for i, n in enumerate(nodes) for o in n.output}
    graph = nx.DiGraph()
    graph.add_nodes_from(unit)
    for i, n in enumerate(nodes):
        for name in names_read(n):
            if name in producer and producer[name] != unit[i]:
                graph.add_edge(producer[name], unit[i])
    if not nx.is_directed_acyclic_graph(graph):
        return None
    level: dict[Any, int] = {}
    for u in nx.topological_sort(graph):
        level[u] = max((level[p] + (p[0] == "r") for p in graph.predecessors(u)), default=0)
    return ({i: level[u] for i, u in enumerate(unit) if u[0] == "n"},
            [level[("r", r)] for r in range(len(regions))])


def stages(model: onnx.ModelProto, regions: Sequence[RowRegion],
           dtypes: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """How ONNX Runtime's side runs: ``(ONNXRUNTIME, model)`` sessions and ``(ROWS, index)``
    regions in order, each reading the model's inputs and what earlier steps computed.

    ``dtypes`` gives the numpy dtype of the tensors that cross between steps. Without regions
    the one step is ``model`` itself.
    """
    if not regions:
        return [(ONNXRUNTIME, model)]
    levels = _levels(model, regions)
    if levels is None:
        raise ValueError("the row regions make the ONNX Runtime part cyclic")
    node_level, region_level = levels
    nodes = model.graph.node
    top = max(list(node_level.values()) + region_level, default=0)
    later_reads: list[set[str]] = [set() for _ in range(top + 2)]  # names read at or after each level
    for i, n in enumerate(nodes):
        if i in node_level:
            later_reads[node_level[i]] |= names_read(n)
    for r, region in enumerate(regions):
        later_reads[region_level[r] + 1] |= set(region.inputs)  # after the level's session
    for k in range(top, -1, -1):
        later_reads[k] |= later_reads[k + 1]
    graph_outputs = [o.name for o in model.graph.output]
    initializers = {t.name for t in model.graph.initializer}
    known = {v.name for v in model.graph.input} | {o for n in nodes for o in n.output}
    steps: list[tuple[str, Any]] = []
    for k in range(top + 1):
        keep = [i for i in range(len(nodes)) if node_level.get(i) == k]
        if keep:
            made = [o for i in keep for o in nodes[i].output if o]
            reads = set().union(*(names_read(nodes[i]) for i in keep))
            ins = [name for name in dict.fromkeys(sorted(reads))  # not a subgraph's own names
                   if name in known and name not in set(made) and name not in initializers]
            wanted = later_reads[k + 1] | set(graph_outputs)
            outs = [o for o in made if o in wanted]
            steps.append((ONNXRUNTIME, _stage_model(model, keep, ins, outs, dtypes, k)))
        steps += [(ROWS, r) for r in range(len(regions)) if region_level[r] == k]
    return steps


def _stage_model(model: onnx.ModelProto, keep: list[int], inputs: list[str], outputs: list[str],
                 dtypes: Mapping[str, Any], level: int) -> onnx.ModelProto:
    """The nodes ``keep`` of ``model`` as a session model reading ``inputs`` (typed by
    ``dtypes``, shapes left open) and writing ``outputs``."""
    declared = {v.name: v for v in list(model.graph.input) + list(model.graph.output)}
    ins = [declared[name] if name in declared else
           helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtypes[name])),
                                         None) for name in inputs]
    outs = [declared[name] if name in declared else helper.make_empty_tensor_value_info(name)
            for name in outputs]
    return submodel(model, keep, ins, outs, f"{model.graph.name}.stage{level}")
