"""Channel-block rules of grouped convs: which blocks map onto which groups.

A group conv with ``G`` groups has ``cg = C / G`` input and ``og = O / G``
output channels per group. An output block of ``oc_bn`` channels either lies
inside one group (``oc_bn`` divides ``og``) or spans ``oc_bn / og`` whole
groups (``og`` divides ``oc_bn``); it reads the :func:`span` of contiguous
input channels of its groups, which the input block ``ic_bn`` must divide.
A block spanning several groups is computed as a dense conv over its span
with a block-diagonal packed weight (zeros between groups).

Examples
--------
>>> from graphtune.ops import conv2d_workload
>>> wl = conv2d_workload([1, 128, 56, 56], [128, 4, 3, 3], padding=[1, 1, 1, 1], groups=32)
>>> span(wl, 16), span(wl, 2), oc_blocks(wl)
(16, 4, [1, 2, 4, 8, 16, 32, 64, 128])
"""

from ..errors import KnobError

__all__ = ["group_sizes", "span", "oc_blocks", "spans_whole_groups", "check_group_blocks"]


def group_sizes(workload: dict) -> tuple:
    """``(input channels per group, output channels per group)``.

    Examples
    --------
    >>> group_sizes({"data": [1, 64, 8, 8], "kernel": [32, 8, 3, 3], "groups": 8})
    (8, 4)
    """
    groups = workload["groups"]
    return workload["data"][1] // groups, workload["kernel"][0] // groups


def span(workload: dict, oc_bn: int) -> int:
    """Input channels an output block of ``oc_bn`` channels reads (its groups' inputs).

    Examples
    --------
    >>> span({"data": [1, 64, 8, 8], "kernel": [64, 16, 3, 3], "groups": 4}, 32)  # two groups of 16
    32
    """
    cg, og = group_sizes(workload)
    return cg * max(1, oc_bn // og)


def oc_blocks(workload: dict) -> list:
    """Valid output blocks: divisors of ``O`` that divide, or are multiples of, ``og``.

    Examples
    --------
    >>> oc_blocks({"data": [1, 24, 8, 8], "kernel": [24, 4, 3, 3], "groups": 6})
    [1, 2, 4, 8, 12, 24]
    """
    o = workload["kernel"][0]
    og = group_sizes(workload)[1]
    return [b for b in range(1, o + 1) if o % b == 0 and (og % b == 0 or b % og == 0)]


def spans_whole_groups(workload: dict, ic_bn: int, oc_bn: int) -> bool:
    """Whether an output block of ``oc_bn`` spans several groups of as many input as output
    channels and reads them from the input block of the same channels (``ic_bn == oc_bn``): the
    blocks whose lanes can each read only their own group's inputs (a group conv's ``shuffle``).

    Examples
    --------
    >>> wl = {"data": [1, 128, 8, 8], "kernel": [128, 4, 3, 3], "groups": 32}
    >>> spans_whole_groups(wl, 16, 16), spans_whole_groups(wl, 4, 4), spans_whole_groups(wl, 8, 16)
    (True, False, False)
    """
    cg, og = group_sizes(workload)
    return cg == og and ic_bn == oc_bn > og


def check_group_blocks(op: str, workload: dict, knobs: dict) -> None:
    """Raise KnobError unless ``oc_bn`` maps onto groups and ``ic_bn`` divides its span.

    Examples
    --------
    >>> wl = {"data": [1, 64, 8, 8], "kernel": [64, 16, 3, 3], "groups": 4}
    >>> check_group_blocks("group_conv2d", wl, {"ic_bn": 32, "oc_bn": 16})
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: group_conv2d knob 'ic_bn' = 32 must divide the 16 input channels
        an output block of 16 reads (its groups' inputs); valid values: 1, 2, 4, 8, 16
    """
    oc_bn, ic_bn = knobs["oc_bn"], knobs["ic_bn"]
    for knob in ("ic_bn", "oc_bn"):
        if not isinstance(knobs[knob], int) or isinstance(knobs[knob], bool) or knobs[knob] < 1:
            raise KnobError(f"{op} knob {knob!r} = {knobs[knob]!r} must be a positive int")
    valid = oc_blocks(workload)
    if oc_bn not in valid:
        og = group_sizes(workload)[1]
        raise KnobError(
            f"{op} knob 'oc_bn' = {oc_bn!r} must divide the {workload['kernel'][0]} output channels and "
            f"divide or be a multiple of the {og} output channels per group; valid values: "
            + ", ".join(str(b) for b in valid)
        )
    width = span(workload, oc_bn)
    if width % ic_bn:
        raise KnobError(
            f"{op} knob 'ic_bn' = {ic_bn!r} must divide the {width} input channels an output block of "
            f"{oc_bn} reads (its groups' inputs); valid values: "
            + ", ".join(str(d) for d in range(1, width + 1) if width % d == 0)
        )
