"""Costs of what a compiled model runs besides bare kernels and layout transforms.

A kernel candidate is measured bare (:func:`graphtune.x86.kernel_func`), but
inside a model Relax fuses epilogues into the kernel's PrimFunc (bias, SiLU,
the squeeze-excitation multiply, a residual add...), and other ops run in
PrimFuncs of their own (pools, global means, unfused joins, the head). This
module prices all of them *as graphtune's compiler builds them*:

1. :func:`probe_choices` picks a few *probes*: one candidate per layout node
   and join, all in one channel block where possible, so that together they
   cover every (node, out_layout) pair of the graph.
2. :func:`probe_groups` rewrites, legalizes, fuses and schedules the model
   with :mod:`graphtune.compiler` for one probe and follows the tensors
   through the lowered ``main``: every ``call_tir`` that is not a layout
   transform becomes an :class:`OpGroup` owned by the node whose layout it
   runs in (a fused kernel: its node; a pool or unfused elementwise chain:
   the node it reads from; an op of two activations: their join), or by no
   node when it runs in plain layout after a boundary (flatten, softmax...).
   Each is an op-group :class:`~graphtune.measure.task.Task` (:func:`op_group_task`,
   kind ``segment`` in the records) keyed by the content hash of its scheduled
   PrimFunc: measured once, kept in the records, and re-measured automatically
   when the compiler builds it differently. A probe compile is
   :func:`graphtune.compiler.driver.rewrite_model` and
   :func:`~graphtune.compiler.legalize.legalize` of the probe's config
   (:func:`probe_config`): the compiler's planning, nothing of its own; what a
   function computes is read from the compiler's attributes
   (:func:`~graphtune.compiler.legalize.transforms_of`,
   :func:`~graphtune.compiler.legalize.label_of`), never from its name.
3. :func:`op_costs` measures the groups that price a pair (each (node, layout)
   pair's in the first probe covering it, plain groups in the first probe;
   the rest of a probe is compiled but not timed); a fused kernel's group costs its
   time minus that of the same kernel without epilogue, timed right before it
   (the epilogue's cost; fastest repeat minus fastest repeat, as a difference
   of two medians is mostly noise on a loaded host). Per (node, layout) the sum is
   the node's *op cost* in that layout; plain groups are a constant.
   :func:`apply_op_costs` adds them to the graph's candidates (and the
   constant to the graph output's boundary), so the solver trades them
   against layouts and its objective predicts the whole model. Given a
   :class:`~graphtune.opgroups.probe_index.ProbeIndex`, a probe compiled before
   (same model, candidates, target and graphtune code) whose groups are all
   in the records is not compiled again: a re-tune from complete records
   compiles nothing.

Examples
--------
>>> from graphtune import extract, models
>>> g = extract(models.get("resnet18", image_size=32), max_candidates=2)
>>> choices = probe_choices(g)
>>> len(choices) >= 1 and all(set(c) == set(choices[0]) for c in choices)
True
"""

from __future__ import annotations

import functools
import hashlib
import math
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import networkx as nx

from ..config import Config, NodeConfig, graph_workload
from ..errors import MeasureError
from ..graph import Candidate, LayoutGraph
from ..layouts import DENSE, PLAIN, block_of
from ..measure.build import arg_specs
from ..measure.task import Task
from ..ops import Op, op_class, timed_as
from .probe_index import ProbeIndex, probe_key

__all__ = ["OpGroup", "OpCosts", "ProbeGroups", "probe_choices", "probe_config", "probe_groups",
           "op_group_task", "op_costs", "apply_op_costs", "fused_edges", "tie_fused_joins"]

_UNBLOCKED = (PLAIN, DENSE)
"""Layouts without a channel block: a tensor in one of them has left a blocked layout."""


@dataclass(frozen=True)
class OpGroup:
    """One PrimFunc of a compiled probe and who pays for it.

    Attributes
    ----------
    node : str or None
        Graph node whose layout the function runs in; None for plain-layout ops
        after a boundary (a constant cost).
    layout : str
        The layout it runs in (``NCHW`` for plain ones).
    label : str
        What the function computes: its fused ops' names, but the layout transforms
        (:func:`graphtune.compiler.legalize.label_of`).
    task : Task
        The op-group task measuring it (:func:`op_group_task`).
    bare : Task or None
        For a fused kernel: an op-group task of the same kernel without its
        epilogue (:func:`graphtune.x86.kernel_func`, same knobs), measured
        right before it and subtracted from it; None otherwise.
    """

    node: str | None
    layout: str
    label: str
    task: Task
    bare: Task | None = None


