"""Argument and path checks run before any work, so a bad option never wastes a measurement.

Examples
--------
>>> check_choice("dp", ["auto", "dp"], "solver")
'dp'
>>> check_choice("bogus", ["auto", "dp"], "solver")
Traceback (most recent call last):
...
graphtune.errors.ArgumentError: solver 'bogus' is not one of: auto, dp
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from .errors import ArgumentError

__all__ = ["check_choice", "check_positive", "check_writable", "parse_shape_dict"]


def check_choice(value: Any, valid: Iterable[str], what: str) -> Any:
    """Return ``value`` if it is one of ``valid``, else raise ArgumentError listing them.

    Examples
    --------
    >>> check_choice("ort", {"ort": 1}, "peer")
    'ort'
    """
    valid = sorted(valid)
    if value not in valid:
        raise ArgumentError(f"{what} {value!r} is not one of: {', '.join(valid)}")
    return value


def check_positive(value: Any, what: str, *, integer: bool = False,
                   optional: bool = False) -> Any:
    """Return ``value`` if it is a positive number (an int when ``integer``; None if ``optional``).

    Examples
    --------
    >>> check_positive(0, "repeat", integer=True)
    Traceback (most recent call last):
    ...
    graphtune.errors.ArgumentError: repeat must be a positive integer, got 0
    """
    if value is None and optional:
        return value
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        kind = "integer" if integer else "number"
        raise ArgumentError(f"{what} must be a positive {kind}, got {value!r}")
    return value


def check_writable(path: str | os.PathLike, what: str) -> str:
    """Make sure ``path`` can be written (without leaving a new file behind); return it.

    The check opens the file for appending, which fails for a missing
    folder, a path under a regular file, a folder, a read-only file system or
    a file the user may not write (root included, unlike ``os.access``).

    Raises
    ------
    ArgumentError
        Naming ``what``, the path and the reason.

    Examples
    --------
    >>> check_writable("/proc/out.json", "config file -o")
    Traceback (most recent call last):
    ...
    graphtune.errors.ArgumentError: config file -o /proc/out.json cannot be written (...); ...
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ArgumentError(f"{what} {path}: folder {folder} does not exist; create it first")
    if os.path.isdir(path):
        raise ArgumentError(f"{what} {path} is a folder; give a file name")
    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
    except OSError as err:
        raise ArgumentError(f"{what} {path} cannot be written ({err.strerror}); choose another "
                            "path") from None
    if not existed:
        os.remove(path)
    return path


def parse_shape_dict(specs: Iterable[str]) -> dict[str, list[int]]:
    """Parse ``--shape NAME=D0,D1,...`` options into a ``shape_dict``.

    Examples
    --------
    >>> parse_shape_dict(["input=1,3,224,224"])
    {'input': [1, 3, 224, 224]}
    >>> parse_shape_dict(["input=1,x"])
    Traceback (most recent call last):
    ...
    graphtune.errors.ArgumentError: --shape 'input=1,x': expected NAME=D0,D1,... with positive ...
    """
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        try:
            shape = [int(d) for d in dims.split(",")]
        except ValueError:
            shape = []
        if not (sep and name and shape and all(d > 0 for d in shape)):
            raise ArgumentError(f"--shape {spec!r}: expected NAME=D0,D1,... with positive "
                                "integer dimensions, e.g. input=1,3,224,224")
        shapes[name] = shape
    return shapes
