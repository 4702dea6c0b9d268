"""Layout transforms between ``NCHW``, ``NCHW{a}c`` and ``NCHW{b}c`` (TE + schedule).

:func:`transform_func` builds a scheduled standalone transform (edge costs);
:func:`schedule_transform` schedules any layout-transform PrimFunc, including
the ones Relax's ``LegalizeOps`` makes from ``relax.op.layout_transform``.

Examples
--------
>>> f = transform_func([1, 32, 8, 8], "NCHW", "NCHW16c", target={"kind": "llvm"})
>>> [[int(x) for x in param.shape] for param in f.params]
[[1, 32, 8, 8], [1, 2, 8, 8, 16]]
"""

from tvm import s_tir, te, tirx

from ..errors import LayoutError
from ..layouts import DENSE, block_of
from .schedule import schedule_elementwise
from .target import TargetLike, vector_lanes

__all__ = ["layout_transform", "transform_shape", "transform_func", "schedule_transform"]


def transform_shape(shape: list, layout: str) -> list:
    """Physical shape of a logical NCHW ``shape`` stored in ``layout``.

    Raises
    ------
    LayoutError
        Unknown layout, ``NC``, or a channel count the block does not divide.

    Examples
    --------
    >>> transform_shape([1, 64, 56, 56], "NCHW16c")
    [1, 4, 56, 56, 16]
    """
    if layout == DENSE:
        raise LayoutError("layout 'NC' has no channel blocks to transform; use a 4-D NCHW layout")
    block = block_of(layout)
    if (
        not isinstance(shape, (list, tuple))
        or len(shape) != 4
        or not all(isinstance(x, int) and x >= 1 for x in shape)
    ):
        raise LayoutError(f"transform shape {shape!r} must be a logical NCHW list of 4 positive ints")
    n, c, h, w = shape
    if block == 0:
        return [n, c, h, w]
    if c % block:
        raise LayoutError(f"layout {layout} needs a channel count divisible by {block}, got {c} channels")
    return [n, c // block, h, w, block]


def layout_transform(data: te.Tensor, src: str, dst: str, name: str = "layout_transform") -> te.Tensor:
    """TE compute copying ``data`` from layout ``src`` to layout ``dst``.

    Examples
    --------
    >>> x = te.placeholder((1, 2, 4, 4, 8))
    >>> [int(s) for s in layout_transform(x, "NCHW8c", "NCHW4c").shape]
    [1, 4, 4, 4, 4]
    """
    a, b = block_of(src), block_of(dst)
    shape = [int(x) for x in data.shape]
    logical = shape if a == 0 else [shape[0], shape[1] * a, shape[2], shape[3]]
    out_shape = transform_shape(logical, dst)
    if transform_shape(logical, src) != shape:
        raise LayoutError(f"tensor of shape {shape} is not in layout {src}")

    def read(n, c, h, w):
        return data[n, c, h, w] if a == 0 else data[n, c // a, h, w, c % a]

    if b == 0:
        return te.compute(out_shape, read, name=name)
    return te.compute(out_shape, lambda n, cc, h, w, cb: read(n, cc * b + cb, h, w), name=name)


def _iterate_over_output(sch: s_tir.Schedule, block) -> None:
    """Re-index a scatter block (Relax's legalized layout_transform loops over the
    *source*) so that it loops over its output and gathers: contiguous vector stores."""
    stmt = sch.get(block)
    store = stmt.body
    if not isinstance(store, tirx.BufferStore) or any(iv.iter_type != 0 for iv in stmt.iter_vars):
        return
    variables = [iv.var for iv in stmt.iter_vars]
    if len(store.indices) == len(variables) and all(i.same_as(v) for i, v in zip(store.indices, variables)):
        return
    try:
        sch.transform_block_layout(block, tirx.IndexMap(variables, list(store.indices), None))
    except s_tir.ScheduleError:
        return  # not a bijection of the iteration space: keep the source order


def schedule_transform(func: tirx.PrimFunc, target: TargetLike = None) -> tirx.PrimFunc:
    """Parallel + vectorised schedule for a layout-transform PrimFunc.

    Every spatial block at the root gets :func:`schedule_elementwise`, after
    being re-indexed to loop over its output when it scatters (as the
    PrimFuncs Relax's ``LegalizeOps`` makes from ``relax.op.layout_transform``
    do), so that stores are contiguous and vectorised.

    Examples
    --------
    >>> x = te.placeholder((1, 16, 4, 4))
    >>> f = te.create_prim_func([x, layout_transform(x, "NCHW", "NCHW8c")])
    >>> "T.parallel" in schedule_transform(f, {"kind": "llvm"}).script()
    True
    """
    sch = s_tir.Schedule(func)
    lanes = vector_lanes(target)
    for block in list(sch.get_child_blocks(sch.get_sblock("root"))):
        _iterate_over_output(sch, block)
        schedule_elementwise(sch, block, lanes)
    return sch.mod["main"]


def transform_func(
    shape: list, src: str, dst: str, dtype: str = "float32", target: TargetLike = None
) -> tirx.PrimFunc:
    """Scheduled PrimFunc ``main(input, output)`` transforming a tensor from ``src`` to ``dst``.

    Parameters
    ----------
    shape : list of int
        Logical ``[N, C, H, W]`` shape of the tensor.
    src, dst : str
        ``NCHW`` or ``NCHW{x}c`` layouts, different from each other.
    dtype : str
    target : Target or dict, optional

    Raises
    ------
    LayoutError
        Equal or unknown layouts, or channels a block does not divide.

    Examples
    --------
    >>> f = transform_func([1, 64, 56, 56], "NCHW16c", "NCHW8c")
    >>> f.attrs["global_symbol"]
    'main'
    """
    if src == dst:
        raise LayoutError(f"transform {src} -> {dst}: layouts are equal, no transform is needed")
    data = te.placeholder(transform_shape(shape, src), dtype, name="data")
    out = layout_transform(data, src, dst)
    func = te.create_prim_func([data, out]).with_attr("global_symbol", "main")
    return schedule_transform(func, target)