@dataclass
class OpCosts:
    """Measured op costs of a graph: per (node, layout), and constant plain ones.

    Attributes
    ----------
    per_layout : dict
        ``{(node, layout): ms}`` of the ops that run in ``node``'s layout.
    groups : list of dict
        Every measured group: ``{"node", "layout", "label", "ms"}``
        (``node`` None for plain ones).
    estimated : set
        (node, layout) pairs no probe could give (priced as the node's
        costliest measured layout).
    unpriced : list of str
        Labels of the functions with data-dependent shapes (after a non-max
        suppression, a ``NonZero``...) in the probes compiled by this run: they
        cannot be timed in isolation, so they are left out of the prediction
        (a constant of every solution, not a layout choice).
    tasks : int
        Distinct op-group tasks measured: those of the groups that price a pair
        (a later probe's groups for pairs an earlier probe covered are not).
    """

    per_layout: dict = field(default_factory=dict)
    groups: list = field(default_factory=list)
    estimated: set = field(default_factory=set)
    unpriced: list = field(default_factory=list)
    tasks: int = 0

    @property
    def fixed_ms(self) -> float:
        """Sum of the plain-layout groups (ms), a constant of every solution."""
        return sum(g["ms"] for g in self.groups if g["node"] is None)

    def chosen(self, layouts: dict) -> list[dict]:
        """The groups a solution runs: plain ones and those in each node's chosen layout.

        Parameters
        ----------
        layouts : dict
            ``{node: chosen out_layout}``.
        """
        rows = [g for g in self.groups if g["node"] is None or layouts.get(g["node"]) == g["layout"]]
        rows += [{"node": n, "layout": lay, "label": "(estimated)", "ms": self.per_layout[(n, lay)]}
                 for n, lay in sorted(self.estimated) if layouts.get(n) == lay]
        return rows

    def total(self, layouts: dict) -> float:
        """Op cost of a solution (ms): its chosen groups' sum."""
        return sum(g["ms"] for g in self.chosen(layouts))


class ProbeGroups(list):
    """The op groups of one probe compile (a list of :class:`OpGroup`), and ``unpriced``:
    the labels of its calls of data-dependent shape, which no group prices.

    Examples
    --------
    >>> ProbeGroups([], ["dynamic_strided_slice"]).unpriced
    ['dynamic_strided_slice']
    """

    def __init__(self, groups: Sequence[OpGroup] = (), unpriced: Sequence[str] = ()) -> None:
        super().__init__(groups)
        self.unpriced = list(unpriced)


def _reads_twice(func, index: int) -> bool:
    """True if two blocks of ``func`` read its ``index``-th parameter (e.g. ``conv(x) + x``)."""
    from tvm import s_tir

    buffer = func.params[index]
    sch = s_tir.Schedule(func)
    readers = [b for b in sch.get_child_blocks(sch.get_sblock("root"))
               if any(region.source.same_as(buffer) for region in sch.get(b).reads)]
    return len(readers) > 1


def _static(func) -> bool:
    """True if every parameter of the PrimFunc ``func`` has a static shape (else it has
    data-dependent shapes and cannot be timed alone)."""
    import tvm

    return all(isinstance(dim, tvm.ir.prim.IntImm) for param in func.params for dim in param.shape)


def _writes_plain(func) -> bool:
    """True if ``func``'s output (its last parameter) is not channel-blocked (rank 5)."""
    return len(func.params[-1].shape) != 5


def _free(graph: LayoutGraph) -> list[str]:
    return [n for n in graph.nodes if graph.op(n) != Op.BOUNDARY]


