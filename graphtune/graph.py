"""The layout graph: nodes with candidate layouts/schedules, edges with transform costs.

A :class:`LayoutGraph` is a :class:`networkx.DiGraph` of *layout nodes*
(``conv2d``, ``depthwise_conv2d``, ``group_conv2d``, ``dense``, ``join`` for add/concat,
``boundary`` for fixed-layout points such as graph inputs and outputs).
Every node carries a list of :class:`Candidate` (knobs, input layout, output
layout, kernel cost in ms). Every edge ``u -> v`` carries the logical NCHW
shape of the tensor it moves and a cost matrix ``cost[s, r]`` = ms of
transforming that tensor from ``out_layout(u, s)`` to ``in_layout(v, r)``;
the matrix is given explicitly, computed lazily from a callable
``fn(shape, src_layout, dst_layout) -> ms`` (0 when the layouts are equal),
or filled later with :meth:`LayoutGraph.fill_edge_costs`.

This module knows nothing about TVM.

Examples
--------
>>> g = LayoutGraph()
>>> g.add_node("a", costs=[1.0, 2.0])
>>> g.add_node("b", costs=[3.0, 1.0])
>>> g.add_edge("a", "b", cost=[[0.0, 5.0], [5.0, 0.0]])
>>> g.validate()
>>> g.energy({"a": 0, "b": 1})
7.0
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence, TypedDict

import networkx as nx
import numpy as np

from . import safejson
from .errors import GraphError
from .ops import GRAPH_OPS, Op, as_op, input_dtype

__all__ = ["Candidate", "LayoutGraph", "TransformFn"]

MAX_JSON_CHARS = 256 << 20
"""Longest layout graph document :meth:`LayoutGraph.from_json` reads (characters)."""

TransformFn = Callable[..., float]
"""``fn(shape, src_layout, dst_layout, dtype) -> ms``: the cost of one layout transform of a
tensor of ``dtype``, the one the destination candidate reads (:func:`graphtune.ops.input_dtype`:
``"uint8"`` before a quantized node's int8 candidate). A function of ``(shape, src_layout,
dst_layout)`` alone prices float32 tensors only."""


class _NodeData(TypedDict):
    """The attributes of a node of the underlying networkx graph."""

    op: Op
    workload: dict[str, Any] | None
    candidates: tuple[Candidate, ...]


class _EdgeData(TypedDict):
    """The attributes of an edge of the underlying networkx graph."""

    shape: list[int] | None
    cost: np.ndarray | None  # read-only matrix, candidates of src x candidates of dst
    fn: TransformFn | None  # computes ``cost`` on first use
    tensors: dict[str, list[int]] | None
    bound: np.ndarray | None

_FORMAT = "graphtune.layout_graph"
_VERSION = 1


@dataclass(frozen=True)
class Candidate:
    """One choice for a node: schedule knobs, the layouts they imply, and the kernel cost.

    Parameters
    ----------
    knobs : dict
        Schedule parameters (JSON-able); ``{}`` for joins and boundaries.
    in_layout, out_layout : str
        Layout the node reads its inputs in and writes its output in.
    cost : float
        Kernel time in ms; NaN while not measured (``validate`` rejects NaN).

    Examples
    --------
    >>> c = Candidate({"ic_bn": 16, "oc_bn": 32}, "NCHW16c", "NCHW32c", 0.41)
    >>> c.out_layout
    'NCHW32c'
    """

    knobs: Mapping[str, Any] = field(default_factory=dict)
    in_layout: str = "NCHW"
    out_layout: str = "NCHW"
    cost: float = math.nan

    def __post_init__(self) -> None:
        if not isinstance(self.knobs, Mapping):
            raise GraphError(f"Candidate knobs must be a dict, got {type(self.knobs).__name__}")
        for name in ("in_layout", "out_layout"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise GraphError(f"Candidate {name} must be a non-empty str, got {getattr(self, name)!r}")
        object.__setattr__(self, "knobs", dict(self.knobs))
        try:
            object.__setattr__(self, "cost", float(self.cost))
        except (TypeError, ValueError):
            raise GraphError(
                f"Candidate cost must be a number of ms (NaN if unmeasured), got {self.cost!r}") from None

    def __hash__(self) -> int:
        return hash((json.dumps(self.knobs, sort_keys=True), self.in_layout, self.out_layout, self.cost))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; a NaN cost is written as ``None``.

        Examples
        --------
        >>> Candidate({}, "NCHW", "NCHW", 1.5).to_dict()["cost"]
        1.5
        """
        cost = None if math.isnan(self.cost) else self.cost
        return {"knobs": self.knobs, "in_layout": self.in_layout, "out_layout": self.out_layout, "cost": cost}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Candidate":
        """Inverse of :meth:`to_dict`.

        Examples
        --------
        >>> Candidate.from_dict({"knobs": {}, "in_layout": "NCHW", "out_layout": "NCHW", "cost": None}).cost
        nan
        """
        cost = data.get("cost")
        return cls(dict(data.get("knobs", {})), data["in_layout"], data["out_layout"],
                   math.nan if cost is None else float(cost))


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise GraphError(f"node names must be non-empty str, got {name!r}")
    return name


