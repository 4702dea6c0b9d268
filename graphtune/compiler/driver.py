"""``compile(model, config)``: apply a Config to a model and build it with TVM.

Steps: import the model into Relax, list its layout nodes
with :func:`graphtune.frontend.layout_ops`, check the config against them
(a mismatch raises before anything reaches TVM), plan every node (configured
knobs, or the default candidate with one warning listing the unmentioned
nodes), rewrite the module to the planned layouts, legalize/fuse/schedule it
with graphtune's x86 kernels and ``tvm.compile`` it.

Examples
--------
>>> import numpy as np
>>> from graphtune import models
>>> from graphtune.config import Config
>>> model = models.get("resnet18", image_size=32)
>>> compiled = compile(model, Config.uniform(model))
>>> compiled(np.zeros((1, 3, 32, 32), "float32")).shape
(1, 1000)
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import onnx
import tvm
from tvm import relax

from .. import frontend, x86
from ..config import Config
from ..errors import CompileError, ConfigError, ConfigMismatchError, GraphtuneError
from ..frontend.cut import import_or_cut
from ..frontend.roles import Role
from ..ops import runs_as
from .int8_epilogue import fold_into_kernels
from .legalize import legalize, schedule_counts
from .lut import lookup_tables
from .model import CompiledModel
from .partitioned import PartitionedModel
from .reciprocal import reciprocal_scales
from .rewrite import NodePlan, rewrite
from .sites import sites_of

__all__ = ["compile", "rewrite_model", "plan_nodes", "plan_joins", "DEFAULT_BLOCK"]

DEFAULT_BLOCK = 16
"""Channel block of the default candidate given to nodes a config does not mention."""


def plan_nodes(ops: list, config: Config, target: tvm.target.Target) -> dict:
    """Plan of every layout node: the config's choice, or the default candidate.

    Nodes the x86 kernels do not support are not planned and keep
    plain ``NCHW``. Unmentioned supported nodes get
    :func:`graphtune.x86.default_knobs` with block :data:`DEFAULT_BLOCK` and one
    ``UserWarning`` naming all of them.

    Returns
    -------
    dict of relax.Var to NodePlan

    Examples
    --------
    >>> from graphtune import models, x86
    >>> from graphtune.frontend import import_model, layout_ops
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> plans = plan_nodes(layout_ops(mod), Config.uniform(mod), x86.host_target())
    >>> sorted({plan.out_layout for plan in plans.values()})
    ['NC', 'NCHW16c']
    """
    plans, missing = {}, []
    for op in ops:
        if op.op not in x86.SPECS:
            continue
        node = config.nodes.get(op.name)
        if node is None:
            missing.append(op.name)
            knobs = x86.default_knobs(op.workload, block=DEFAULT_BLOCK, target=target, op=op.op)
            in_layout, out_layout = x86.layouts_of(op.workload, knobs, op=op.op)
        else:
            knobs, in_layout, out_layout = node.knobs, node.in_layout, node.out_layout
        kind, workload, kernel_knobs = runs_as(op.op, op.workload, knobs)  # a quantized conv may run fp32
        plans[op.var] = NodePlan(op.name, kind, workload, kernel_knobs, in_layout, out_layout,
                                 op.quant if kind == op.op else None)
    if missing:
        shown = ", ".join(missing[:20]) + (", ..." if len(missing) > 20 else "")
        warnings.warn(f"config does not mention {len(missing)} layout node(s), which get the "
                      f"default candidate (block {DEFAULT_BLOCK}): {shown}", UserWarning,
                      stacklevel=4)  # plan_nodes < rewrite_model < compile < the caller
    return plans


def plan_joins(config: Config, steps: Sequence | None = None) -> dict[str, str]:
    """Configured joins: each join's name (its walk ``Step.name``) to its common layout.

    Parameters
    ----------
    config : Config
        The config; its ``join`` nodes are keyed by the join's own name. Config
        files that also list a join's ``workload.inputs`` (written before joins
        were keyed by name) load and compile the same: the names are the walk's.
    steps : sequence of Step, optional
        ``walk`` of the model: when given, a join the model does not have is
        an error.

    Raises
    ------
    ConfigMismatchError
        A configured join is not a join of the model (``steps`` given).

    Examples
    --------
    >>> from graphtune.config import NodeConfig
    >>> node = NodeConfig("join", {"inputs": ["a", "b"]}, "NCHW8c", "NCHW8c", {})
    >>> plan_joins(Config({"add_0": node}))
    {'add_0': 'NCHW8c'}
    """
    joins = {name: node.out_layout for name, node in config.nodes.items() if node.op == "join"}
    if steps is not None:
        known = [s.name for s in steps if s.role is Role.JOIN]
        unknown = sorted(set(joins) - set(known))
        if unknown:
            shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "") or "none"
            raise ConfigMismatchError(
                f"nodes.{unknown[0]}: the model has no join of that name (its joins are {shown}); "
                "the config was made for another model — re-tune it for this one")
    return joins


def rewrite_model(mod: tvm.IRModule, config: Config,
                  target: tvm.target.Target) -> tuple[tvm.IRModule, dict, list[str]]:
    """The rewrite :func:`compile` legalizes and builds: check, plan, rewrite.

    Returns
    -------
    tvm.IRModule
        ``mod`` rewritten to the config's layouts (its layout transforms are
        the ones the compiled model runs, fused or not).
    dict of Constant to NodePlan
        The anchors for :func:`~graphtune.compiler.legalize.legalize`.
    list of str
        The layout nodes' names, in model order.

    Examples
    --------
    >>> from graphtune import models, x86
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> new_mod, anchors, names = rewrite_model(mod, Config.uniform(mod), x86.host_target())
    >>> len(anchors), names[0]
    (21, 'conv1')
    """
    steps = frontend.walk(mod)
    ops = [step.layout_op for step in steps if step.role is Role.LAYOUT and step.layout_op is not None]
    config.check(ops)
    plans = plan_nodes(ops, config, target)
    new_mod, anchors = rewrite(mod, plans, plan_joins(config, steps), steps)
    return fold_into_kernels(reciprocal_scales(lookup_tables(new_mod))), anchors, [op.name for op in ops]


def _warn_generic(schedules: dict[str, dict[str, int]]) -> None:
    """One warning naming the op kinds of which some function got only the generic schedule."""
    generic = {op: per_op["generic"] for op, per_op in schedules.items() if "generic" in per_op}
    if generic:
        shown = ", ".join(f"{op} ({count}x)" for op, count in generic.items())
        warnings.warn(f"graphtune has no schedule made for {shown}: they run graphtune's generic "
                      "parallel schedule, correct but likely slower than a tuned kernel "
                      "(CompiledModel.schedules has the counts)", UserWarning, stacklevel=3)


def _output_names(model: Any, mod: tvm.IRModule) -> list[str]:
    """Graph output names of an ONNX model, else ``output0``, ``output1``..."""
    graph = getattr(model, "graph", None)
    if graph is None and isinstance(model, (str, os.PathLike)):
        graph = onnx.load(os.fspath(model), load_external_data=False).graph
    if graph is not None:
        return [value.name for value in graph.output]
    ret = mod["main"].ret_ty
    count = len(ret.fields) if isinstance(ret, relax.TupleType) else 1
    return [f"output{i}" for i in range(count)]


def _tvm_stage(stage: str, names: list[str], fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, with any non-graphtune error turned into a CompileError that
    names the stage and the first layout node the error message mentions."""
    try:
        return fn(*args, **kwargs)
    except GraphtuneError:
        raise
    except Exception as err:  # TVMError, TypeError... from deep inside TVM
        lines = str(err).strip().splitlines()
        text = "\n".join(lines)
        node = next((n for n in sorted(names, key=len, reverse=True) if n in text), None)
        where = f" at ONNX node {node!r}" if node else ""
        raise CompileError(f"compile: TVM failed while {stage} the model{where} "
                           f"({type(err).__name__}: {lines[0] if lines else ''}); check the model "
                           "with onnxruntime and report it") from None