def probe_choices(graph: LayoutGraph) -> list[dict[str, int]]:
    """Candidate indices per layout node and join, one dict per probe, covering every out layout.

    Probe ``b`` gives each node a candidate writing ``NCHW{b}c`` (reading it too
    when it can, so that probes hold few transforms), else one whose out layout
    no probe has covered yet, else the block nearest ``b``; a join fused into its
    producer (:func:`fused_edges`) takes the producer's layout, as in every
    solution (:func:`tie_fused_joins`), so that the producer's op group is
    priced with the join fused into it. Probes are added in order of how common
    their block is, until every (node, out_layout) pair is covered (but a fused
    join's layouts its producer cannot write).

    Examples
    --------
    >>> from graphtune.graph import LayoutGraph
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[1.0, 1.0], layouts=["NCHW8c", "NCHW16c"])
    >>> g.add_node("b", op="join", costs=[0.0, 0.0], layouts=["NCHW", "NCHW16c"])
    >>> g.add_edge("a", "b", shape=[1, 16, 4, 4])
    >>> probe_choices(g)
    [{'a': 1, 'b': 1}, {'a': 0, 'b': 0}]
    """
    free = _free(graph)
    topo = {n: i for i, n in enumerate(nx.topological_sort(graph.nx))}
    fused = sorted(fused_edges(graph), key=lambda e: topo[e[1]])
    writable = {join: {c.out_layout for c in graph.candidates(src)} for src, join in fused}
    todo = {(n, c.out_layout) for n in free for c in graph.candidates(n)
            if c.in_layout in writable.get(n, {c.in_layout})}
    blocks = Counter(block_of(c.out_layout) for n in free for c in graph.candidates(n))
    order = [b for b, _ in sorted(blocks.items(), key=lambda kv: (-kv[1], -kv[0]))]
    probes: list[dict[str, int]] = []
    for b in order + [-1] * max((len(graph.candidates(n)) for n in free), default=0):
        if not todo:
            break

        def rank(n: str, i: int, b: int = b, todo: set = todo) -> tuple:
            c = graph.candidates(n)[i]
            return (block_of(c.out_layout) != b, (n, c.out_layout) not in todo,
                    block_of(c.in_layout) != b, abs(block_of(c.out_layout) - b),
                    c.cost if not math.isnan(c.cost) else math.inf)

        choice = {n: min(range(len(graph.candidates(n))), key=functools.partial(rank, n)) for n in free}
        for src, join in fused:  # producer order: a fused join runs in its producer's layout
            wrote = graph.candidates(src)[choice[src]].out_layout
            same = [i for i, c in enumerate(graph.candidates(join)) if c.in_layout == wrote]
            if same:
                choice[join] = min(same, key=functools.partial(rank, join))
        new = {(n, graph.candidates(n)[i].out_layout) for n, i in choice.items()} & todo
        if new:
            todo -= new
            probes.append(choice)
    return probes


def _strip(func):
    """``func`` without the attributes naming where it came from (they do not change the code)."""
    from ..compiler.legalize import MEMBERS_ATTR, NODE_ATTR, OP_ATTR, TRANSFORMS_ATTR

    for key in (NODE_ATTR, OP_ATTR, MEMBERS_ATTR, TRANSFORMS_ATTR, "global_symbol"):
        if func.attrs is not None and key in func.attrs:
            func = func.without_attr(key)
    return func


def op_group_task(func, ops: str, timed_beside=None) -> Task:
    """The op-group task measuring a scheduled PrimFunc of a compiled model.

    Its key holds the op kind, the argument shapes and a content hash of the
    function (names of nodes stripped): the same code is measured once in
    every model, and new code (another fusion or schedule) is measured anew.
    With ``timed_beside`` (a fused kernel's bare twin, or the fused kernel for
    the twin) the hash covers that function too: the two of a pair are found
    in the records together or measured together, back to back, so that their
    difference never compares timings taken hours apart on a host whose speed
    drifts (a fused kernel new to a second model against a twin shared with
    the first: GoogLeNet exported by torch, whose convs have no bias, had its
    ReLU epilogues priced at 1.5 ms of its 11.3).

    Examples
    --------
    >>> from tvm import te
    >>> x = te.placeholder((1, 2, 4, 4, 8), name="x")
    >>> f = te.create_prim_func([x, te.compute(x.shape, lambda *i: x(*i) * 2.0)])
    >>> t = op_group_task(f, "multiply")
    >>> t.kind is Op.OP_GROUP, t.workload["args"][0], len(t.workload["sha"])
    (True, [[1, 2, 4, 4, 8], 'float32'], 16)
    >>> g = te.create_prim_func([x, te.compute(x.shape, lambda *i: x(*i) * 3.0)])
    >>> op_group_task(f, "multiply", timed_beside=g).workload["sha"] != t.workload["sha"]
    True
    """
    import tvm

    bare = _strip(func)
    text = tvm.ir.save_json(bare)
    keyed = text if timed_beside is None else text + tvm.ir.save_json(_strip(timed_beside))
    sha = hashlib.sha1(keyed.encode()).hexdigest()[:16]
    return Task(Op.OP_GROUP, {"ops": ops, "args": arg_specs(bare), "sha": sha}, payload=text)


