"""Names of tensor layouts and how to read them.

graphtune's activations are 4-D ``NCHW`` or channel-blocked 5-D ``NCHW{x}c``
(``x`` channels innermost); 2-D dense activations are ``NC``. Conv kernels
are ``OIHW`` or ``OIHW{x}i{y}o``. This module is TVM-free: the graph,
solvers, frontend and kernels all speak these names.

Examples
--------
>>> block_of("NCHW16c"), block_of("NCHW")
(16, 0)
>>> data_layout(8), data_layout(0)
('NCHW8c', 'NCHW')
>>> kernel_layout(16, 32)
'OIHW16i32o'
"""

import re

from .errors import LayoutError

__all__ = ["PLAIN", "DENSE", "block_of", "data_layout", "kernel_layout", "check_layout"]

PLAIN = "NCHW"
"""The unblocked 4-D activation layout, also the layout of every boundary."""

DENSE = "NC"
"""The 2-D activation layout of dense (fully connected) layers."""

_DATA = re.compile(r"^NCHW(?:([1-9][0-9]*)c)?$")


def block_of(layout: str) -> int:
    """Channel block of a data layout: ``NCHW{x}c`` -> x, ``NCHW``/``NC`` -> 0.

    Raises
    ------
    LayoutError
        If ``layout`` is not ``NC``, ``NCHW`` or ``NCHW{x}c``.

    Examples
    --------
    >>> block_of("NCHW32c")
    32
    """
    if layout == DENSE:
        return 0
    match = _DATA.match(layout) if isinstance(layout, str) else None
    if match is None:
        raise LayoutError(
            f"unknown data layout {layout!r}: expected 'NCHW', 'NCHW{{x}}c' (e.g. 'NCHW16c') or 'NC'"
        )
    return int(match.group(1) or 0)


def check_layout(layout: str) -> str:
    """Return ``layout`` unchanged if it is a known data layout, else raise LayoutError.

    Examples
    --------
    >>> check_layout("NCHW8c")
    'NCHW8c'
    """
    block_of(layout)
    return layout


def data_layout(block: int) -> str:
    """Name of the activation layout with channel block ``block`` (0 means plain NCHW).

    Examples
    --------
    >>> data_layout(16)
    'NCHW16c'
    """
    if not isinstance(block, int) or block < 0:
        raise LayoutError(f"channel block must be a non-negative int, got {block!r}")
    return f"NCHW{block}c" if block else PLAIN


def kernel_layout(in_block: int, out_block: int) -> str:
    """Name of the conv kernel layout for input block ``in_block`` and output block ``out_block``.

    Examples
    --------
    >>> kernel_layout(0, 0)
    'OIHW'
    >>> kernel_layout(4, 16)
    'OIHW4i16o'
    """
    if in_block == 0 and out_block == 0:
        return "OIHW"
    if in_block <= 0 or out_block <= 0:
        raise LayoutError(
            f"kernel layout needs both blocks positive or both 0, got {in_block} and {out_block}"
        )
    return f"OIHW{in_block}i{out_block}o"
