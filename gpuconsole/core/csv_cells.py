"""CSV cells a spreadsheet reads as text: a cell from data that begins with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return would be run as a formula by Excel, LibreOffice or Google
Sheets (``=HYPERLINK(…)`` in an audit target, say); it is written with a leading ``'``, the
mark those programs take for "this is text". Numbers are written as they are.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: object) -> object:
    """``value`` as a CSV cell no spreadsheet runs."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_rows(out: TextIO, rows: Iterable[Iterable[object]]) -> None:
    """Write ``rows`` (the header first) as CSV, every text cell inert: CRLF line ends, as RFC 4180
    has them, so a carriage return inside a cell is quoted like a newline."""
    writer = csv.writer(out, lineterminator="\r\n")
    for row in rows:
        writer.writerow([cell(value) for value in row])