def probe_config(graph: LayoutGraph, choice: dict[str, int]) -> Config:
    """One probe as a config: the chosen candidate of every layout node and join.

    Examples
    --------
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[1.0, 1.0], layouts=["NCHW8c", "NCHW16c"])
    >>> g.add_node("b", op="join", costs=[0.0, 0.0], layouts=["NCHW", "NCHW16c"])
    >>> g.add_edge("a", "b", shape=[1, 16, 4, 4])
    >>> cfg = probe_config(g, {"a": 1, "b": 0})
    >>> cfg.nodes["a"].out_layout, cfg.nodes["b"].workload
    ('NCHW16c', {'inputs': ['a']})
    """
    nodes = {}
    for name, index in choice.items():
        c = graph.candidates(name)[index]
        nodes[name] = NodeConfig(graph.op(name), graph_workload(graph, name), c.in_layout,
                                 c.out_layout, dict(c.knobs))
    return Config(nodes)


def _probe_module(mod, graph: LayoutGraph, choice: dict[str, int], target):
    """``mod`` compiled for one probe by graphtune's compiler (planned, rewritten, legalized,
    fused and scheduled as :func:`graphtune.compile` does, up to the build), and every node's
    weight constant in it (the rewrite's and those packed at legalization)."""
    from ..compiler.driver import rewrite_model
    from ..compiler.legalize import legalize

    new_mod, anchors, _ = rewrite_model(mod, probe_config(graph, choice), target)
    packed: dict = {}
    lowered = legalize(new_mod, anchors, target, packed_anchors=packed)
    return lowered, {**anchors, **packed}


def probe_groups(mod, graph: LayoutGraph, choice: dict[str, int], target) -> ProbeGroups:
    """Every non-transform PrimFunc call of ``mod`` compiled for one probe, with its owner.

    A call whose function has data-dependent shapes (what follows a non-max
    suppression) is no group: nothing can time it alone; the result's
    ``unpriced`` names it.

    Parameters
    ----------
    mod : tvm.IRModule
        The imported model (:func:`graphtune.frontend.import_model`).
    graph : LayoutGraph
        Its layout graph, kernel candidates measured (bare kernel costs).
    choice : dict
        One probe of :func:`probe_choices`.
    target : tvm.target.Target

    Returns
    -------
    ProbeGroups
        The groups in call order (a PrimFunc called twice gives two groups, same
        task); ``unpriced``: labels of the calls left out for their dynamic shapes.

    Examples
    --------
    >>> from graphtune import extract, models, x86
    >>> from graphtune.frontend import import_model
    >>> model = models.get("resnet18", image_size=32)
    >>> g = extract(model, max_candidates=1)
    >>> groups = probe_groups(import_model(model), g, probe_choices(g)[0], x86.host_target())
    >>> [(grp.node, grp.label) for grp in groups if grp.task.workload["ops"] == "mean"]
    [('layer4.1.add', 'mean')]
    """
    from tvm import relax

    lowered, anchors = _probe_module(mod, graph, choice, target)
    tracer = _Tracer(graph, choice, lowered, anchors, target)
    for param in lowered["main"].params:
        tracer.state[param] = (param.name, True)
    groups = [tracer.visit(b.var, b.value) for block in lowered["main"].body.blocks
              for b in block.bindings if isinstance(b, relax.VarBinding)]
    return ProbeGroups([g for g in groups if g is not None], tracer.unpriced)


