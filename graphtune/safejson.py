"""Bounded JSON reading for the files graphtune reads but did not just write, and terminal-safe text.

Records files, probe indexes, config files and layout graph documents come
from disk: a crash can tear them, a hand edit or another program can put
anything in them. :func:`loads` parses one document with its size, nesting
depth and number lengths checked *before* :func:`json.loads` runs (which would
recurse into 5 million brackets, or refuse a 5,000-digit integer with a bare
``ValueError``); every problem is a ``ValueError`` whose message says what is
wrong, for the reader to turn into a warning (records, caches) or a
:class:`~graphtune.errors.ConfigError` (configs). :func:`bounded_ms` checks
a time read from a file, and :func:`printable` escapes the characters
that could mislead a terminal (bidirectional overrides, control characters)
in names graphtune prints.

Examples
--------
>>> loads('{"a": [1, 2.5, "x"]}', max_chars=100)
{'a': [1, 2.5, 'x']}
>>> loads("[" * 100 + "]" * 100, max_chars=1000)
Traceback (most recent call last):
...
graphtune.safejson.JSONLimitError: nested more than 64 levels deep
>>> printable("conv\\u202eevil")
'conv\\\\u202eevil'
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_DIGITS", "MAX_MS", "JSONLimitError", "loads", "check_bounds", "bounded_ms",
           "printable"]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a graphtune file has (its own go about 8 deep)."""

MAX_DIGITS = 40
"""Most digits in one number literal (a float's repr has at most 17 significant ones)."""

MAX_MS = 1e7
"""Largest time (ms, about 2.8 hours) a cost read from a file may be: beyond it a sum is nonsense."""

_ESCAPE = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*"')  # once escapes are gone: linear, no backtracking
_CHUNK = 1 << 20


class JSONLimitError(ValueError):
    """A document exceeds a bound of :func:`loads` (size, nesting depth, digits of a number)."""


def _too_deep(text: str, max_depth: int) -> int | None:
    """The line (from 1) where brackets (``[``/``{`` open, ``]``/``}`` close) in ``text`` first
    nest deeper than ``max_depth``, or None."""
    import numpy as np

    data = text.encode("utf-8", "surrogatepass")  # brackets stay single bytes
    depth = 0
    for start in range(0, len(data), _CHUNK):  # chunks: memory stays small
        codes = np.frombuffer(data, dtype=np.uint8, count=min(_CHUNK, len(data) - start),
                              offset=start)
        steps = ((codes == ord("[")) | (codes == ord("{"))).astype(np.int32) \
            - ((codes == ord("]")) | (codes == ord("}")))
        levels = np.cumsum(steps, dtype=np.int64) + depth
        if levels.max() > max_depth:
            return data.count(b"\n", 0, start + int(np.argmax(levels > max_depth))) + 1
        depth = int(levels[-1])
    return None


def check_bounds(text: str, *, max_chars: int, max_depth: int = MAX_DEPTH,
                 max_digits: int = MAX_DIGITS) -> None:
    """Raise :class:`JSONLimitError` if ``text`` is longer, deeper or has longer numbers than allowed.

    Linear in the length of ``text``; brackets and digits inside strings do not count.

    Examples
    --------
    >>> check_bounds('["[[[[", 1]', max_chars=20, max_depth=1)
    >>> check_bounds("1" * 50, max_chars=100)
    Traceback (most recent call last):
    ...
    graphtune.safejson.JSONLimitError: a number with 50 digits (at most 40)
    """
    if len(text) > max_chars:
        raise JSONLimitError(f"{len(text):,} characters, more than the {max_chars:,} "
                             "such a file can have")
    long_number = re.compile(r"\d{%d,}" % (max_digits + 1))
    quick_depth = text.count("[") + text.count("{") <= max_depth
    quick_digits = long_number.search(text) is None
    if quick_depth and quick_digits:
        return  # the common case: nothing to scan
    # what json.loads parses before any syntax error is exact here: escapes occur only in
    # strings, and quotes pair up
    outside = _STRING.sub('""', _ESCAPE.sub("", text))
    # (strings hold no raw newline: line numbers are the document's)
    if not quick_digits and (match := long_number.search(outside)):
        raise JSONLimitError(f"{_line(outside, match.start())}a number with "
                             f"{len(match.group()):,} digits (at most {max_digits})")
    if not quick_depth and (line := _too_deep(outside, max_depth)) is not None:
        raise JSONLimitError(f"{_line(outside, None, line)}nested more than {max_depth} levels deep")


def _line(text: str, index: int | None, line: int | None = None) -> str:
    """``"line N: "`` for a position in a document of several lines, else ``""``."""
    if "\n" not in text.strip():  # one line (a records or probe index line, its newline)
        return ""
    return f"line {text.count(chr(10), 0, index) + 1 if line is None else line}: "


def loads(text: str | bytes, *, max_chars: int, max_depth: int = MAX_DEPTH,
          max_digits: int = MAX_DIGITS) -> Any:
    """:func:`json.loads` of a document whose size, depth and numbers are checked first.

    Parameters
    ----------
    text : str or bytes
        The document (bytes are decoded as UTF-8).
    max_chars : int
        Longest document accepted (characters).
    max_depth, max_digits : int
        Deepest nesting of arrays/objects; most digits in one number literal.

    Raises
    ------
    ValueError
        :class:`JSONLimitError` for a bound exceeded, :class:`json.JSONDecodeError`
        for invalid JSON, :class:`UnicodeDecodeError` for bytes that are not UTF-8.

    Examples
    --------
    >>> loads(b'{"ms": 1e999}', max_chars=100)
    {'ms': inf}
    >>> loads('"x"' + " " * 10, max_chars=5)
    Traceback (most recent call last):
    ...
    graphtune.safejson.JSONLimitError: 13 characters, more than the 5 such a file can have
    """
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_chars:  # before decoding a huge buffer
            raise JSONLimitError(f"{len(text):,} bytes, more than the {max_chars:,} "
                                 "such a file can have")
        text = bytes(text).decode("utf-8")
    check_bounds(text, max_chars=max_chars, max_depth=max_depth, max_digits=max_digits)
    try:
        return json.loads(text)
    except RecursionError:  # not reached after check_bounds; a safety net
        raise JSONLimitError(f"nested more than {max_depth} levels deep") from None


def bounded_ms(value: Any, *, zero: bool = True) -> bool:
    """True for a real time read from a file: a finite number in ``[0, MAX_MS]`` (not a bool);
    ``zero=False`` also excludes 0.

    Examples
    --------
    >>> bounded_ms(0.41), bounded_ms(0), bounded_ms(0, zero=False)
    (True, True, False)
    >>> bounded_ms(1e308), bounded_ms(float("nan")), bounded_ms(-1), bounded_ms(True), bounded_ms("1")
    (False, False, False, False, False)
    """
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and (0 <= value if zero else 0 < value) and value <= MAX_MS)


def printable(text: Any) -> str:
    """``str(text)`` with every character that could mislead a terminal escaped.

    Bidirectional controls (U+202A-U+202E, U+2066-U+2069, marks), other control
    and format characters, separators and unassigned code points become
    ``\\xNN`` / ``\\uNNNN`` / ``\\UNNNNNNNN``; newlines too, so one name stays on one line.

    Examples
    --------
    >>> printable("layer1.0.conv1")
    'layer1.0.conv1'
    >>> print(printable("a\\u202eb\\x1b[31mc\\nd"))
    a\\u202eb\\x1b[31mc\\nd
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if char in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
