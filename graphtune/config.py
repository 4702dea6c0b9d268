"""The config file: per-node layouts and schedule knobs chosen for one model.

A :class:`Config` is what graph tuning produces and what
:func:`graphtune.compile` consumes. On disk it is the JSON document described
in ``docs/files.md`` (``*.graphtune.json``)::

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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, cast

from . import safejson
from .errors import ConfigError, ConfigMismatchError, KnobError, LayoutError, ModelError
from .graph import LayoutGraph
from .layouts import DENSE, PLAIN, check_layout
from .ops import NODE_OPS, ModelNode, Op, Workload, as_op, check_workload
from .taps import without_dead_taps

if TYPE_CHECKING:
    from .solve import Solution

__all__ = ["FORMAT", "VERSION", "NodeConfig", "Config", "KnobCheck", "ModelNode", "graph_nodes",
           "graph_workload"]

FORMAT = "graphtune.config"
"""Value of the ``format`` field of every config file."""

VERSION = 1
"""The config format version this module reads and writes."""

KnobCheck = Callable[[Op, Workload, dict[str, Any]], tuple[str, str]]
"""``fn(op, workload, knobs) -> (in_layout, out_layout)``: validate knobs (KnobError) and give
their layouts."""

MAX_FILE_CHARS = 32 << 20
"""Largest config file read (characters); the configs of the largest zoo models are well under 1 MB."""

MAX_NAME = 4096
"""Longest node, model or op group name (characters) a config may hold."""

MAX_LAYOUT = 32
"""Longest layout name (characters): layouts are short names like ``NCHW16c``."""

MAX_INT = 2**31 - 1
"""Largest magnitude of a knob (or seed, block) in a config."""

_MS_FIELDS = ("predicted_ms", "kernel_ms", "ops_ms", "transform_ms", "objective_ms", "onnxruntime_ms")
"""Times of ``solution`` (ms): finite, at least 0 and at most :data:`graphtune.safejson.MAX_MS`."""

_SHOWN_WITH_PREDICTED = ("kernel_ms", "transform_ms", "method", "solve_s")
"""Fields of ``solution`` that ``graphtune show`` prints along with ``predicted_ms``."""


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
    workload: Workload | None
    in_layout: str
    out_layout: str
    knobs: dict[str, Any] = field(default_factory=dict)
    cost_ms: float | None = None

    def __post_init__(self) -> None:
        try:
            self.op = as_op(self.op, NODE_OPS)
        except ValueError as err:
            raise ConfigError(f"node op: {err}") from None

    def to_dict(self) -> dict[str, Any]:
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
        where = f"nodes.{_name(name)}"
        if not isinstance(name, str) or len(name) > MAX_NAME:
            raise ConfigError(f"{where}: a node name is a string of at most {MAX_NAME} characters")
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
                                  f"(strings), got {_short(inputs)}")
        layouts = {}
        for key in ("in_layout", "out_layout"):
            value = data.get(key)
            if not isinstance(value, str):
                raise ConfigError(f"{where}.{key}: expected a layout name string, got {_short(value)}")
            if len(value) > MAX_LAYOUT:
                raise ConfigError(f"{where}.{key}: a layout name of {len(value):,} characters; "
                                  "layouts are short names like 'NCHW16c'")
            try:
                layouts[key] = check_layout(value)
            except LayoutError as err:
                raise LayoutError(f"{where}.{key}: {err}") from None
        unblocked = [{"in_layout": d, "out_layout": d} for d in (DENSE, PLAIN)]
        if op in (Op.DENSE, Op.DENSE_INT8) and layouts not in unblocked:
            raise ConfigError(f"{where}: a dense node's layouts must both be {DENSE!r} "
                              f"({PLAIN!r} for rank-3/4 data)")
        knobs = data.get("knobs", {})
        if not isinstance(knobs, Mapping):
            raise ConfigError(f"{where}.knobs: expected an object, got {type(knobs).__name__}")
        for knob, value in knobs.items():
            if not _scalar(value):
                raise ConfigError(f"{where}.knobs.{_name(knob)}: expected a number (at most "
                                  f"{MAX_INT} in magnitude), true/false or a short string, got "
                                  f"{_short(value)}")
        cost = data.get("cost_ms")
        if cost is not None and not safejson.bounded_ms(cost):
            raise ConfigError(f"{where}.cost_ms: expected null or a time in ms (a finite number "
                              f"from 0 to {safejson.MAX_MS:g}), got {_short(cost)}")
        return cls(op, _plain(workload), layouts["in_layout"], layouts["out_layout"],
                   _plain(knobs), None if cost is None else float(cost))


def _known(ms: float) -> float:
    """``ms``, or 0 for a cost not measured (NaN)."""
    return 0.0 if math.isnan(ms) else ms


def _name(name: Any) -> str:
    """A name as a message shows it: escaped (:func:`graphtune.safejson.printable`), cut to 100."""
    text = safejson.printable(name)
    return text if len(text) <= 100 else text[:97] + "..."


def _short(value: Any) -> str:
    """``repr(value)`` for a message: at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _scalar(value: Any) -> bool:
    """True for a knob value: a bool, an int of at most :data:`MAX_INT`, a finite float, a short string."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) <= MAX_INT
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) <= MAX_INT
    return isinstance(value, str) and len(value) <= MAX_LAYOUT


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and dicts nest more than ``limit`` deep in ``value`` (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, Mapping):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (Mapping, list, tuple)))
    return False


def _check_header(key: str, value: Any) -> None:
    """Raise ConfigError naming the first malformed field under ``target``, ``model`` or ``solution``."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected an object or null, got {_short(value)}")
    strings = {"target": ("mcpu",), "model": ("name", "fingerprint"),
               "solution": ("method",)}[key]
    for name in strings:
        field_value = value.get(name)
        if field_value is not None and not (isinstance(field_value, str)
                                            and len(field_value) <= MAX_NAME):
            raise ConfigError(f"{key}.{name}: expected a string (at most {MAX_NAME} characters) "
                              f"or null, got {_short(field_value)}")
    if key != "solution":
        return
    for name in _MS_FIELDS:
        if name in value and not safejson.bounded_ms(value[name]):
            raise ConfigError(f"solution.{name}: expected a time in ms (a finite number from 0 "
                              f"to {safejson.MAX_MS:g}), got {_short(value[name])}")
    for name in ("gap", "solve_s"):
        if name in value and not safejson.bounded_ms(value[name]):
            raise ConfigError(f"solution.{name}: expected a finite number from 0 to "
                              f"{safejson.MAX_MS:g}, got {_short(value[name])}")
    if "optimal" in value and not isinstance(value["optimal"], bool):
        raise ConfigError(f"solution.optimal: expected true or false, got {_short(value['optimal'])}")
    for name in ("seed", "block"):
        if name in value and (isinstance(value[name], bool) or not isinstance(value[name], int)
                              or abs(value[name]) > MAX_INT):
            raise ConfigError(f"solution.{name}: expected an integer (at most {MAX_INT} in "
                              f"magnitude), got {_short(value[name])}")
    if "predicted_ms" in value:
        missing = [name for name in _SHOWN_WITH_PREDICTED if name not in value]
        if missing:
            raise ConfigError(f"solution.{missing[0]}: missing; a solution with predicted_ms "
                              f"also has {', '.join(_SHOWN_WITH_PREDICTED)}")
    groups = value.get("op_groups")
    if groups is None:
        return
    if not isinstance(groups, list):
        raise ConfigError(f"solution.op_groups: expected a list, got {_short(groups)}")
    for i, group in enumerate(groups):
        if not (isinstance(group, list) and len(group) == 4
                and (group[0] is None or (isinstance(group[0], str) and len(group[0]) <= MAX_NAME))
                and isinstance(group[1], str) and len(group[1]) <= MAX_LAYOUT
                and isinstance(group[2], str) and len(group[2]) <= MAX_NAME
                and safejson.bounded_ms(group[3])):
            raise ConfigError(f"solution.op_groups.{i}: expected [node or null, layout, label, "
                              f"ms] (ms a finite number from 0 to {safejson.MAX_MS:g}), got "
                              f"{_short(group)}")


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
    for key, value in workload.items():  # numbers, shapes and a dtype: nothing long
        items = value if isinstance(value, list) else [value]
        if any(isinstance(v, (str, list, Mapping)) and len(v) > MAX_LAYOUT for v in items) \
                or len(items) > MAX_LAYOUT:
            raise ConfigError(f"{where}.{_name(key)}: expected a number, a shape or a dtype, got "
                              f"{_short(value)}")
    try:
        check_workload(dict(workload), op, where)
    except ModelError as err:
        raise ConfigError(str(err)) from None