class _Tracer:
    """Follows tensors through a lowered ``main``: which node owns each call, in which layout.

    ``state`` maps each variable to ``(owner, plain)``: the graph node whose
    layout the tensor carries, and whether it is in plain layout after a
    boundary (then the ops reading it are constants of the model).
    """

    def __init__(self, graph: LayoutGraph, choice: dict[str, int], lowered, anchors, target):
        self.graph, self.lowered, self.anchors, self.target = graph, lowered, anchors, target
        self.by_name = {plan.name: plan for plan in anchors.values()}
        self.choice = choice
        self.layout = {n: graph.candidates(n)[i].out_layout for n, i in choice.items()}
        self.joins = {frozenset(graph.nx.predecessors(n)): n for n in choice if graph.op(n) == Op.JOIN}
        self.readers = {s: [j for j in self.joins.values() if s in graph.nx.predecessors(j)]
                        for s in graph.nodes}
        self.state: dict = {}
        self.unpriced: list[str] = []

    def join_of(self, sources: list[str]) -> str:
        """The join reading exactly these sources (one possibly through a join fused into a
        kernel: a residual add), else the first source."""
        found = set(sources)
        if len(found) == 1:
            return sources[0]
        if frozenset(found) in self.joins:
            return self.joins[frozenset(found)]
        for s in found:
            for j in self.readers[s]:
                if frozenset(found - {s} | {j}) in self.joins:
                    return self.joins[frozenset(found - {s} | {j})]
        return sources[0]

    def visit(self, var, value) -> OpGroup | None:
        """Record ``var``'s owner; the op group of a call that is not a transform, else None."""
        from tvm import relax

        if not (isinstance(value, relax.Call) and getattr(value.op, "name", "") == "relax.call_tir"):
            inner = value.tuple_value if isinstance(value, relax.TupleGetItem) else value
            fields = inner.fields if isinstance(inner, relax.Tuple) else [inner]
            acts = [f for f in fields if isinstance(f, relax.Var) and f in self.state]
            if acts:
                self.state[var] = self.state[acts[0]]
            return None
        from ..compiler.legalize import label_of, members_of, op_kind, transforms_of

        func = self.lowered[value.args[0]]
        args = list(value.args[1].fields)
        acts = [a for a in args if isinstance(a, relax.Var) and a in self.state]
        if not _static(func):  # data-dependent shapes: a constant no isolated timing can give
            self.state[var] = (self.state[acts[0]][0] if acts else None, True)
            self.unpriced.append(label_of(func))
            return None
        transforms = transforms_of(func)
        if transforms and all(op_class(op_kind(m)).view for m in members_of(func)):
            owner = self.state[acts[0]][0] if acts else None
            dst = transforms[0].split("->")[1]
            self.state[var] = (owner, self.moved_to_plain(owner, dst in _UNBLOCKED))
            return None  # transforms (and views of them) alone: the edges price them
        plan = self.plan_of(func, args)
        if plan is not None:
            return self.kernel(var, func, label_of(func), plan, args, acts)
        group = self.rest(var, func, label_of(func), acts)
        if transforms and group.node is not None:  # transforms fused with other ops (a
            # concat): the whole function is a group, its transforms inlined, so their edges
            # over-count them a little; its output is plain if it left its owner's layout
            self.state[var] = (group.node, self.moved_to_plain(group.node, _writes_plain(func)))
        return group

    def plan_of(self, func, args):
        """The plan of the node whose kernel ``func`` computes (by its weight), else None."""
        import tvm

        from ..compiler.legalize import NODE_ATTR

        plan = next((self.anchors[a] for a in args if isinstance(a, tvm.ir.expr.Constant)
                     and a in self.anchors), None)
        if plan is None and func.attrs is not None and NODE_ATTR in func.attrs:
            plan = self.by_name.get(str(func.attrs[NODE_ATTR]))
        return plan if plan is not None and plan.name in self.choice else None

    def moved_to_plain(self, owner: str | None, plain: bool) -> bool:
        """Whether a tensor of ``owner`` written in plain layout has left the graph's layouts
        (towards a boundary) rather than being in its owner's own chosen layout (a plain join)."""
        return plain and (owner is None or self.layout.get(owner) not in _UNBLOCKED)

    def kernel(self, var, func, label: str, plan, args: list, acts: list) -> OpGroup:
        """A node's kernel with its fused epilogue, paired with the bare kernel."""
        from .. import x86

        twin = x86.kernel_func(*timed_as(plan.op, plan.workload, plan.knobs)[1:], self.target)
        # a join fused into the kernel (SE scale, residual add) reads its other input;
        # Relax passes a tensor read twice once, so the data input may be that one (then two
        # blocks read it: the kernel and the join; DenseNet's concat of a conv with its input
        # is not fused and must not be taken for one)
        srcs = [self.state[a][0] for a in acts if not self.state[a][1]]
        fused = [frozenset({plan.name, *srcs[1:]})]
        if acts and _reads_twice(func, next(i for i, a in enumerate(args) if a.same_as(acts[0]))):
            fused.append(frozenset({plan.name, *srcs}))
        self.state[var] = (next((self.joins[f] for f in fused if len(f) > 1 and f in self.joins),
                                plan.name), False)
        return OpGroup(plan.name, plan.out_layout, label, op_group_task(func, plan.op, twin),
                       op_group_task(twin, plan.op, func))

    def rest(self, var, func, label: str, acts: list) -> OpGroup:
        """Any other function: owned by the node (or join) it reads, or plain."""
        from ..compiler.legalize import OP_ATTR

        ops = str(func.attrs[OP_ATTR]) if func.attrs is not None and OP_ATTR in func.attrs else label
        task = op_group_task(func, ops)
        live = [self.state[a][0] for a in acts if not self.state[a][1]]
        owner = self.join_of(live) if live else None
        # a join in plain layout (DenseNet's concat) reads tensors moved to plain for it
        sources = live + [self.state[a][0] for a in acts if self.state[a][1]
                          and self.state[a][0] in self.layout]
        moved = self.join_of(sources) if sources else None
        if moved is not None and moved in self.joins.values() and self.layout[moved] in _UNBLOCKED:
            owner = moved
        if owner not in self.layout:  # plain: after a boundary, or on the graph input
            self.state[var] = (owner or (self.state[acts[0]][0] if acts else None), True)
            return OpGroup(None, PLAIN, label, task)
        self.state[var] = (owner, False)
        return OpGroup(owner, self.layout[owner], label, task)


