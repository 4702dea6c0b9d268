"""Which bindings of the unfused module each call of the fused ``main`` computes.

``FuseOps`` groups bindings into functions; the grouped bindings keep their
variable names inside the new function except the group's output, which is
renamed (``gv``). :func:`call_sites` recovers, for every call of the fused
``main`` in call order, the names of the original bindings it computes (the
output matched by its PrimFunc and its use of a named member). Variable names
are what the importer gave them (ONNX node names for convs, matmuls and
joins; ``lv…`` otherwise), so :func:`graphtune.profile` can name the ONNX
nodes each run-time call executes. The VM calls PrimFuncs in this order.

Examples
--------
>>> from graphtune import Config, models, x86
>>> from graphtune.compiler.driver import rewrite_model
>>> from graphtune.compiler.legalize import legalize
>>> from graphtune.frontend import import_model
>>> mod = import_model(models.get("resnet18", image_size=32))
>>> new_mod, anchors, _ = rewrite_model(mod, Config.uniform(mod), x86.host_target())
>>> sites_of(legalize(new_mod, anchors, x86.host_target()))[1]
('fused_gt_conv1_add_relu', ['conv1', 'lv2', 'lv3'])
"""

from __future__ import annotations

import json

import tvm
from tvm import relax

__all__ = ["SITES_ATTR", "call_sites", "sites_of", "with_sites"]

SITES_ATTR = "graphtune.call_sites"
"""IRModule attribute (JSON list of lists of names) set by :func:`graphtune.compiler.legalize.legalize`."""


def _calls(func: relax.Function) -> list[tuple[str, str, list[str]]]:
    """``(bound var name, callee name, argument var names)`` of every call in ``func``."""
    out = []
    body = func.body
    blocks = body.blocks if isinstance(body, relax.SeqExpr) else []
    for binding in (b for block in blocks for b in block.bindings):
        call = binding.value
        if not isinstance(call, relax.Call):
            continue
        if isinstance(call.op, tvm.ir.GlobalVar):
            callee, args = call.op.name_hint, list(call.args)
        elif isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir":
            callee = call.args[0].name_hint
            args = list(call.args[1].fields) if isinstance(call.args[1], relax.Tuple) else [call.args[1]]
        else:
            continue
        out.append((binding.var.name, callee, [a.name for a in args if isinstance(a, relax.Var)]))
    return out


def call_sites(unfused: relax.Function, fused: tvm.IRModule) -> list[list[str]]:
    """Original binding names computed by each PrimFunc call of ``fused["main"]``, in order.

    Parameters
    ----------
    unfused : relax.Function
        ``main`` after ``LegalizeOps``, before ``FuseOps``.
    fused : tvm.IRModule
        The module after ``FuseOps`` (before ``FuseTIR``).

    Returns
    -------
    list of list of str
        One entry per call of a PrimFunc or fused function in ``main``.
    """
    before = _calls(unfused)
    position = {name: i for i, (name, _, _) in enumerate(before)}
    taken: set[int] = set()
    sites = []
    defined = {gvar.name_hint for gvar in fused.get_global_vars()}
    for var, callee, _ in _calls(fused["main"]):
        func = fused[callee] if callee in defined else None
        if not isinstance(func, relax.Function):  # a call_tir left unfused keeps its name
            sites.append([var])
            taken.add(position.get(var, -1))
            continue
        inner = _calls(func)
        members = [name for name, _, _ in inner[:-1] if name in position]
        taken.update(position[name] for name in members)
        start = max((position[name] for name in members), default=-1)
        last_callee = inner[-1][1] if inner else None
        output = next((i for i, (name, cal, args) in enumerate(before)
                       if i > start and i not in taken and cal == last_callee
                       and (not members or set(args) & set(members))), None)
        if output is not None:
            taken.add(output)
            members.append(before[output][0])
        sites.append(members)
    return sites


def with_sites(mod: tvm.IRModule, sites: list[list[str]]) -> tvm.IRModule:
    """``mod`` with ``sites`` (from :func:`call_sites`) recorded as its :data:`SITES_ATTR`.

    Examples
    --------
    >>> sites_of(with_sites(tvm.IRModule({"main": relax.Function([], relax.Tuple([]))}), []))
    []
    """
    return mod.with_attr(SITES_ATTR, json.dumps(sites))


def sites_of(mod: tvm.IRModule) -> list[tuple[str, list[str]]] | None:
    """``(PrimFunc called, binding names)`` per call of a legalized module's ``main``, if recorded.

    Examples
    --------
    >>> sites_of(tvm.IRModule()) is None
    True
    """
    attrs = mod.attrs
    if attrs is None or SITES_ATTR not in attrs:
        return None
    names = json.loads(str(attrs[SITES_ATTR]))
    callees = [callee for _, callee, _ in _calls(mod["main"])]
    if len(callees) != len(names):  # a pass after fusion changed the calls: names unknown
        return None
    return list(zip(callees, names))
