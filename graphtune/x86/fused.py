"""Apply an op's knob schedule to a PrimFunc holding its compute, fused or standalone.

:func:`schedule_fused` takes a PrimFunc in which the op is one reduction block
(the *anchor*) built by graphtune.x86's TE compute for the op (see
:data:`graphtune.x86.specs.SPECS`), possibly with padding before it and
elementwise blocks after it (bias add, relu, residual add, clip) as Relax's
FuseOps + FuseTIR produce. It inlines the padding (unless the op's schedule
places it, :attr:`~graphtune.x86.specs.OpSpec.keeps_padding`), folds the elementwise
chain into its last block, and applies the op's schedule
(:mod:`graphtune.x86.schedule`); blocks it cannot fold (e.g. a second
output) get a plain parallel + vectorised schedule, never a wrong result.

Examples
--------
>>> import graphtune.x86 as x86
>>> wl = x86.conv2d_workload([1, 16, 8, 8], [16, 16, 3, 3], padding=[1, 1, 1, 1])
>>> knobs = {"ic_bn": 8, "oc_bn": 16, "reg_n": 4, "unroll_kw": True}
>>> func = x86.kernel_func(wl, knobs, {"kind": "llvm"})  # uses schedule_fused
>>> len(func.params)
3
"""

from tvm import s_tir, tirx

from ..errors import KnobError
from ..ops import BF16_OPS, Op
from . import amx, bf16
from .schedule import _blocks, _domain, _inline_producers, _try, schedule_elementwise
from .specs import spec_for
from .target import TargetLike, vector_lanes

__all__ = ["schedule_fused", "anchor_domain"]


def anchor_domain(workload: dict, knobs: dict, op: Op | str | None = None) -> tuple:
    """Expected ``(spatial extents, reduction extents)`` of the anchor block.

    Examples
    --------
    >>> from graphtune.ops import dense_workload
    >>> anchor_domain(dense_workload([1, 64], [10, 64]), {"oc_bn": 10, "k_bn": 8})
    ([1, 10], [64])
    """
    spec = spec_for(workload, op)
    spec.knobs.check(spec.op, workload, knobs)
    return spec.anchor(workload, knobs)


def _find_anchor(sch: s_tir.Schedule, workload: dict, knobs: dict, op: Op):
    expected = anchor_domain(workload, knobs, op)
    seen = []
    for block in _blocks(sch):
        spatial, reduce = _domain(sch, block)
        if reduce:
            if (spatial, reduce) == tuple(expected):
                return block
            seen.append(f"{sch.get(block).name_hint} {spatial} x {reduce}")
    raise KnobError(
        f"no {op} block with spatial x reduction extents {expected[0]} x {expected[1]} "
        f"(implied by the workload and knobs {knobs}) in the function; reduction blocks found: "
        f"{seen or 'none'}. Build the op with graphtune.x86's TE compute and the same knobs."
    )


def _related(sch: s_tir.Schedule, anchor, step) -> set[str]:
    """Names of the blocks reached from ``anchor`` by ``step`` (get_producers / get_consumers)."""
    seen: set[str] = set()
    todo = [anchor]
    while todo:
        for block in step(todo.pop()):
            name = sch.get(block).name_hint
            if name not in seen:
                seen.add(name)
                todo.append(block)
    return seen


def _inline_side_operands(sch: s_tir.Schedule, anchor) -> None:
    """Inline the elementwise blocks that neither feed the anchor nor follow it -- they compute
    another operand of its epilogue, e.g. a residual input dequantized from uint8 -- into their
    readers, so that the epilogue reads that operand as it reads a parameter."""
    path = _related(sch, anchor, sch.get_producers) | _related(sch, anchor, sch.get_consumers)
    path.add(sch.get(anchor).name_hint)
    for block in _blocks(sch):
        if sch.get(block).name_hint not in path and not _domain(sch, block)[1]:
            _try(sch.compute_inline, block)


def schedule_fused(func: tirx.PrimFunc, workload: dict, knobs: dict, target: TargetLike = None,
                   op: Op | str | None = None) -> tirx.PrimFunc:
    """Apply the knob schedule to the anchor op of ``func`` and its fused pro/epilogue.

    Parameters
    ----------
    func : tvm.tirx.PrimFunc
        A PrimFunc holding exactly one reduction block of the op described by
        ``workload`` (built from graphtune.x86's TE compute with these
        ``knobs``), optionally with padding before it and an elementwise
        chain (bias add, relu, residual add, clip...) after it.
    workload, knobs : dict
        The op's workload and knobs (validated).
    target : Target or dict, optional
        Sets the vector width of the left-over blocks' schedule (default: host).
    op : Op or str, optional
        The workload's op, when known (default: inferred, :func:`graphtune.ops.op_of`).

    Returns
    -------
    tvm.tirx.PrimFunc
        The scheduled function (same parameters and attributes).

    Raises
    ------
    KnobError
        Invalid knobs, or no block matching the workload and knobs in ``func``.

    Examples
    --------
    >>> from tvm import te
    >>> import graphtune.x86 as x86
    >>> wl = x86.dense_workload([1, 32], [16, 32])
    >>> knobs = {"oc_bn": 16, "k_bn": 4}
    >>> d, w, _ = x86.dense_packed_shapes(wl, knobs)
    >>> x, wt = te.placeholder(d, name="x"), te.placeholder(w, name="w")
    >>> dense = x86.dense_packed(x, wt, wl, knobs)
    >>> y = te.compute((1, 16), lambda i, j: te.max(dense[i, j], 0.0), name="relu")
    >>> f = x86.schedule_fused(te.create_prim_func([x, wt, y]), wl, knobs)
    >>> "relu" in f.script() and "parallel" in f.script()
    True
    """
    spec = spec_for(workload, op)
    op = spec.op
    sch = s_tir.Schedule(func)
    anchor = _find_anchor(sch, workload, knobs, op)
    _inline_side_operands(sch, anchor)
    padding = []
    if spec.keeps_padding(knobs):  # the schedule places it; what feeds it is inlined into it
        padding = [b for b in sch.get_producers(anchor) if not _domain(sch, b)[1]]
        for block in padding:
            _inline_producers(sch, block)
    else:
        _inline_producers(sch, anchor)
    epilogue = spec.fold(sch, anchor, knobs)
    mine = {sch.get(b).name_hint for b in (anchor, epilogue, *padding) if b is not None}
    leftovers = [b for b in _blocks(sch) if sch.get(b).name_hint not in mine]
    name = sch.get(anchor).name_hint
    if len(sch.get_loops(anchor)) != len(sch.get(anchor).iter_vars):
        raise KnobError(
            f"block {name!r} is not in the loop nest its TE compute creates (already scheduled?); "
            "pass the unscheduled function to schedule_fused"
        )
    lanes = vector_lanes(target)
    try:
        spec.schedule(sch, anchor, epilogue, knobs, lanes)
    except s_tir.ScheduleError as err:
        reason = str(err).strip().splitlines()[-1]
        raise KnobError(
            f"cannot apply the {op} schedule with knobs {knobs} to block {name!r}: {reason}") from None
    for block in leftovers:
        schedule_elementwise(sch, block, lanes)
    scheduled = amx.place_configs(sch.mod["main"])
    return bf16.with_llvm_ir(scheduled) if op in BF16_OPS else scheduled