def op_costs(mod, graph: LayoutGraph, target,
             run: Callable[[list[Task]], list], index: ProbeIndex | None = None) -> OpCosts:
    """Measure the op groups of every probe and price each (node, layout) pair.

    Parameters
    ----------
    mod : tvm.IRModule
        The imported model.
    graph : LayoutGraph
        Its layout graph with measured (bare) kernel candidates.
    target : tvm.target.Target
    run : callable
        ``run(tasks) -> records`` (e.g. :func:`graphtune.measure.measure` with
        a records file): one record per task, in order.
    index : ProbeIndex, optional
        The groups of probes compiled before (:mod:`graphtune.opgroups.probe_index`):
        a probe found there with every task recorded is not compiled again;
        the others are compiled and added to it.

    Returns
    -------
    OpCosts

    Raises
    ------
    MeasureError
        If a group failed to build or run.

    Examples
    --------
    >>> import os, tempfile, graphtune
    >>> records = os.path.join(tempfile.gettempdir(), "graphtune-doctest-resnet18-32.records.jsonl")
    >>> result = graphtune.tune("resnet18", image_size=32, max_candidates=2, records=records)
    >>> from graphtune import x86
    >>> from graphtune.frontend import import_model
    >>> from graphtune.measure import measure
    >>> mod = import_model(graphtune.models.get("resnet18", image_size=32))
    >>> costs = op_costs(mod, result.graph, x86.host_target(),
    ...                  lambda tasks: measure(tasks, records=records, progress=False))
    >>> layouts = {n: result.graph.candidates(n)[i].out_layout
    ...            for n, i in result.solution.assignment.items()}
    >>> round(costs.total(layouts), 6) == round(result.ops_ms, 6)
    True
    """
    covered: set[tuple[str, str]] = set()
    unpriced: list[str] = []
    priced_by = _indexed_probe_groups(mod, graph, target, index, unpriced)
    priced: list[OpGroup] = []
    for number, choice in enumerate(probe_choices(graph)):
        # each pair is priced by the first probe covering it, plain groups by the first probe
        new = {(n, graph.candidates(n)[i].out_layout) for n, i in choice.items()} - covered
        covered |= new
        priced += priced_by(choice, new, number == 0)
    # a fused kernel right after its bare twin: both timed under the same conditions
    tasks = [t for g in priced for t in (g.bare, g.task) if t is not None]
    records = dict(zip(tasks, run(tasks)))
    costs = OpCosts(unpriced=unpriced, tasks=len(records))
    if unpriced:
        shown = ", ".join(sorted(set(unpriced))[:5])
        warnings.warn(f"graphtune.tune: {len(unpriced)} function(s) with data-dependent shapes "
                      f"({shown}) cannot be timed alone; predicted_ms leaves them out",
                      UserWarning, stacklevel=3)
    for g in priced:
        pair = [records[t] for t in (g.task, g.bare) if t is not None]
        failed = next((r for r in pair if not r.ok), None)
        if failed is not None:
            raise MeasureError(f"op group {g.label} ({'node ' + repr(g.node) if g.node else 'plain'}, "
                               f"{g.layout}) failed: {failed.error}")
        if g.bare is None:
            ms = float(pair[0].median_ms)
        else:  # fastest repeats: a difference of medians is noise on a loaded host
            ms = max(0.0, min(pair[0].ms) - min(pair[1].ms))
        costs.groups.append({"node": g.node, "layout": g.layout, "label": g.label, "ms": ms})
    for node_layout in covered:
        costs.per_layout[node_layout] = 0.0
    for g in costs.groups:
        if g["node"] is not None:
            costs.per_layout[(g["node"], g["layout"])] += g["ms"]
    for n in _free(graph):
        known = [costs.per_layout[(n, c.out_layout)] for c in graph.candidates(n)
                 if (n, c.out_layout) in costs.per_layout]
        for c in graph.candidates(n):
            if (n, c.out_layout) not in costs.per_layout:
                costs.per_layout[(n, c.out_layout)] = max(known, default=0.0)
                costs.estimated.add((n, c.out_layout))
    return costs


