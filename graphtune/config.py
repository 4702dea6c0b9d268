"""The config file: per-node layouts and schedule knobs chosen for one model.

A :class:`Config` is what graph tuning produces and what
:func:`graphtune.compile` consumes. On disk it is the JSON document described
in ``design.md`` (``*.graphtune.json``)::

    {"format": "graphtune.config", "version": 1,
     "target": {...}, "model": {"name": ..., "fingerprint": ...},
     "solution": {...},
     "nodes": {"layer1.0.conv1": {"op": "conv2d", "workload": {...},
               "in_layout": "NCHW16c", "out_layout": "NCHW16c",
               "knobs": {...}, "cost_ms": 0.41}}}

Nodes are keyed by the stable names of :func:`graphtune.frontend.layout_ops`
*and* checked by workload, so a config made for another model (or another
image size) is refused with a message naming the first node that differs
instead of silently handing the wrong knobs to the wrong op.

Examples
--------
>>> from graphtune.config import Config, NodeConfig
>>> node = NodeConfig(op="dense", workload={"data": [1, 8], "weight": [4, 8],
...                   "dtype": "float32"}, in_layout="NC", out_layout="NC", knobs={})
>>> cfg = Config({"fc": node}, model={"name": "toy"})
>>> Config.from_dict(cfg.to_dict()).nodes["fc"].out_layout
'NC'
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .errors import ConfigError, ConfigMismatchError, KnobError, LayoutError, ModelError
from .layouts import DENSE, PLAIN, check_layout
from .ops import NODE_OPS, Op, as_op, check_workload

__all__ = ["FORMAT", "VERSION", "NodeConfig", "Config", "KnobCheck", "ModelNode", "graph_workload"]

FORMAT = "graphtune.config"
"""Value of the ``format`` field of every config file."""

VERSION = 1
"""The config format version this module reads and writes."""

ModelNode = tuple  # (name, op, workload)
"""``(name, op, workload)`` of one layout node of a model, what :meth:`Config.check_nodes` compares."""

KnobCheck = Callable[[Op, dict, dict], tuple]
"""``fn(op, workload, knobs) -> (in_layout, out_layout)``: validate knobs (KnobError) and give their layouts."""


@dataclass
class NodeConfig:
    """The configured candidate of one layout node.

    Parameters
    ----------
    op : Op or str
        One of :data:`graphtune.ops.NODE_OPS` (stored as an :class:`~graphtune.ops.Op`).
    workload : dict or None
        The node's workload (shared contract format). For a join,
        ``{"inputs": [names of the nodes feeding it]}`` (checked against a
        layout graph's edges) or ``None``; the compiler finds a join by its
        name either way.
    in_layout, out_layout : str
        Data layouts the node reads and writes (``NCHW``, ``NCHW{x}c`` or ``NC``).
    knobs : dict
        Schedule knobs of the node (empty for joins).
    cost_ms : float or None, optional
        Measured kernel cost of the candidate, if known.

    Examples
    --------
    >>> NodeConfig("join", None, "NCHW8c", "NCHW8c", {}).to_dict()["op"]
    'join'
    """

    op: Op
    workload: dict | None
    in_layout: str
    out_layout: str
    knobs: dict = field(default_factory=dict)
    cost_ms: float | None = None

    def __post_init__(self) -> None:
        try:
            self.op = as_op(self.op, NODE_OPS)
        except ValueError as err:
            raise ConfigError(f"node op: {err}") from None

    def to_dict(self) -> dict:
        """JSON-able dict of this node (the value under ``nodes.<name>``).

        Examples
        --------
        >>> sorted(NodeConfig("join", None, "NCHW", "NCHW", {}).to_dict())
        ['cost_ms', 'in_layout', 'knobs', 'op', 'out_layout', 'workload']
        """
        return {
            "op": self.op,
            "workload": self.workload,
            "in_layout": self.in_layout,
            "out_layout": self.out_layout,
            "knobs": dict(self.knobs),
            "cost_ms": self.cost_ms,
        }

    @classmethod
    def from_dict(cls, name: str, data: Any) -> "NodeConfig":
        """Parse and validate the dict stored under ``nodes.<name>``.

        Raises
        ------
        ConfigError
            Naming the field ``nodes.<name>.<field>`` that is missing or malformed.
        LayoutError
            If a layout name is unknown.

        Examples
        --------
        >>> NodeConfig.from_dict("j", {"op": "join", "in_layout": "NCHW",
        ...                           "out_layout": "NCHW"}).in_layout
        'NCHW'
        """
        where = f"nodes.{name}"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
        try:
            op = as_op(data.get("op"), NODE_OPS)
        except ValueError as err:
            raise ConfigError(f"{where}.op: {err}") from None
        workload = data.get("workload")
        if op != Op.JOIN:
            _check_workload(f"{where}.workload", op, workload)
        elif workload is not None and not isinstance(workload, Mapping):
            raise ConfigError(f"{where}.workload: expected an object or null for a join")
        elif workload is not None and "inputs" in workload:
            inputs = workload["inputs"]
            if not (isinstance(inputs, list) and all(isinstance(i, str) for i in inputs)):
                raise ConfigError(f"{where}.workload.inputs: expected a list of node names "
                                  f"(strings), got {inputs!r}")
        layouts = {}
        for key in ("in_layout", "out_layout"):
            value = data.get(key)
            if not isinstance(value, str):
                raise ConfigError(f"{where}.{key}: expected a layout name string, got {value!r}")
            try:
                layouts[key] = check_layout(value)
            except LayoutError as err:
                raise LayoutError(f"{where}.{key}: {err}") from None
        if op == Op.DENSE and layouts not in [{"in_layout": d, "out_layout": d} for d in (DENSE, PLAIN)]:
            raise ConfigError(f"{where}: a dense node's layouts must both be {DENSE!r} "
                              f"({PLAIN!r} for rank-3/4 data)")
        knobs = data.get("knobs", {})
        if not isinstance(knobs, Mapping):
            raise ConfigError(f"{where}.knobs: expected an object, got {type(knobs).__name__}")
        cost = data.get("cost_ms")
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))):
            raise ConfigError(f"{where}.cost_ms: expected a number or null, got {cost!r}")
        return cls(op, _plain(workload), layouts["in_layout"], layouts["out_layout"],
                   _plain(knobs), None if cost is None else float(cost))


def _plain(value: Any) -> Any:
    """Deep copy of a JSON-like value with tuples turned into lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _check_workload(where: str, op: Op, workload: Any) -> None:
    """Raise ConfigError naming the first missing or invalid workload field."""
    if not isinstance(workload, Mapping):
        raise ConfigError(f"{where}: expected an object, got {type(workload).__name__}")
    try:
        check_workload(dict(workload), op, where)
    except ModelError as err:
        raise ConfigError(str(err)) from None


def _first_difference(expected: Any, found: Any, path: tuple = ()) -> tuple | None:
    """Key path of the first place where two JSON-like values differ, or None."""
    if isinstance(expected, Mapping) and isinstance(found, Mapping):
        for key in list(expected) + [k for k in found if k not in expected]:
            if key not in found or key not in expected:
                return path + (key,)
            diff = _first_difference(expected[key], found[key], path + (key,))
            if diff is not None:
                return diff
        return None
    if isinstance(expected, (list, tuple)) and isinstance(found, (list, tuple)):
        return None if _plain(expected) == _plain(found) else path
    return None if expected == found else path


def _lookup(data: Any, path: tuple) -> Any:
    """Value at a key path inside nested dicts, or ``'<absent>'``."""
    for key in path:
        if not isinstance(data, Mapping) or key not in data:
            return "<absent>"
        data = data[key]
    return data


class Config:
    """Layouts and knobs for every layout node of one model.

    Parameters
    ----------
    nodes : dict of str to NodeConfig
        Configured nodes keyed by their stable node names.
    target : dict, optional
        JSON description of the target the config was tuned for
        (:func:`graphtune.x86.target_key`).
    model : dict, optional
        ``{"name": ..., "fingerprint": ...}`` of the model the config is for.
    solution : dict, optional
        Summary of the solve that produced the config (method, optimality, gap,
        predicted/kernel/transform ms, solve seconds).

    Examples
    --------
    >>> cfg = Config({}, model={"name": "empty"})
    >>> cfg.to_dict()["format"]
    'graphtune.config'
    """

    def __init__(self, nodes: Mapping[str, NodeConfig], target: dict | None = None,
                 model: dict | None = None, solution: dict | None = None):
        self.nodes = nodes
        self.target = target
        self.model = model
        self.solution = solution

    def __repr__(self) -> str:
        name = (self.model or {}).get("name")
        return f"Config(model={name!r}, nodes={len(self.nodes)})"

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict:
        """The JSON document of this config.

        Examples
        --------
        >>> Config({}).to_dict()["version"]
        1
        """
        return {
            "format": FORMAT,
            "version": VERSION,
            "target": _plain(self.target),
            "model": _plain(self.model),
            "solution": _plain(self.solution),
            "nodes": {name: node.to_dict() for name, node in self.nodes.items()},
        }

    @classmethod
    def from_dict(cls, data: Any) -> "Config":
        """Build a config from its JSON document, validating every field.

        Raises
        ------
        ConfigError
            Naming the first missing or malformed field (``nodes.<name>.<field>``...).
        LayoutError
            If a node names an unknown layout.

        Examples
        --------
        >>> Config.from_dict({"format": "graphtune.config", "version": 1, "nodes": {}})
        Config(model=None, nodes=0)
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"config: expected a JSON object, got {type(data).__name__}")
        if data.get("format") != FORMAT:
            raise ConfigError(f"format: expected {FORMAT!r}, got {data.get('format')!r}; "
                              "is this a graphtune config file?")
        if data.get("version") != VERSION:
            raise ConfigError(f"version: this graphtune reads version {VERSION}, "
                              f"got {data.get('version')!r}")
        for key in ("target", "model", "solution"):
            if data.get(key) is not None and not isinstance(data[key], Mapping):
                raise ConfigError(f"{key}: expected an object or null, got {data[key]!r}")
        nodes = data.get("nodes")
        if not isinstance(nodes, Mapping):
            raise ConfigError(f"nodes: expected an object mapping node names to nodes, got {nodes!r}")
        parsed = {str(name): NodeConfig.from_dict(name, value) for name, value in nodes.items()}
        return cls(parsed, _plain(data.get("target")), _plain(data.get("model")),
                   _plain(data.get("solution")))

    def save(self, path: str | os.PathLike) -> None:
        """Write the config as indented JSON to ``path``.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "m.graphtune.json"
        >>> Config({}, model={"name": "m"}).save(path)
        >>> Config.load(path).model["name"]
        'm'
        """
        text = json.dumps(self.to_dict(), indent=1)
        with open(path, "w", encoding="utf-8") as file:
            file.write(text + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Config":
        """Read and validate a config file.

        Raises
        ------
        ConfigError
            If the file is missing, is not JSON (message gives line and column), or a
            field is malformed.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "bad.json"
        >>> _ = path.write_text('{"format": "graphtune.config", "version": 1, "nodes": []}')
        >>> try:
        ...     Config.load(path)
        ... except ConfigError as err:
        ...     print(str(err).split(":")[1].strip())
        nodes
        """
        try:
            with open(path, encoding="utf-8") as file:
                data = json.load(file)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such config file") from None
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}: not valid JSON at line {err.lineno} column {err.colno}: "
                              f"{err.msg}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a config file (binary, not UTF-8 JSON)") from None
        except OSError as err:  # a folder, no permission...
            raise ConfigError(f"{path}: cannot read the config file ({err.strerror})") from None
        try:
            return cls.from_dict(data)
        except ConfigError as err:
            raise type(err)(f"{path}: {err}") from None

    # --------------------------------------------------------- construction
    @classmethod
    def uniform(cls, model: Any, block: int = 16, target: Any = None) -> "Config":
        """Config giving every layout node the same channel block: :func:`graphtune.baselines.uniform`.

        Examples
        --------
        >>> from graphtune import models
        >>> cfg = Config.uniform(models.get("resnet18", image_size=32))
        >>> cfg.nodes["conv1"].in_layout, cfg.nodes["conv1"].out_layout
        ('NCHW3c', 'NCHW16c')
        """
        from .baselines import uniform  # needs the frontend and x86 (TVM): loaded on use only

        return uniform(model, block, target)

    @classmethod
    def random(cls, model: Any, seed: int = 0, target: Any = None) -> "Config":
        """Config picking a random candidate per node: :func:`graphtune.baselines.random`.

        Examples
        --------
        >>> from graphtune import models
        >>> cfg = Config.random(models.get("resnet18", image_size=32), seed=1)
        >>> cfg.solution
        {'method': 'random', 'seed': 1}
        """
        from .baselines import random  # needs the frontend and x86 (TVM): loaded on use only

        return random(model, seed, target)

    @classmethod
    def from_solution(cls, graph: Any, solution: Any, target: Any = None,
                      model_name: str | None = None) -> "Config":
        """Config of the candidates a solver picked on a layout graph.

        Parameters
        ----------
        graph : graphtune.graph.LayoutGraph
            The solved graph (its nodes carry workloads and candidates).
        solution : graphtune.solve.Solution
            ``assignment`` maps every node to a candidate index.
        target : dict, optional
            JSON description of the target the costs were measured on
            (:func:`graphtune.x86.target_key`), recorded in the file.
        model_name : str, optional
            Name recorded under ``model.name``.

        Examples
        --------
        >>> import os, tempfile, graphtune
        >>> records = os.path.join(tempfile.gettempdir(), "graphtune-doctest-resnet18-32.records.jsonl")
        >>> result = graphtune.tune("resnet18", image_size=32, max_candidates=2, records=records)
        >>> from graphtune import solve
        >>> cfg = Config.from_solution(result.graph, solve(result.graph), model_name="resnet18")
        >>> cfg.solution["optimal"], cfg.nodes["conv1"].op
        (True, 'conv2d')
        """
        nodes = {}
        kernel_ms = 0.0
        for name in graph.nodes:
            op = graph.op(name)
            if op not in NODE_OPS:
                continue
            if name not in solution.assignment:
                raise ConfigError(f"solution: node {name!r} of the graph has no assignment; "
                                  "solve the same graph you pass here")
            cand = graph.candidates(name)[solution.assignment[name]]
            cost = float(cand.cost)
            kernel_ms += 0.0 if math.isnan(cost) else cost
            nodes[name] = NodeConfig(op, graph_workload(graph, name), cand.in_layout,
                                     cand.out_layout, _plain(cand.knobs),
                                     None if math.isnan(cost) else cost)
        energy = float(solution.energy)
        gap = float(solution.relative_gap)
        transform_ms = graph.transform_cost(solution.assignment)
        fixed_ms = sum(float(graph.candidates(n)[solution.assignment[n]].cost) for n in graph.nodes
                       if graph.op(n) not in NODE_OPS and n in solution.assignment)
        if target is not None and not isinstance(target, Mapping):
            raise ConfigError(f"target: expected the target's JSON description (a dict, see "
                              f"graphtune.x86.target_key), got {type(target).__name__}")
        return cls(
            nodes,
            target=_plain(target),
            model={"name": model_name, "fingerprint": graph.fingerprint()},
            solution={"method": solution.method, "optimal": bool(solution.optimal), "gap": gap,
                      "predicted_ms": kernel_ms + fixed_ms + transform_ms, "kernel_ms": kernel_ms,
                      "transform_ms": transform_ms, "objective_ms": energy,
                      "solve_s": float(solution.seconds)},
        )

    # ----------------------------------------------------------- validation
    def check(self, model: Any) -> list[str]:
        """Check this config against a model; return the model nodes it does not mention.

        Parameters
        ----------
        model : LayoutGraph, list of LayoutOp, IRModule, onnx.ModelProto or path
            The model the config is applied to. A LayoutGraph is also checked by
            fingerprint; otherwise the layout ops are compared node by node.

        Returns
        -------
        list of str
            Names of the model's layout nodes absent from the config, in model order.

        Raises
        ------
        ConfigMismatchError
            Naming the first node that differs (unknown to the model, other op,
            other workload field) — the config was made for another model.
        KnobError
            If a node's knobs are invalid for its workload.
        ConfigError
            If a node's layouts do not follow from its knobs.

        Examples
        --------
        >>> from graphtune import models
        >>> model = models.get("resnet18", image_size=32)
        >>> Config.uniform(model).check(model)
        []
        """
        from .bind import model_nodes, x86_knobs  # the frontend and x86 (TVM): loaded on use only

        nodes, fingerprint = model_nodes(model)
        return self.check_nodes(nodes, fingerprint, x86_knobs)

    def check_nodes(self, ops: Iterable[ModelNode], fingerprint: str | None = None,
                    knobs: KnobCheck | None = None) -> list[str]:
        """Check this config against a model's layout nodes; return those it does not mention.

        :meth:`check` with the model already read: no TVM needed.

        Parameters
        ----------
        ops : iterable of (name, op, workload)
            The model's layout nodes (joins with ``{"inputs": [...]}`` or no workload).
        fingerprint : str, optional
            The model's layout graph fingerprint, compared when every node matches.
        knobs : callable, optional
            ``fn(op, workload, knobs) -> (in_layout, out_layout)`` validating a
            node's knobs (:func:`graphtune.bind.x86_knobs`); None skips knob checks.

        Raises
        ------
        ConfigMismatchError, KnobError, ConfigError
            As :meth:`check`.

        Examples
        --------
        >>> node = NodeConfig("dense", {"data": [1, 8], "weight": [4, 8], "dtype": "float32"},
        ...                   "NC", "NC", {"oc_bn": 4, "k_bn": 8})
        >>> Config({"fc": node}).check_nodes([("fc", "dense", node.workload), ("fc2", "dense", node.workload)])
        ['fc2']
        """
        ops = [(name, Op(op), workload) for name, op, workload in ops]
        by_name = {name: (op, workload) for name, op, workload in ops}
        has_joins = any(op == Op.JOIN for _, op, _ in ops)
        for name, node in self.nodes.items():
            if node.op == Op.JOIN and not has_joins:
                continue  # layout ops alone do not list joins: nothing to check them against
            if name not in by_name:
                known = ", ".join(list(by_name)[:5])
                raise ConfigMismatchError(
                    f"nodes.{name}: the model has no layout node of that name (its nodes are "
                    f"{known}, ...); the config was made for another model — re-tune it for "
                    "this one")
        missing = []
        for name, op, workload in ops:
            node = self.nodes.get(name)
            if node is None:
                missing.append(name)
                continue
            if node.op != op:
                raise ConfigMismatchError(
                    f"nodes.{name}.op: config has {node.op!r}, the model has {op!r}; the config "
                    "was made for another model — re-tune it for this one")
            diff = _first_difference(workload, node.workload)
            if diff is not None:
                field_path = "".join(f".{key}" for key in diff)
                raise ConfigMismatchError(
                    f"nodes.{name}.workload{field_path}: config has "
                    f"{_lookup(node.workload, diff)}, the model has {_lookup(workload, diff)}; "
                    "the config was made for another model or input size — re-tune it for "
                    "this one")
            if op != Op.JOIN and knobs is not None:
                _check_knobs(name, node, knobs)
        own = (self.model or {}).get("fingerprint")
        if fingerprint is not None and own and own != fingerprint and not missing:
            raise ConfigMismatchError(
                f"model.fingerprint: config has {own[:12]}..., the model's layout graph has "
                f"{fingerprint[:12]}...; every node matches but the graph's edges differ — "
                "re-tune it for this model")
        return missing


def _check_knobs(name: str, node: NodeConfig, knobs: KnobCheck) -> None:
    """Raise if a node's knobs are invalid or disagree with its layouts."""
    try:
        layouts = tuple(knobs(node.op, node.workload, node.knobs))
    except (KnobError, ModelError) as err:
        raise type(err)(f"nodes.{name}.knobs: {err}") from None
    if layouts != (node.in_layout, node.out_layout):
        raise ConfigError(
            f"nodes.{name}: layouts {node.in_layout} -> {node.out_layout} do not follow from "
            f"its knobs {node.knobs} (they give {layouts[0]} -> {layouts[1]}); fix the "
            "layouts or the knobs")


def graph_workload(graph: Any, name: str) -> dict | None:
    """A node's workload as a config stores it; for a join, ``{"inputs": [the nodes feeding it, sorted]}``.

    The inputs make the config check see a join rewired; the compiler finds it by name.

    Examples
    --------
    >>> from graphtune.graph import LayoutGraph
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[0.0], op="boundary")
    >>> g.add_node("j", costs=[0.0], op="join")
    >>> g.add_edge("a", "j", shape=[1, 8, 2, 2])
    >>> graph_workload(g, "j")
    {'inputs': ['a']}
    """
    if graph.op(name) == Op.JOIN:
        return {"inputs": sorted(graph.nx.predecessors(name))}
    return _plain(graph.workload(name))
