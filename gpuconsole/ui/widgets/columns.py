"""How a table's columns share its width, and how a tagged row is marked.

k9s's rule: the column that names a row (its identity) is never cut while another column can
give. Each column is as wide as it is set (a column without a width: as its widest cell, or
the spare room); when the whole is too wide for the screen, the flexible column narrows first,
then the columns that say they may give, right to left, and only then does the table scroll.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

FLEX_MIN = 24  # the width the one flexible column gets at least, where there is room
TAG = "•"  # drawn in a tagged row's first cell of padding (seen without colour too)


def column_widths(spec: Sequence[tuple[str, str, int | None]], room: int, fitted: dict[int, int],
                  identity: str | None, fit: int, gives: dict[str, int]) -> list[int]:
    """Widths for ``room`` cells (padding already taken off). ``fitted``: the widest cell of
    each column without a width (tables that fit their cells; the others give the flexible
    column the spare room); ``fit``: the widest name of the identity column, where known;
    ``gives``: key → the narrowest a column may become (for the flexible column: how far it
    narrows before the others give; else to its label)."""
    widths, floors = [], []
    for i, (label, key, width) in enumerate(spec):
        if width is None:
            want = fitted.get(i, FLEX_MIN)
            widths.append(want)
            floors.append(min(want, gives.get(key, len(label) + 1)))  # a floor of its own, if given
        else:
            if key == identity:
                width = max(width, fit, fitted.get(i, 0))
            widths.append(width)
            floors.append(min(width, gives.get(key, width)))
    over = sum(widths) - room
    flexible = [i for i, (_l, _k, w) in enumerate(spec) if w is None]
    if over < 0 and flexible and not fitted:
        widths[flexible[0]] -= over  # the spare room goes to the flexible column
    for i in [*flexible, *reversed(range(len(widths)))]:
        if over <= 0:
            break
        give = min(over, widths[i] - floors[i])
        if give > 0:
            widths[i] -= give
            over -= give
    return widths


def tag_mark(strip: Strip) -> Strip:
    """``strip`` with the tag mark in its first cell (a padding cell) and its text in bold."""
    segments = list(strip)
    if segments and segments[0].text[:1] == " ":
        first = segments[0]
        segments[0] = Segment(TAG + first.text[1:], first.style)
    return Strip([Segment(seg.text, (seg.style or Style()) + Style(bold=True)) for seg in segments])