def _first_difference(expected: Any, found: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
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


def _lookup(data: Any, path: tuple[Any, ...]) -> Any:
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

    def __init__(self, nodes: Mapping[str, NodeConfig], target: dict[str, Any] | None = None,
                 model: dict[str, Any] | None = None, solution: dict[str, Any] | None = None):
        self.nodes = nodes
        self.target = target
        self.model = model
        self.solution = solution

    def __repr__(self) -> str:
        name = (self.model or {}).get("name")
        return f"Config(model={name!r}, nodes={len(self.nodes)})"

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict[str, Any]:
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
            raise ConfigError(f"format: expected {FORMAT!r}, got {_short(data.get('format'))}; "
                              "is this a graphtune config file?")
        if data.get("version") != VERSION or isinstance(data.get("version"), bool):
            raise ConfigError(f"version: this graphtune reads version {VERSION}, "
                              f"got {_short(data.get('version'))}")
        for key in ("target", "model", "solution", "nodes"):
            if _deeper_than(data.get(key), safejson.MAX_DEPTH):
                raise ConfigError(f"{key}: nested more than {safejson.MAX_DEPTH} levels deep; "
                                  "not a graphtune config")
        for key in ("target", "model", "solution"):
            _check_header(key, data.get(key))
        nodes = data.get("nodes")
        if not isinstance(nodes, Mapping):
            raise ConfigError(f"nodes: expected an object mapping node names to nodes, got "
                              f"{_short(nodes)}")
        parsed = {str(name): NodeConfig.from_dict(name, value) for name, value in nodes.items()}
        return cls(parsed, _plain(data.get("target")), _plain(data.get("model")),
                   _plain(data.get("solution")))

    def save(self, path: str | os.PathLike[str]) -> None:
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
    def load(cls, path: str | os.PathLike[str]) -> "Config":
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
                text = file.read(MAX_FILE_CHARS + 1)  # bounded: /dev/zero never ends
            if len(text) > MAX_FILE_CHARS:
                raise ConfigError(f"{path}: more than {MAX_FILE_CHARS >> 20} MiB, far larger than "
                                  "any config; not a graphtune config file")
            data = safejson.loads(text, max_chars=MAX_FILE_CHARS)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such config file") from None
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}: not valid JSON at line {err.lineno} column {err.colno}: "
                              f"{err.msg}") from None
        except safejson.JSONLimitError as err:
            raise ConfigError(f"{path}: {err}, unlike any config; not a graphtune config "
                              "file") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a config file (binary, not UTF-8 JSON)") from None
        except OSError as err:  # a folder, no permission...
            raise ConfigError(f"{path}: cannot read the config file ({err.strerror})") from None
        try:
            return cls.from_dict(data)
        except (ConfigError, LayoutError) as err:  # every message names the file
            raise type(err)(f"{path}: {err}") from None

    # --------------------------------------------------------- construction
    @classmethod
    def uniform(cls, model: Any, block: int = 16, target: Any = None) -> "Config":
        """Config giving every layout node the same channel block and default knobs.

        A node whose channel counts ``block`` does not divide gets the divisor of
        its channels nearest to ``block`` (see :func:`graphtune.x86.default_knobs`);
        joins are left to the compiler. ``model`` is anything
        :func:`graphtune.frontend.import_model` accepts, ``target`` a
        ``tvm.target.Target`` or its dict (default: this host). Also
        :func:`graphtune.baselines.uniform`.

        Examples
        --------
        >>> from graphtune import models
        >>> cfg = Config.uniform(models.get("resnet18", image_size=32))
        >>> cfg.nodes["conv1"].in_layout, cfg.nodes["conv1"].out_layout
        ('NCHW3c', 'NCHW16c')
        """
        from .bind import uniform_nodes  # the frontend and x86 (TVM): loaded on use only

        return cls._of_parts(uniform_nodes(model, block, target), {"method": "uniform", "block": block})

    @classmethod
    def random(cls, model: Any, seed: int = 0, target: Any = None) -> "Config":
        """Config picking a random candidate of :func:`graphtune.x86.candidates` per node.

        Neighbouring nodes then rarely agree on a layout: a compiled model full of
        layout transforms, a contrast for benchmarks and a stress test for the
        compiler. Also :func:`graphtune.baselines.random`.

        Examples
        --------
        >>> from graphtune import models
        >>> cfg = Config.random(models.get("resnet18", image_size=32), seed=1)
        >>> cfg.solution
        {'method': 'random', 'seed': 1}
        """
        from .bind import random_nodes  # the frontend and x86 (TVM): loaded on use only

        return cls._of_parts(random_nodes(model, seed, target), {"method": "random", "seed": seed})

    @classmethod
    def _of_parts(cls, parts: Mapping[str, Any], solution: dict[str, Any]) -> "Config":
        """Config of the ``target``, ``model`` and ``nodes`` fields of a config document."""
        nodes = {name: NodeConfig(node["op"], _plain(node["workload"]), node["in_layout"],
                                  node["out_layout"], _plain(node["knobs"]))
                 for name, node in parts["nodes"].items()}
        return cls(nodes, target=parts["target"], model=parts["model"], solution=solution)

    @classmethod
    def from_solution(cls, graph: LayoutGraph, solution: Solution, target: Any = None,
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
        # costs not measured (NaN) count as 0, as for kernel_ms: the config states what is known
        energy = _known(float(solution.energy))
        gap = float(solution.relative_gap)
        transform_ms = _known(float(graph.transform_cost(solution.assignment)))
        fixed_ms = sum(_known(float(graph.candidates(n)[solution.assignment[n]].cost))
                       for n in graph.nodes if graph.op(n) not in NODE_OPS and n in solution.assignment)
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
            The model the config is applied to. A LayoutGraph (no TVM needed but for
            the knobs) is also checked by fingerprint and lists its joins; otherwise the
            layout ops the frontend reads are compared node by node.

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

        if isinstance(model, LayoutGraph):
            return self.check_nodes(graph_nodes(model), model.fingerprint(), x86_knobs)
        return self.check_nodes(model_nodes(model), None, x86_knobs)

    def check_nodes(self, ops: Iterable[ModelNode], fingerprint: str | None = None,
                    knobs: KnobCheck | None = None) -> list[str]:
        """Check this config against a model's layout nodes; return those it does not mention.

        :meth:`check` with the model already read: no TVM needed. A conv whose workload differs
        from the model's only by the taps :func:`graphtune.taps.without_dead_taps` drops (a
        config tuned before graphtune dropped them) matches, and its knobs are checked on the
        model's workload.

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
        >>> Config({"fc": node}).check_nodes([("fc", "dense", node.workload),
        ...                                   ("fc2", "dense", node.workload)])
        ['fc2']
        """
        ops = [(name, Op(op), workload) for name, op, workload in ops]
        by_name = {name: (op, workload) for name, op, workload in ops}
        has_joins = any(op == Op.JOIN for _, op, _ in ops)
        for name, configured in self.nodes.items():
            if configured.op == Op.JOIN and not has_joins:
                continue  # layout ops alone do not list joins: nothing to check them against
            if name not in by_name:
                known = ", ".join(list(by_name)[:5])
                raise ConfigMismatchError(
                    f"nodes.{name}: the model has no layout node of that name (its nodes are "
                    f"{known}, ...); the config was made for another model — re-tune it for "
                    "this one")
        missing: list[str] = []
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
            if diff is not None and node.workload is not None \
                    and _first_difference(workload, without_dead_taps(node.workload)) is None:
                node = replace(node, workload=workload)  # tuned before graphtune dropped dead taps
                diff = None
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
        # a layout node's workload matched the model's (check_nodes), so it is not None
        layouts = tuple(knobs(node.op, cast(Workload, node.workload), node.knobs))
    except (KnobError, ModelError) as err:
        raise type(err)(f"nodes.{name}.knobs: {err}") from None
    if layouts != (node.in_layout, node.out_layout):
        raise ConfigError(
            f"nodes.{name}: layouts {node.in_layout} -> {node.out_layout} do not follow from "
            f"its knobs {node.knobs} (they give {layouts[0]} -> {layouts[1]}); fix the "
            "layouts or the knobs")


def graph_nodes(graph: LayoutGraph) -> list[ModelNode]:
    """``(name, op, workload)`` of every config node of a layout graph (joins included).

    Examples
    --------
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[0.0], op="boundary")
    >>> g.add_node("j", costs=[0.0], op="join")
    >>> g.add_edge("a", "j", shape=[1, 8, 2, 2])
    >>> graph_nodes(g)
    [('j', 'join', {'inputs': ['a']})]
    """
    return [(name, graph.op(name), graph_workload(graph, name))
            for name in graph.nodes if graph.op(name) in NODE_OPS]


def graph_workload(graph: LayoutGraph, name: str) -> Workload | None:
    """A node's workload as a config stores it; for a join, ``{"inputs": [the nodes feeding it, sorted]}``.

    The inputs make the config check see a join rewired; the compiler finds it by name.

    Examples
    --------
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[0.0], op="boundary")
    >>> g.add_node("j", costs=[0.0], op="join")
    >>> g.add_edge("a", "j", shape=[1, 8, 2, 2])
    >>> graph_workload(g, "j")
    {'inputs': ['a']}
    """
    if graph.op(name) == Op.JOIN:
        return {"inputs": sorted(graph.nx.predecessors(name))}
    workload: Workload | None = _plain(graph.workload(name))
    return workload
