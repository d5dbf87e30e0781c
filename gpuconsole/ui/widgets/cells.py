"""Table cells: rows are ``(key, cells)``, and a cell is inert text (never parsed as markup)."""

from __future__ import annotations

import functools
from typing import Any

from rich.style import Style
from rich.text import Text

from gpuconsole.ui.format import inert

Cells = tuple[Any, ...]
Row = tuple[str, Cells]


def text(value: Any, style: Style | str | None = None, justify: str = "left") -> Text:
    """A cell that is never parsed as markup (job names, reasons and tags are user data).

    The style is applied as a span, so two cells with the same words but another colour compare
    unequal and the table repaints them. Equal cells are one shared object (treat it as
    read-only): a table of thousands of rows repeats the same node, model and value cells.
    """
    try:
        return _cell(str(value), style, justify)
    except TypeError:  # an unhashable style
        return _cell.__wrapped__(str(value), style, justify)


@functools.lru_cache(maxsize=32768)
def _cell(words: str, style: Style | str | None, justify: str) -> Text:
    cell = Text(inert(words), justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
    if style:
        cell.stylize(style)
    return cell


def right(value: Any, style: Style | str | None = None) -> Text:
    return text(value, style, "right")
