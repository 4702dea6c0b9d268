"""The candidate knob space of a workload, best guesses first (the op's pieces: :mod:`.tiles`).

Every channel block dividing the channels (up to ``max_block``) is a layout
choice the graph solver may want, so pruning keeps layout diversity: the
best-guess tile of every block pair comes before the second-best tile of the
preferred pairs, and so on. An op's spec may then reorder them
(:attr:`~graphtune.x86.specs.OpSpec.order`: the int8 conv2d's register-tile shapes
take turns; a 3x3 conv2d on a map larger than 8x8 measures a Winograd tile second).

Examples
--------
>>> from graphtune.ops import conv2d_workload
>>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> top = candidates(wl, {"kind": "llvm", "mcpu": "znver5"}, max_candidates=4)
>>> [(k["ic_bn"], k["oc_bn"], k.get("winograd")) for k in top]
[(16, 16, None), (16, 16, 4), (32, 16, None), (16, 32, None)]
"""

from ..errors import KnobError
from ..ops import Op
from .specs import spec_for
from .target import TargetLike
from .tiles import MAX_BLOCK

__all__ = ["candidates", "default_knobs", "tile_variants", "MAX_BLOCK"]


def tile_variants(workload: dict, blocks: dict, target: TargetLike = None,
                  op: Op | str | None = None) -> list:
    """All knob dicts with the given channel ``blocks``, best guess first.

    Parameters
    ----------
    workload : dict
    blocks : dict
        ``{"ic_bn", "oc_bn"}`` for (group) conv2d and conv2d_transpose, ``{"bn"}`` for depthwise,
        ``{"oc_bn"}`` or ``{}`` for dense (``{}``: the best-guess block).
    target : Target or dict, optional
    op : Op or str, optional
        The workload's op, when known (default: inferred, :func:`graphtune.ops.op_of`).

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 8, 6, 6], [8, 8, 3, 3], padding=[1, 1, 1, 1])
    >>> tile_variants(wl, {"ic_bn": 8, "oc_bn": 8})[0]["reg_n"]
    6
    """
    return spec_for(workload, op).tiles(workload, blocks, target)


def candidates(
    workload: dict, target: TargetLike = None, max_candidates: int | None = None,
    max_block: int = MAX_BLOCK,
    op: Op | str | None = None,
) -> list:
    """The knob dicts worth measuring for ``workload``, best guesses first.

    Parameters
    ----------
    workload : dict
        A conv2d, conv2d_transpose, depthwise_conv2d, group_conv2d or dense workload.
    target : Target or dict, optional
        Sets the vector width and register budget (default: the host).
    max_candidates : int, optional
        Keep only the first ``max_candidates`` (``None``: all).
    max_block : int
        Largest channel block to enumerate (every divisor up to it is kept).
    op : Op or str, optional
        The workload's op, when known (default: inferred, :func:`graphtune.ops.op_of`).

    Returns
    -------
    list of dict
        Valid knob dicts (each passes :func:`check_knobs`), no duplicates.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> stem = conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3])
    >>> sorted({k["ic_bn"] for k in candidates(stem)})
    [1, 3]
    """
    if max_candidates is not None and (not isinstance(max_candidates, int) or max_candidates < 1):
        raise KnobError(f"max_candidates={max_candidates!r} must be a positive int or None")
    if not isinstance(max_block, int) or max_block < 1:
        raise KnobError(f"max_block={max_block!r} must be a positive int")
    spec = spec_for(workload, op)
    # the r-th best tile of a block group of tier t ranks with the best tiles of tier t + r
    ranked = []
    for order, (tier, group) in enumerate(spec.blocks(workload, max_block, target)):
        for rank, knobs in enumerate(spec.tiles(workload, group, target)):
            ranked.append(((tier + rank, order), knobs))
    result = spec.order([k for _, k in sorted(ranked, key=lambda item: item[0])], workload, target)
    return result[:max_candidates] if max_candidates else result


def default_knobs(workload: dict, block: int = 16, target: TargetLike = None,
                  op: Op | str | None = None) -> dict:
    """A reasonable untuned candidate whose channel blocks are ``block`` where possible.

    The channel blocks are the divisors of the channel counts nearest to
    ``block`` (the stem's 3 input channels give ``ic_bn=3``); tiles come from
    the best-guess ordering of :func:`graphtune.x86.candidates`. Dense ignores
    ``block`` (its layout is always ``NC``).

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
    >>> k = default_knobs(wl, block=16)
    >>> k["ic_bn"], k["oc_bn"], k["unroll_kw"]
    (16, 16, True)
    """
    if not isinstance(block, int) or block < 1:
        raise KnobError(f"default_knobs block={block!r} must be a positive int (e.g. 16)")
    spec = spec_for(workload, op)
    return spec.tiles(workload, spec.default_blocks(workload, block, target), target)[0]
