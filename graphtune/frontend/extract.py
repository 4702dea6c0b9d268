"""Extract the layout graph of a model: which layouts each op may take, and what edges cost.

:func:`extract` walks ``main`` once (:func:`graphtune.frontend.walk`) and
follows every tensor back to the graph node whose layout it carries:

- a ``layout`` binding (conv2d, depthwise or group conv2d, conv2d_transpose, dense) becomes a node with
  the candidates the caller's generator gives its workload (graphtune.x86's
  through :func:`graphtune.extract`; cost NaN: measured later) and an edge
  from the producer of its data input;
- ``pass`` bindings (relu, bias add, pools...) forward their input's producer;
- a ``join`` (residual add, channel concat) becomes a ``join`` node with an
  edge from each input's producer; its candidates are ``NCHW`` plus every
  layout its producers can emit, kept only when the block divides every
  input's channels; cost 0;
- a ``fixed`` binding reading a tensor of free layout becomes a ``boundary``
  (single candidate, ``NCHW``; ``NC`` for 2-D tensors) with an edge from that
  producer; fixed ops reading fixed tensors add nothing (their layouts are
  already plain). Graph inputs and outputs are boundaries too.

Every edge carries the logical shape of the tensor as its consumer reads it
(after pass-through ops): that tensor is the one a layout transform would
convert. Edge cost matrices are left to the pipeline.

Examples
--------
>>> from graphtune import models
>>> from graphtune.graph import Candidate
>>> one_nchw = lambda workload, op: [Candidate({}, "NCHW", "NCHW", float("nan"))]
>>> g = extract(models.get("resnet18", image_size=32), one_nchw)
>>> sorted(collections.Counter(g.op(n) for n in g.nodes).items())
[('boundary', 3), ('conv2d', 20), ('dense', 1), ('join', 8)]
"""

from __future__ import annotations

import collections
import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence

import onnx
import tvm
from tvm import relax

from ..errors import ModelError
from ..graph import Candidate, LayoutGraph
from ..layouts import DENSE, PLAIN, block_of
from ..ops import Op, check_workload
from .importer import _load_onnx, import_model
from .walk import _DEFAULT_NAME, Step, static_shape, walk

__all__ = ["extract", "CandidateFn"]

CandidateFn = Callable[[dict, Op], Sequence[Candidate]]
"""``fn(workload, op) -> candidates`` of a layout node (costs NaN until measured)."""

def extract(
    model: onnx.ModelProto | str | os.PathLike | tvm.IRModule,
    candidates: CandidateFn,
    *,
    shape_dict: Mapping[str, Sequence[int]] | None = None,
) -> LayoutGraph:
    """Build the :class:`~graphtune.graph.LayoutGraph` of ``model``.

    Parameters
    ----------
    model : onnx.ModelProto, path to an ``.onnx`` file, or tvm.IRModule
        The model (see :func:`~graphtune.frontend.import_model`).
    candidates : callable
        ``candidates(workload, op)``: the candidates of a layout node
        (:func:`graphtune.extract` passes graphtune.x86's); called once per
        distinct workload. A :class:`~graphtune.errors.ModelError` makes the node a boundary.
    shape_dict : mapping, optional
        Static shapes for ONNX inputs with dynamic dimensions.

    Returns
    -------
    LayoutGraph
        Layout nodes named as :func:`~graphtune.frontend.layout_ops` names
        them, with NaN candidate costs; joins and boundaries with cost 0;
        edges with shapes and no costs yet.

    Raises
    ------
    ModelError
        If the model cannot be imported.

    Warns
    -----
    UserWarning
        Once per kind of op left out of the layout choice (float16 conv, dynamic
        shape...): those ops become NCHW boundaries.

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.graph import Candidate
    >>> blocked = lambda workload, op: [Candidate({}, "NCHW16c", "NCHW16c", float("nan"))]
    >>> g = extract(models.get("resnet50", image_size=32), blocked)
    >>> g.op("layer1.0.conv1"), g.candidates("layer1.0.conv1")[0].in_layout
    ('conv2d', 'NCHW16c')
    >>> sorted(g.nx.predecessors("output"))
    ['fc']
    """
    output_names = None
    if not isinstance(model, tvm.IRModule):
        model = _load_onnx(model)
        output_names = [o.name for o in model.graph.output]
    mod = import_model(model, shape_dict=shape_dict)
    builder = _Builder(candidates)
    builder.build(mod, output_names)
    return builder.graph