class LayoutGraph:
    """A layout-choice problem: candidates per node, transform costs per edge.

    The underlying :class:`networkx.DiGraph` is :attr:`nx`; node attributes are
    ``op``, ``workload`` and ``candidates`` (tuple of :class:`Candidate`), edge
    attributes ``shape``, ``cost`` (ndarray or None), ``fn`` (callable or None), ``tensors`` and
    ``bound`` (None, or a boolean matrix: True where ``cost`` is only a lower bound).

    Examples
    --------
    >>> g = LayoutGraph()
    >>> g.add_node("input", [Candidate({}, "NCHW", "NCHW", 0.0)], op="boundary")
    >>> g.add_node("conv", [Candidate({"oc_bn": 8}, "NCHW", "NCHW8c", 1.0),
    ...                     Candidate({"oc_bn": 0}, "NCHW", "NCHW", 1.4)])
    >>> g.add_edge("input", "conv", shape=[1, 3, 8, 8], cost=lambda shape, src, dst, dtype: 0.1)
    >>> g.edge_cost("input", "conv").tolist()
    [[0.0, 0.0]]
    >>> len(g), g.edges
    (2, [('input', 'conv')])
    """

    def __init__(self) -> None:
        self._g = nx.DiGraph()

    # ------------------------------------------------------------------ building
    def add_node(
        self,
        name: str,
        candidates: Sequence[Candidate] | None = None,
        *,
        op: Op | str = Op.CONV2D,
        workload: Mapping[str, Any] | None = None,
        costs: Sequence[float] | None = None,
        layouts: Sequence[str] | None = None,
    ) -> None:
        """Add a node with its candidates.

        Parameters
        ----------
        name : str
            Unique node name.
        candidates : sequence of Candidate, optional
            The node's choices. Give either ``candidates`` or ``costs``.
        op : Op or str
            One of :data:`graphtune.ops.GRAPH_OPS`.
        workload : dict, optional
            Shapes and attributes of the op (JSON-able).
        costs : sequence of float, optional
            Convenience: one candidate per cost, knobs ``{}``; layouts from
            ``layouts`` or, if omitted, ``"#0"``, ``"#1"``... by index.
        layouts : sequence of str, optional
            With ``costs``: the (in and out) layout of each candidate.

        Raises
        ------
        GraphError
            Duplicate name, unknown op, both/neither of candidates and costs.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("relu_join", op="join", costs=[0.0, 0.0], layouts=["NCHW", "NCHW8c"])
        >>> [c.in_layout for c in g.candidates("relu_join")]
        ['NCHW', 'NCHW8c']
        """
        _check_name(name)
        if name in self._g:
            raise GraphError(f"node {name!r} already exists; node names must be unique")
        try:
            op = as_op(op, GRAPH_OPS)
        except ValueError as err:
            raise GraphError(f"node {name!r}: {err}") from None
        cands = self._make_candidates(name, candidates, costs, layouts)
        self._g.add_node(name, op=op, workload=None if workload is None else dict(workload), candidates=cands)

    @staticmethod
    def _make_candidates(name: str, candidates: Sequence[Candidate] | None,
                         costs: Sequence[float] | None,
                         layouts: Sequence[str] | None) -> tuple[Candidate, ...]:
        if (candidates is None) == (costs is None):
            raise GraphError(f"node {name!r}: give exactly one of candidates=[Candidate...] or costs=[...]")
        if costs is not None:
            costs = list(costs)
            if layouts is None:
                layouts = [f"#{i}" for i in range(len(costs))]
            if len(layouts) != len(costs):
                raise GraphError(f"node {name!r}: {len(costs)} costs but {len(layouts)} layouts")
            try:
                return tuple(Candidate({}, lay, lay, c) for c, lay in zip(costs, layouts))
            except GraphError as err:
                raise GraphError(f"node {name!r}: {err}") from None
        assert candidates is not None  # exactly one of candidates and costs, checked above
        cands = tuple(candidates)
        for i, c in enumerate(cands):
            if not isinstance(c, Candidate):
                raise GraphError(f"node {name!r}: candidate {i} is a {type(c).__name__}, not a Candidate")
        return cands

    def add_edge(
        self,
        u: str,
        v: str,
        cost: np.ndarray | Sequence[Sequence[float]] | TransformFn | None = None,
        shape: Sequence[int] | None = None,
        tensors: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        """Add the edge ``u -> v`` (a tensor produced by ``u`` and read by ``v``).

        Parameters
        ----------
        u, v : str
            Existing node names.
        cost : array-like, callable or None
            ``[len(candidates(u)), len(candidates(v))]`` matrix in ms; or
            ``fn(shape, src_layout, dst_layout, dtype) -> ms`` (:data:`TransformFn`)
            evaluated lazily for every pair of differing layouts (equal layouts
            cost 0); or None to fill later with :meth:`fill_edge_costs`.
        shape : sequence of int, optional
            Logical NCHW shape of the tensor (needed by callables).
        tensors : mapping of str to shape, optional
            The tensors ``v`` reads along the edge, by name (the Relax variables
            a layout transform would convert; :func:`graphtune.extract` sets
            them). When given, a callable cost is charged once per tensor (a
            join reading ``x`` and ``sigmoid(x)`` needs two transforms); default:
            one tensor of ``shape``.

        Raises
        ------
        GraphError
            Unknown node, self-loop, duplicate edge or wrong matrix shape.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0]); g.add_node("b", costs=[1.0, 2.0])
        >>> g.add_edge("a", "b", cost=[[0.0, 0.5]])
        >>> g.edge_cost("a", "b").shape
        (1, 2)
        """
        for n in (u, v):
            if n not in self._g:
                raise GraphError(f"edge {u} -> {v}: unknown node {n!r}; add it with add_node first")
        if u == v:
            raise GraphError(f"edge {u} -> {v}: self-loops are not allowed")
        if self._g.has_edge(u, v):
            raise GraphError(f"edge {u} -> {v} already exists; a pair of nodes has at most one edge")
        shape = None if shape is None else [int(d) for d in shape]
        matrix, fn = None, None
        if callable(cost):
            fn = cost
        elif cost is not None:
            matrix = self._check_matrix(u, v, cost)
        tensors = {str(t): None if ts is None else [int(d) for d in ts]
                   for t, ts in (tensors or {}).items()}
        self._g.add_edge(u, v, shape=shape, cost=matrix, fn=fn, tensors=tensors, bound=None)

    def _check_matrix(self, u: str, v: str, cost: Any) -> np.ndarray:
        try:
            matrix = np.array(cost, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise GraphError(f"edge {u} -> {v}: cost is not a numeric matrix ({err})") from None
        want = (len(self.candidates(u)), len(self.candidates(v)))
        if matrix.shape != want:
            raise GraphError(
                f"edge {u} -> {v}: cost matrix has shape {matrix.shape}, expected {want} "
                f"(candidates of {u!r} x candidates of {v!r})"
            )
        matrix.setflags(write=False)
        return matrix

    def set_candidates(self, name: str, candidates: Sequence[Candidate]) -> list[tuple[str, str]]:
        """Replace the candidates of ``name``.

        Edges touching ``name`` whose matrix was computed from a callable are
        recomputed lazily. Explicit matrices no longer match and are dropped:
        the returned edges need new costs (:meth:`fill_edge_costs` or
        :meth:`set_edge_cost`) before :meth:`validate` passes. To keep a subset
        of candidates *and* the matrices, use :meth:`prune`.

        Returns
        -------
        list of (str, str)
            Edges whose explicit matrices were dropped.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0]); g.add_node("b", costs=[1.0])
        >>> g.add_edge("a", "b", cost=[[0.0]])
        >>> g.set_candidates("b", [Candidate({}, "#0", "#0", 1.0), Candidate({}, "#1", "#1", 2.0)])
        [('a', 'b')]
        """
        self._require(name)
        self._g.nodes[name]["candidates"] = self._make_candidates(name, candidates, None, None)
        dropped = []
        for u, v, data in self._touching(name):
            data["bound"] = None
            if data["fn"] is not None:
                data["cost"] = None
            elif data["cost"] is not None:
                data["cost"] = None
                dropped.append((u, v))
        return dropped

    def prune(self, name: str, keep: Sequence[int]) -> None:
        """Keep only the candidates of ``name`` at indices ``keep`` (in that order).

        Explicit edge matrices are sliced to match, so the graph stays valid.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0, 2.0, 3.0]); g.add_node("b", costs=[0.0])
        >>> g.add_edge("a", "b", cost=[[1.0], [2.0], [3.0]])
        >>> g.prune("a", [2, 0])
        >>> g.edge_cost("a", "b").ravel().tolist()
        [3.0, 1.0]
        """
        cands = self.candidates(name)
        keep = [int(k) for k in keep]
        bad = [k for k in keep if not 0 <= k < len(cands)]
        if bad or not keep or len(set(keep)) != len(keep):
            raise GraphError(
                f"node {name!r}: prune indices {keep} must be distinct, non-empty and in [0, {len(cands)})"
            )
        self._g.nodes[name]["candidates"] = tuple(cands[k] for k in keep)
        for u, _, data in self._touching(name):
            for attr in ("cost", "bound"):
                full = data[attr]
                if full is not None:
                    matrix = np.array(full[keep, :] if u == name else full[:, keep])
                    matrix.setflags(write=False)
                    data[attr] = matrix

    def set_edge_cost(self, u: str, v: str, cost: np.ndarray | TransformFn,
                      bound: np.ndarray | None = None) -> None:
        """Set the cost matrix (or callable) of an existing edge.

        Parameters
        ----------
        u, v : str
            The edge.
        cost : array-like or callable
            The matrix in ms, or ``fn(shape, src, dst, dtype) -> ms`` (see :meth:`add_edge`).
        bound : array-like of bool, optional
            With a matrix: True where the entry is only a lower bound of the cost
            (a transform not measured, :mod:`graphtune.lazy`); see :meth:`unmeasured`.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0]); g.add_node("b", costs=[1.0])
        >>> g.add_edge("a", "b")
        >>> g.set_edge_cost("a", "b", [[0.25]])
        >>> float(g.edge_cost("a", "b")[0, 0])
        0.25
        """
        data = self._edge(u, v)
        if callable(cost):
            data["fn"], data["cost"], data["bound"] = cost, None, None
            return
        matrix = self._check_matrix(u, v, cost)
        data["fn"], data["cost"] = None, matrix
        data["bound"] = None
        if bound is not None:
            mask = np.array(bound, dtype=bool)
            if mask.shape != matrix.shape:
                raise GraphError(f"edge {u} -> {v}: bound mask has shape {mask.shape}, "
                                 f"expected {matrix.shape} (the cost matrix's)")
            mask.setflags(write=False)
            data["bound"] = mask if mask.any() else None

    def fill_edge_costs(self, fn: TransformFn, overwrite: bool = False) -> None:
        """Compute the matrix of every edge without one from ``fn(shape, src, dst, dtype) -> ms``.

        Parameters
        ----------
        fn : callable
            Transform cost of the tensor of logical ``shape`` and ``dtype`` from
            layout ``src`` to ``dst`` (:data:`TransformFn`); only called for ``src != dst``.
        overwrite : bool
            Also recompute edges that already have a matrix or callable.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0, 1.0], layouts=["NCHW", "NCHW8c"])
        >>> g.add_node("b", costs=[1.0], layouts=["NCHW8c"])
        >>> g.add_edge("a", "b", shape=[1, 8, 4, 4])
        >>> g.fill_edge_costs(lambda shape, src, dst, dtype: 0.5)
        >>> g.edge_cost("a", "b").ravel().tolist()
        [0.5, 0.0]
        """
        for u, v, data in self._g.edges(data=True):
            if overwrite or (data["cost"] is None and data["fn"] is None):
                data["fn"], data["cost"], data["bound"] = fn, None, None
                self.edge_cost(u, v)

    # ------------------------------------------------------------------ reading
    @property
    def nx(self) -> nx.DiGraph:
        """The underlying :class:`networkx.DiGraph` (live; edit through this class).

        Examples
        --------
        >>> g = LayoutGraph(); g.add_node("a", costs=[0.0])
        >>> g.nx.number_of_nodes()
        1
        """
        return self._g

    @property
    def nodes(self) -> list[str]:
        """Node names in insertion order."""
        return list(self._g.nodes)

    @property
    def edges(self) -> list[tuple[str, str]]:
        """Edges ``(u, v)`` in insertion order."""
        return list(self._g.edges)

    def __len__(self) -> int:
        return int(self._g.number_of_nodes())

    def __contains__(self, name: object) -> bool:
        return name in self._g

    def __repr__(self) -> str:
        return f"LayoutGraph({len(self)} nodes, {self._g.number_of_edges()} edges)"

    def op(self, name: str) -> Op:
        """Op kind of node ``name`` (an :class:`~graphtune.ops.Op`, equal to its string)."""
        return self._require(name)["op"]

    def workload(self, name: str) -> dict[str, Any] | None:
        """Workload dict of node ``name`` (None if not given)."""
        return self._require(name)["workload"]

    def candidates(self, name: str) -> tuple[Candidate, ...]:
        """Candidates of node ``name``.

        Examples
        --------
        >>> g = LayoutGraph(); g.add_node("a", costs=[2.0])
        >>> g.candidates("a")[0].cost
        2.0
        """
        return self._require(name)["candidates"]

    def reads(self, name: str) -> list[tuple[str, str]]:
        """``(in_layout, dtype)`` of each candidate of node ``name``: the layout and dtype a
        transform before it moves (:func:`graphtune.ops.input_dtype`: uint8 before a quantized
        node's int8 candidate).

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("q", [Candidate({}, "NCHW8c", "NCHW8c", 1.0),
        ...                  Candidate({"precision": "float32"}, "NCHW8c", "NCHW8c", 1.0)], op="conv2d_int8")
        >>> g.reads("q")
        [('NCHW8c', 'uint8'), ('NCHW8c', 'float32')]
        """
        op = self.op(name)
        return [(c.in_layout, input_dtype(op, c.knobs)) for c in self.candidates(name)]

    def edge_shape(self, u: str, v: str) -> list[int] | None:
        """Logical tensor shape carried by edge ``u -> v``."""
        return self._edge(u, v)["shape"]

    def edge_cost(self, u: str, v: str) -> np.ndarray:
        """Cost matrix of edge ``u -> v`` (computed from its callable on first use).

        Raises
        ------
        GraphError
            If the edge has neither a matrix nor a callable, or the callable
            returns a non-numeric value.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0]); g.add_node("b", costs=[1.0])
        >>> g.add_edge("a", "b", cost=[[3.0]])
        >>> g.edge_cost("a", "b").tolist()
        [[3.0]]
        """
        data = self._edge(u, v)
        cost, fn = data["cost"], data["fn"]
        if cost is None:
            if fn is None:
                raise GraphError(
                    f"edge {u} -> {v} has no cost matrix; pass cost= to add_edge, "
                    "set_edge_cost, or call fill_edge_costs(fn)"
                )
            cost = data["cost"] = self._check_matrix(u, v, self._evaluate(u, v, fn, data))
        return cost

    def edge_bound(self, u: str, v: str) -> np.ndarray | None:
        """Boolean matrix of edge ``u -> v``: True where its cost is only a lower bound (an
        unmeasured transform); None when every entry is a cost.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0]); g.add_node("b", costs=[1.0])
        >>> g.add_edge("a", "b", cost=[[0.0]])
        >>> g.edge_bound("a", "b") is None
        True
        """
        return self._edge(u, v)["bound"]

    def _evaluate(self, u: str, v: str, fn: TransformFn, data: _EdgeData) -> np.ndarray:
        src = [c.out_layout for c in self.candidates(u)]
        dst = self.reads(v)
        with_dtype = _takes_dtype(fn)
        cache: dict[tuple[str, str, str], float] = {}
        matrix = np.zeros((len(src), len(dst)))
        for s, a in enumerate(src):
            for r, (b, dtype) in enumerate(dst):
                if a == b:
                    continue
                if not with_dtype and dtype != "float32":
                    raise GraphError(f"edge {u} -> {v}: the transform cost function takes (shape, src, "
                                     f"dst) and prices float32 tensors, but {v!r} reads {dtype}; give it "
                                     "a fourth argument, dtype")
                if (a, b, dtype) not in cache:
                    args = (a, b, dtype) if with_dtype else (a, b)
                    try:
                        cache[a, b, dtype] = sum(float(fn(shape, *args)) for shape in _shapes(data))
                    except (TypeError, ValueError, LookupError) as err:
                        raise GraphError(
                            f"edge {u} -> {v}: transform cost {a} -> {b} ({dtype}) for shape "
                            f"{data['shape']} could not be computed ({type(err).__name__}: {err}); "
                            "measure that transform or fix the cost function"
                        ) from None
                matrix[s, r] = cache[a, b, dtype]
        return matrix

    def unmeasured(self, assignment: Mapping[str, int]) -> list[tuple[str, str]]:
        """The edges whose entry under ``assignment`` is only a lower bound (an unmeasured
        transform, see :meth:`set_edge_cost`): [] when :meth:`energy` is the assignment's cost.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0, 1.0]); g.add_node("b", costs=[1.0])
        >>> g.add_edge("a", "b")
        >>> g.set_edge_cost("a", "b", [[0.5], [0.0]], bound=[[False], [True]])
        >>> g.unmeasured({"a": 0, "b": 0}), g.unmeasured({"a": 1, "b": 0})
        ([], [('a', 'b')])
        """
        return [(u, v) for u, v, data in self._g.edges(data=True)
                if data["bound"] is not None and data["bound"][assignment[u], assignment[v]]]

    def transform_pairs(self, missing_only: bool = True) -> list[tuple[tuple[int, ...], str, str, str]]:
        """The distinct layout transforms ``(shape, src, dst, dtype)`` the edges need, ``src != dst``
        (``dtype``: what the destination candidate reads, :func:`graphtune.ops.input_dtype`).

        Parameters
        ----------
        missing_only : bool
            Only edges that have no explicit matrix yet (those
            :meth:`fill_edge_costs` would compute); False lists every edge.

        Raises
        ------
        GraphError
            If a listed edge has no shape.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0, 1.0], layouts=["NCHW", "NCHW8c"])
        >>> g.add_node("b", costs=[1.0], layouts=["NCHW8c"])
        >>> g.add_edge("a", "b", shape=[1, 8, 4, 4])
        >>> g.transform_pairs()
        [((1, 8, 4, 4), 'NCHW', 'NCHW8c', 'float32')]
        """
        pairs: set[tuple[tuple[int, ...], str, str, str]] = set()
        for u, v, data in self._g.edges(data=True):
            if missing_only and data["cost"] is not None:
                continue
            if data["shape"] is None:
                raise GraphError(f"edge {u} -> {v} has no shape; pass shape= to add_edge")
            for a in {c.out_layout for c in self.candidates(u)}:
                for b, dtype in set(self.reads(v)):
                    if a != b:
                        pairs.update((tuple(shape), a, b, dtype) for shape in _shapes(data)
                                     if shape is not None)
        return sorted(pairs)

    def validate(self) -> None:
        """Check the graph is a complete, well-formed problem.

        Raises
        ------
        GraphError
            Naming the node or edge: no candidates, NaN/negative/infinite
            kernel cost, boundary with other than one candidate, edge without
            costs, matrix of the wrong shape, NaN/negative/infinite transform cost.

        Examples
        --------
        >>> g = LayoutGraph(); g.add_node("a", costs=[float("nan")])
        >>> try:
        ...     g.validate()
        ... except GraphError as err:
        ...     print(str(err).split(";")[0])
        node 'a': candidate 0 has cost nan
        """
        for name, data in self._g.nodes(data=True):
            cands = data["candidates"]
            if not cands:
                raise GraphError(f"node {name!r} has no candidates; give it at least one")
            if data["op"] == Op.BOUNDARY and len(cands) != 1:
                raise GraphError(
                    f"boundary node {name!r} has {len(cands)} candidates; a boundary has exactly one")
            for i, c in enumerate(cands):
                if not (math.isfinite(c.cost) and c.cost >= 0):
                    raise GraphError(
                        f"node {name!r}: candidate {i} has cost {c.cost}; costs must be finite ms >= 0 "
                        "(measure it or prune it)"
                    )
        for u, v in self._g.edges:
            matrix = self.edge_cost(u, v)
            want = (len(self.candidates(u)), len(self.candidates(v)))
            if matrix.shape != want:
                raise GraphError(f"edge {u} -> {v}: cost matrix has shape {matrix.shape}, expected {want}")
            bad = ~(np.isfinite(matrix) & (matrix >= 0))
            if bad.any():
                s, r = map(int, np.argwhere(bad)[0])
                raise GraphError(
                    f"edge {u} -> {v}: cost[{s}, {r}] = {matrix[s, r]}; "
                    "transform costs must be finite ms >= 0"
                )

    def energy(self, assignment: Mapping[str, int]) -> float:
        """Total ms of an assignment: kernel costs plus transform costs.

        Parameters
        ----------
        assignment : dict
            Node name -> candidate index, for every node.

        Raises
        ------
        GraphError
            Naming the node that is missing, unknown or has an index out of range.

        Examples
        --------
        >>> g = LayoutGraph(); g.add_node("a", costs=[1.0, 2.0])
        >>> g.energy({"a": 1})
        2.0
        """
        for name in assignment:
            if name not in self._g:
                raise GraphError(f"assignment names unknown node {name!r}")
        total = 0.0
        for name, data in self._g.nodes(data=True):
            if name not in assignment:
                raise GraphError(f"assignment has no candidate for node {name!r}")
            k = assignment[name]
            n = len(data["candidates"])
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < n:
                raise GraphError(f"node {name!r}: candidate index {k!r} out of range [0, {n})")
            total += data["candidates"][k].cost
        for u, v in self._g.edges:
            total += float(self.edge_cost(u, v)[assignment[u], assignment[v]])
        return total

    def transforms(self, assignment: Mapping[str, int]) -> dict[tuple[str, str, str, str], float]:
        """The layout transforms an assignment runs, as the compiler emits them.

        One transform per (tensor, destination layout): consumers of one tensor
        that need the same other layout share it (:mod:`graphtune.compiler.rewrite`),
        and an edge carrying two tensors needs two. :meth:`energy` charges one
        per edge instead, an upper bound on these.

        Parameters
        ----------
        assignment : dict
            Node name -> candidate index, for every node.

        Returns
        -------
        dict of (str, str, str, str) to float
            ``(producer, tensor, src layout, dst layout)`` -> ms (NaN while the
            edge has no cost). The tensor is the edge's ``tensors`` entry
            (``"u->v"`` for edges added without names).

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", [Candidate({}, "NCHW", "NCHW8c", 1.0)])
        >>> for n in ("b", "c"):
        ...     g.add_node(n, [Candidate({}, "NCHW4c", "NCHW4c", 1.0)])
        ...     g.add_edge("a", n, cost=[[0.5]], tensors={"x": [1, 8, 4, 4]})
        >>> g.transforms({"a": 0, "b": 0, "c": 0}), g.energy({"a": 0, "b": 0, "c": 0})
        ({('a', 'x', 'NCHW8c', 'NCHW4c'): 0.5}, 4.0)
        """
        runs: dict[tuple[str, str, str, str], float] = {}
        for u, v, data in self._g.edges(data=True):
            src = self.candidates(u)[assignment[u]].out_layout
            dst = self.candidates(v)[assignment[v]].in_layout
            if src == dst:
                continue
            costed = data["cost"] is not None or data["fn"] is not None
            ms = float(self.edge_cost(u, v)[assignment[u], assignment[v]]) if costed else math.nan
            tensors = data.get("tensors") or {f"{u}->{v}": data["shape"]}
            for tensor in tensors:  # the edge's cost covers all its tensors: split it evenly
                runs.setdefault((u, tensor, src, dst), ms / len(tensors))
        return runs

    def transform_cost(self, assignment: Mapping[str, int]) -> float:
        """Total ms of the transforms an assignment runs (:meth:`transforms`), at most what
        :meth:`energy` charges for them.

        Examples
        --------
        >>> g = LayoutGraph()
        >>> g.add_node("a", costs=[1.0, 1.0])
        >>> g.add_node("b", costs=[2.0])
        >>> g.add_edge("a", "b", cost=[[0.0], [0.25]])
        >>> g.transform_cost({"a": 0, "b": 0}), g.transform_cost({"a": 1, "b": 0})
        (0.0, 0.25)
        """
        return float(sum(self.transforms(assignment).values()))

    def fingerprint(self) -> str:
        """sha256 of the structure: names, ops, workloads and edges (with shapes), not costs.

        Examples
        --------
        >>> g = LayoutGraph(); g.add_node("a", costs=[1.0])
        >>> h = LayoutGraph(); h.add_node("a", costs=[5.0])
        >>> g.fingerprint() == h.fingerprint()
        True
        """
        structure = {
            "nodes": sorted([n, d["op"], d["workload"]] for n, d in self._g.nodes(data=True)),
            "edges": sorted([u, v, d["shape"]] for u, v, d in self._g.edges(data=True)),
        }
        text = json.dumps(structure, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; callables are materialised into matrices.

        Examples
        --------
        >>> g = LayoutGraph(); g.add_node("a", costs=[1.0])
        >>> g.to_dict()["format"]
        'graphtune.layout_graph'
        """
        nodes = [
            {"name": n, "op": d["op"], "workload": d["workload"],
             "candidates": [c.to_dict() for c in d["candidates"]]}
            for n, d in self._g.nodes(data=True)
        ]
        edges = []
        for u, v, d in self._g.edges(data=True):
            matrix = self.edge_cost(u, v) if d["fn"] is not None else d["cost"]
            edge = {"src": u, "dst": v, "shape": d["shape"],
                    "cost": None if matrix is None else matrix.tolist()}
            if d["bound"] is not None:
                edge["bound"] = np.argwhere(d["bound"]).tolist()
            edges.append(edge)
        return {"format": _FORMAT, "version": _VERSION, "nodes": nodes, "edges": edges}

    def to_json(self, indent: int | None = None) -> str:
        """Serialise to a JSON string (see :meth:`to_dict`).

        Examples
        --------
        >>> g = LayoutGraph(); g.add_node("a", costs=[1.0])
        >>> LayoutGraph.from_json(g.to_json()).nodes
        ['a']
        """
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LayoutGraph":
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        GraphError
            If ``data`` is not a layout graph document or is malformed.

        Examples
        --------
        >>> g = LayoutGraph(); g.add_node("a", costs=[1.0])
        >>> LayoutGraph.from_dict(g.to_dict()).energy({"a": 0})
        1.0
        """
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            raise GraphError(f"not a layout graph document: expected 'format': {_FORMAT!r}")
        if data.get("version") != _VERSION:
            raise GraphError(f"layout graph version {data.get('version')!r} unsupported; expected {_VERSION}")
        graph = cls()
        where = "nodes"
        try:
            for i, node in enumerate(data["nodes"]):
                where = f"nodes.{i}"
                cands = [Candidate.from_dict(c) for c in node["candidates"]]
                graph.add_node(node["name"], cands, op=node["op"], workload=node.get("workload"))
            where = "edges"
            for i, edge in enumerate(data["edges"]):
                where = f"edges.{i}"
                u, v = edge["src"], edge["dst"]
                graph.add_edge(u, v, cost=edge.get("cost"), shape=edge.get("shape"))
                if edge.get("bound"):  # [[s, r], ...]: the entries that are lower bounds
                    mask = np.zeros(graph.edge_cost(u, v).shape, dtype=bool)
                    bound = np.array(edge["bound"])
                    if bound.dtype.kind not in "iu" or bound.ndim != 2 or bound.shape[1] != 2 \
                            or (bound < 0).any():
                        raise GraphError(f"edge {u} -> {v}: bound must be a list of [s, r] "
                                         "candidate index pairs")
                    mask[tuple(bound.T)] = True
                    graph.set_edge_cost(u, v, graph.edge_cost(u, v), bound=mask)
        except GraphError as err:
            raise GraphError(f"{where}: {safejson.printable(err)}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as err:
            text = safejson.printable(err)
            raise GraphError(f"malformed layout graph document: {where}: missing or bad field "
                             f"{text if len(text) <= 100 else text[:97] + '...'}") from None
        return graph

    @classmethod
    def from_json(cls, text: str) -> "LayoutGraph":
        """Parse a JSON string written by :meth:`to_json`.

        Examples
        --------
        >>> LayoutGraph.from_json('{"format": "graphtune.layout_graph", "version": 1, '
        ...                       '"nodes": [], "edges": []}')
        LayoutGraph(0 nodes, 0 edges)
        """
        try:
            data = safejson.loads(text, max_chars=MAX_JSON_CHARS)
        except json.JSONDecodeError as err:
            raise GraphError(f"layout graph JSON is not valid JSON: {err}") from None
        except ValueError as err:  # nested too deep, a number of thousands of digits...
            raise GraphError(f"not a layout graph document: {err}") from None
        return cls.from_dict(data)

    # ------------------------------------------------------------------ helpers
    def _require(self, name: str) -> _NodeData:
        if name not in self._g:
            raise GraphError(f"unknown node {name!r}")
        data: _NodeData = self._g.nodes[name]
        return data

    def _edge(self, u: str, v: str) -> _EdgeData:
        if not self._g.has_edge(u, v):
            raise GraphError(f"unknown edge {u} -> {v}")
        data: _EdgeData = self._g.edges[u, v]
        return data

    def _touching(self, name: str) -> Iterator[tuple[str, str, _EdgeData]]:
        yield from self._g.out_edges(name, data=True)
        yield from self._g.in_edges(name, data=True)


def _takes_dtype(fn: TransformFn) -> bool:
    """Whether a transform cost function takes the tensor's dtype (a fourth positional argument)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): assume the full one
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 4 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _shapes(data: _EdgeData) -> list[list[int] | None]:
    """Shapes of the tensors an edge carries (its ``shape`` when it names none)."""
    tensors = data.get("tensors")
    return list(tensors.values()) if tensors else [data["shape"]]