def _indexed_probe_groups(mod, graph: LayoutGraph, target, index: ProbeIndex | None,
                          unpriced: list[str]) -> Callable[[dict, set, bool], list[OpGroup]]:
    """``priced_by(choice, pairs, plain)``: the groups of a probe that price ``pairs`` (and the
    plain ones if ``plain``), looked up in ``index`` first and added to it after compiling; the
    plain probe's functions with dynamic shapes are appended to ``unpriced`` when it compiles."""
    def compiled(choice: dict, pairs: set, plain: bool) -> list[OpGroup]:
        groups = probe_groups(mod, graph, choice, target)
        if plain:
            unpriced.extend(groups.unpriced)
        return [g for g in groups
                if (plain if g.node is None else (g.node, g.layout) in pairs)]

    if index is None:
        return compiled
    import tvm_ffi

    from ..measure.records import target_key_of

    model_hash, target_key = tvm_ffi.structural_hash(mod), target_key_of(target)

    def priced_by(choice: dict, pairs: set, plain: bool) -> list[OpGroup]:
        nodes = {}
        for n, i in choice.items():
            c = graph.candidates(n)[i]
            nodes[n] = [graph.op(n), c.in_layout, c.out_layout, c.knobs]
        key = probe_key(model_hash, {"nodes": nodes, "pairs": sorted(pairs), "plain": plain},
                        target_key)
        known = index.get(key)
        if known is not None:
            return [OpGroup(**g) for g in known]
        groups = compiled(choice, pairs, plain)
        index.add(key, [vars(g).copy() for g in groups])
        return groups

    return priced_by


def apply_op_costs(graph: LayoutGraph, costs: OpCosts) -> None:
    """Add op costs to the candidates of ``graph`` (in place; before edge costs are filled).

    Each layout node's and join's candidate gains the op cost of its out
    layout; the plain (constant) cost goes to the last graph-output boundary,
    so that the solver's objective is the whole model's predicted latency.

    Examples
    --------
    >>> from graphtune.graph import LayoutGraph
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[1.0, 2.0], layouts=["NCHW8c", "NCHW16c"])
    >>> g.add_node("out", op="boundary", costs=[0.0], layouts=["NCHW"])
    >>> g.add_edge("a", "out", shape=[1, 16, 4, 4])
    >>> apply_op_costs(g, OpCosts({("a", "NCHW8c"): 0.5, ("a", "NCHW16c"): 0.1},
    ...                           [{"node": None, "layout": "NCHW", "label": "softmax", "ms": 0.2}]))
    >>> [c.cost for c in g.candidates("a")], g.candidates("out")[0].cost
    ([1.5, 2.1], 0.2)
    """
    for n in _free(graph):
        graph.set_candidates(n, [Candidate(c.knobs, c.in_layout, c.out_layout,
                                           c.cost + costs.per_layout.get((n, c.out_layout), 0.0))
                                 for c in graph.candidates(n)])
    sink = fixed_cost_node(graph)
    if sink is not None and costs.fixed_ms:
        [c] = graph.candidates(sink)
        graph.set_candidates(sink, [Candidate(c.knobs, c.in_layout, c.out_layout, c.cost + costs.fixed_ms)])


def fixed_cost_node(graph: LayoutGraph) -> str | None:
    """The node whose one candidate carries a model's constant costs (the plain-layout op groups,
    :func:`apply_op_costs`): its last graph-output boundary, None if it has none.

    Examples
    --------
    >>> from graphtune.graph import LayoutGraph
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[1.0], layouts=["NCHW8c"])
    >>> g.add_node("out", op="boundary", costs=[0.0], layouts=["NCHW"])
    >>> g.add_edge("a", "out", shape=[1, 8, 4, 4])
    >>> fixed_cost_node(g)
    'out'
    """
    sinks = [n for n in nx.topological_sort(graph.nx)
             if graph.op(n) == Op.BOUNDARY and graph.nx.out_degree(n) == 0]
    return sinks[-1] if sinks else None