class _Builder:
    """Grows a LayoutGraph while following tensors through ``main``."""

    def __init__(self, candidates: CandidateFn) -> None:
        self.candidates_of = candidates
        self.graph = LayoutGraph()
        self.source: dict = {}  # relax var -> graph node whose layout it carries
        self.free: set = set()  # nodes whose output layout is chosen (layout ops, joins)
        self.reserved: set = set()
        self.counts: collections.Counter = collections.Counter()
        self.skipped: dict[str, tuple[list[str], str]] = {}  # kind -> (node names, first reason)
        self.tuples: dict = {}  # relax var -> the relax.Tuple bound to it
        self.candidates: dict[str, list[Candidate]] = {}  # workload JSON -> candidates

    def build(self, mod: tvm.IRModule, output_names) -> None:
        steps = walk(mod)
        self.reserved = {s.name for s in steps if s.name is not None}
        func = mod["main"]
        for param in func.params:
            self._boundary(self._name(param.name, "input"), param, [])
        for step in steps:
            getattr(self, "_" + step.role)(step)
        outputs = func.body.body
        outputs = self.tuples.get(outputs, outputs) if isinstance(outputs, relax.Var) else outputs
        fields = list(outputs.fields) if isinstance(outputs, relax.Tuple) else [outputs]
        for i, expr in enumerate(fields):
            if not isinstance(expr, relax.Var) or expr not in self.source:
                continue  # a constant output: nothing to lay out
            if output_names and len(output_names) == len(fields):
                name = output_names[i]
            else:
                name = "output" if len(fields) == 1 else f"output_{i}"
            self._boundary(self._name(name, "output"), None, [expr])
        self._warn()

    # ------------------------------------------------------------ roles
    def _layout(self, step: Step) -> None:
        lop = step.layout_op
        assert lop is not None  # the walk gives every layout step its op
        op = Op(lop.op)
        key = json.dumps([op, lop.workload], sort_keys=True)
        try:
            if key not in self.candidates:  # identical workloads (repeated blocks) share candidates
                self.candidates[key] = list(self.candidates_of(check_workload(lop.workload, op), op))
        except ModelError as err:
            names, _ = self.skipped.setdefault(f"{lop.op} op(s) graphtune.x86 cannot run", ([], str(err)))
            names.append(lop.name)
            self._boundary(lop.name, step.var, step.inputs)
            return
        self.graph.add_node(lop.name, self.candidates[key], op=op, workload=lop.workload)
        self.free.add(lop.name)
        self._connect(step.inputs, lop.name)
        self.source[step.var] = lop.name

    def _pass(self, step: Step) -> None:
        self.source[step.var] = self.source[step.inputs[0]]

    def _const(self, step: Step) -> None:
        """Constants carry no layout and are never recorded as sources."""

    def _tuple(self, step: Step) -> None:
        """A tuple carries no layout: its readers read its fields (see walk)."""
        self.tuples[step.var] = step.value

    def _join(self, step: Step) -> None:
        name = step.name
        assert name is not None  # the walk names every join
        shapes = [s for s in map(static_shape, step.inputs) if s is not None]  # 4-D, for a join
        layouts = {PLAIN}
        for v in step.inputs:
            if self.source[v] in self.free:
                layouts.update(c.out_layout for c in self.graph.candidates(self.source[v]))
        ok = sorted(
            (lay for lay in layouts if all(s[1] % max(block_of(lay), 1) == 0 for s in shapes)),
            key=block_of,
        )
        self.graph.add_node(name, [Candidate({}, lay, lay, 0.0) for lay in ok], op="join")
        self.free.add(name)
        self._connect(step.inputs, name)
        self.source[step.var] = name

    def _fixed(self, step: Step) -> None:
        source = self.source[step.inputs[0]]
        plain_changes = self.graph.candidates(source)[0].out_layout != _plain(step.var)
        if plain_changes or any(self.source[v] in self.free for v in step.inputs):
            self._boundary(self._name(step.var.name, _short(step.op_name)), step.var, step.inputs)
        else:  # plain in, plain out: the tensor stays with the boundary that made it plain
            self.source[step.var] = source

    # ----------------------------------------------------------- helpers
    def _boundary(self, name: str, var, inputs) -> None:
        """A fixed-layout node reading ``inputs`` and producing ``var`` (None: a graph output)."""
        free_inputs = [v for v in inputs if self.source[v] in self.free]
        out = inputs[0] if var is None else var
        cand = Candidate({}, _plain(free_inputs[0] if free_inputs else out), _plain(out), 0.0)
        self.graph.add_node(name, [cand], op="boundary")
        self._connect(free_inputs, name)
        if var is not None:
            self.source[var] = name

    def _connect(self, inputs, node: str) -> None:
        """One edge per producer of ``inputs``, naming every tensor ``node`` reads from it."""
        by_source: dict = {}
        for v in inputs:
            by_source.setdefault(self.source[v], []).append(v)
        for src, tensors in by_source.items():
            if src == node or self.graph.nx.has_edge(src, node):
                continue
            if src in self.free or node in self.free:
                self.graph.add_edge(src, node, shape=static_shape(tensors[0]),
                                    tensors={v.name: shape for v in tensors
                                             if (shape := static_shape(v)) is not None})

    def _name(self, own: str, kind: str) -> str:
        """``own`` if it is a readable free name, else ``{kind}_{k}``."""
        if own and not _DEFAULT_NAME.match(own) and own not in self.graph and own not in self.reserved:
            return own
        while True:
            name = f"{kind}_{self.counts[kind]}"
            self.counts[kind] += 1
            if name not in self.graph and name not in self.reserved:
                return name

    def _warn(self) -> None:
        for kind, (names, reason) in self.skipped.items():
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            warnings.warn(
                f"graphtune.extract: {len(names)} {kind} ({shown}; first: {reason}); left out of "
                "the layout choice, they keep the default NCHW layout",
                stacklevel=3,
            )


def _plain(var) -> str:
    """The fixed layout of a tensor: ``NC`` for 2-D tensors, ``NCHW`` otherwise."""
    return DENSE if len(static_shape(var) or []) == 2 else PLAIN


def _short(op_name: str | None) -> str:
    """``relax.nn.max_pool2d`` -> ``max_pool2d``; non-calls -> ``tuple``."""
    return op_name.rsplit(".", 1)[-1] if op_name else "tuple"