def compile(model: Any, config: Config | str, target: Any = None, *,
            shape_dict: Mapping[str, Sequence[int]] | None = None) -> CompiledModel:
    """Compile ``model`` with the layouts and knobs of ``config`` for the x86 CPU ``target``.

    Parameters
    ----------
    model : onnx.ModelProto, path to an ``.onnx`` file, or tvm.IRModule
        The model (see :func:`graphtune.frontend.import_model`).
    config : Config or path
        The per-node choices; a path is read with :meth:`Config.load`.
    target : tvm.target.Target or dict, optional
        Default: this host (:func:`graphtune.x86.host_target`).
    shape_dict : mapping of str to list of int, optional
        Static shapes of ONNX inputs with dynamic dimensions.

    Returns
    -------
    CompiledModel
        A :class:`PartitionedModel` (a CompiledModel) for an ONNX model TVM imports only in part
        (``docs/partition.md``): TVM compiles that part with ``config``, ONNX Runtime runs
        the rest.

    Raises
    ------
    ConfigMismatchError
        The config was made for another model, a node's workload differs, or the config
        records another partition (names the node).
    ConfigError, LayoutError, KnobError
        Malformed config, unknown layout, or knobs invalid for a node.
    CompileError
        TVM failed on the model; names the ONNX node where it can be found.

    Examples
    --------
    >>> from graphtune import models
    >>> model = models.get("mobilenet_v2", image_size=32)
    >>> compiled = compile(model, Config.random(model, seed=0))
    >>> compiled.input_names, compiled.output_names
    (['input'], ['output'])
    """
    start = time.perf_counter()
    if not isinstance(config, Config):
        if isinstance(config, (dict, list)) or config is None:
            raise ConfigError(f"config: expected a graphtune.Config or a path to a config file, "
                              f"got {type(config).__name__}")
        config = Config.load(config)
    tgt = x86.host_target(target)
    tuned_for = (config.target or {}).get("mcpu")
    if tuned_for is not None and tuned_for != x86.target_key(tgt)["mcpu"]:
        warnings.warn(f"config was tuned for mcpu {tuned_for!r} but is compiled for "
                      f"{x86.target_key(tgt)['mcpu']!r}: results are correct, its choices may "
                      "not be the fastest here — re-tune on this machine", UserWarning,
                      stacklevel=2)
    mod, part = import_or_cut(model, shape_dict, config)
    if part is not None:  # TVM imports only part of it: TVM compiles that, ONNX Runtime the rest
        part.check(config)
        regions = [compile(region.static_model(), part.region_config(config, k), tgt)
                   for k, region in enumerate(part.regions)]
        return PartitionedModel(compile(part.tvm_model, part.tvm_config(config), tgt,
                                        shape_dict=part.tvm_shapes), part, regions=regions)
    new_mod, anchors, names = rewrite_model(mod, config, tgt)
    lowered = _tvm_stage("legalizing and scheduling", names, legalize, new_mod, anchors, tgt)
    schedules = schedule_counts(lowered)
    _warn_generic(schedules)
    executable = _tvm_stage("building", names, tvm.compile, lowered, target=tgt,
                            tir_pipeline=x86.lowering.PIPELINE)
    main = mod["main"]
    inputs = [(param.name, [int(d) for d in param.ty.shape.values], str(param.ty.dtype))
              for param in main.params]
    return CompiledModel(executable, inputs, _output_names(model, mod), tgt,
                         compile_seconds=time.perf_counter() - start, schedules=schedules,
                         call_sites=sites_of(lowered),
                         functions={gvar.name_hint: func for gvar, func in lowered.functions.items()
                                    if isinstance(func, tvm.tirx.PrimFunc)})