def fused_edges(graph: LayoutGraph) -> list[tuple[str, str]]:
    """Edges ``(producer, join)`` along which the join runs fused into the producer's kernel.

    Two kinds, both fused by Relax only when producer and join share a layout
    (edges whose ends have no layout in common are left out):

    - a join of one tensor with itself (SiLU's ``x * sigmoid(x)``): its one
      in-edge;
    - a join with a broadcast operand (squeeze-excitation's ``x * gate``, gate
      ``1 x C x 1 x 1``): the gate's edge; the multiply then runs as a second
      loop nest of the gate conv's function. In another layout it runs fused
      with the gate's transform, where no probe prices it (EfficientNet-B0:
      16 such calls, 0.15 ms, all priced 0).

    Examples
    --------
    >>> g = LayoutGraph()
    >>> g.add_node("x", costs=[1.0], layouts=["NCHW8c"])
    >>> g.add_node("fc2", costs=[1.0], layouts=["NCHW8c"])
    >>> g.add_node("scale", op="join", costs=[0.0], layouts=["NCHW8c"])
    >>> g.add_edge("x", "scale", shape=[1, 16, 8, 8])
    >>> g.add_edge("fc2", "scale", shape=[1, 16, 1, 1])
    >>> fused_edges(g)
    [('fc2', 'scale')]
    """
    edges = []
    for join in graph.nodes:
        if graph.op(join) != Op.JOIN:
            continue
        preds = list(graph.nx.predecessors(join))
        if len(preds) == 1:
            tied = preds
        else:
            sizes = {p: _spatial_size(graph.edge_shape(p, join)) for p in preds}
            tied = [p for p in preds if sizes[p] == 1 and max(sizes.values()) > 1]
        ins = {c.in_layout for c in graph.candidates(join)}
        edges += [(p, join) for p in tied if graph.op(p) != Op.BOUNDARY
                  and ins & {c.out_layout for c in graph.candidates(p)}]  # else it cannot fuse
    return edges


def _spatial_size(shape: Sequence[int] | None) -> int:
    """Pixels per channel of an ``NCHW`` edge tensor; 0 for tensors of another rank."""
    return math.prod(shape[2:]) if shape is not None and len(shape) == 4 else 0


def tie_fused_joins(graph: LayoutGraph) -> list[tuple[str, str]]:
    """Keep each join of :func:`fused_edges` in its producer's layout.

    A fused join in another layout than its producer runs as a function of its
    own (EfficientNet-B0's stem SiLU alone took a third of the model) or fused
    with a transform, which no probe measures. Changing the layout after the
    join instead costs the same transform (a self join) or next to nothing (a
    squeeze-excitation gate is ``C x 1 x 1``), so little is lost by forbidding
    the mismatch: the edge's mismatched entries get a cost no solution can
    afford. Call after the edge costs are filled.

    Returns
    -------
    list of tuple
        The tied edges.

    Examples
    --------
    >>> g = LayoutGraph()
    >>> g.add_node("conv", costs=[1.0, 1.0], layouts=["NCHW8c", "NCHW16c"])
    >>> g.add_node("silu", op="join", costs=[0.0, 0.0], layouts=["NCHW8c", "NCHW16c"])
    >>> g.add_edge("conv", "silu", shape=[1, 16, 4, 4], cost=[[0.0, 0.1], [0.1, 0.0]])
    >>> tie_fused_joins(g), bool(g.edge_cost("conv", "silu")[0, 1] > 1e3)
    ([('conv', 'silu')], True)
    """
    import numpy as np

    bound = 1e3 * (1.0 + sum(max(c.cost for c in graph.candidates(n)) for n in graph.nodes))
    tied = fused_edges(graph)
    for src, join in tied:
        outs = [c.out_layout for c in graph.candidates(src)]
        ins = [c.in_layout for c in graph.candidates(join)]
        mismatch = np.array([[o != i for i in ins] for o in outs], dtype=float)
        graph.set_edge_cost(src, join, graph.edge_cost(src, join) + bound * mismatch,
                            bound=graph.edge_bound(src, join))
    return tied
