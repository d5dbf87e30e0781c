"""How a table cell becomes segments, made once per shared cell and width.

The panes' cells are shared, read-only objects (:func:`~gpuconsole.ui.widgets.cells.text`: equal
cells are one object), so a cell's text cut or padded to its column is kept, keyed by the cell
itself, and a frame only puts the row's styles over it. A table of a thousand rows redraws a
screen of rows at once when its pane is shown, and a filter keystroke redraws every row.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

PADDING = 1  # blank cells either side of each column, as DataTable draws them
NULL = Style.null()  # the style of the blanks Rich's Padding adds ("none")
BLANK = Segment(" " * PADDING, NULL)
KEEP = 4096  # cells whose line is kept (a screen of tables shows a few hundred)
_KEPT: dict[tuple[int, Hashable], tuple[object, list[Any]]] = {}
Pieces = Sequence[tuple[str, Style | None]]


def _kept(cell: object, how: Hashable) -> list[Any] | None:
    known = _KEPT.get((id(cell), how))
    return known[1] if known is not None and known[0] is cell else None


def _keep(cell: object, how: Hashable, line: list[Any]) -> list[Any]:
    if len(_KEPT) >= KEEP:
        _KEPT.clear()
    _KEPT[id(cell), how] = (cell, line)  # the cell is held: its id stays its own while kept
    return line


def cell_pieces(console: Console, cell: Any, width: int) -> Pieces:
    """The (text, style) runs of ``cell`` cut to ``width`` with an ellipsis, or padded to it
    (on the left when it is justified right), as :class:`VirtualTable` draws a cell."""
    line = _kept(cell, width) if isinstance(cell, Text) else None
    if line is None:
        content = cell.copy() if isinstance(cell, Text) else Text(str(cell), no_wrap=True)
        content.truncate(width, overflow="ellipsis")
        room = width - content.cell_len
        if room > 0:
            if content.justify == "right":
                content.pad_left(room)
            else:
                content.pad_right(room)
        line = [(segment.text, segment.style) for segment in content.render(console, end="")]
        if isinstance(cell, Text):
            _keep(cell, width, line)
    return line


def padded_cell(console: Console, options: ConsoleOptions, content: Text, pre: Style, post: Style) -> list[Segment]:
    """One cell of a row as Textual's ``DataTable`` draws it, a blank either side, ``pre``
    under and ``post`` over its own styles: the segments of the first line of
    ``Styled(Padding(content, (0, 1)), pre, post)`` rendered ``options.max_width + 2`` wide,
    made without Rich's general machinery (a table of a thousand rows redraws 36 lines of
    twelve cells at once when its pane is shown). A cell's own line is made once per width:
    the panes' cells are shared, read-only objects (:func:`~gpuconsole.ui.widgets.cells.text`)."""
    how = ("padded", options.max_width, options.justify, options.overflow, options.no_wrap)  # what the text reads
    line = _kept(content, how)
    if line is None:
        width = options.max_width
        rendered = content.__rich_console__(console, options) if width >= 1 else ()
        first = next(Segment.split_and_crop_lines(rendered, width, pad=True, style=NULL, include_new_lines=False), None)
        line = _keep(content, how, first if first is not None else [Segment(" " * width, NULL)])
    out = []
    for text, style, control in (BLANK, *line, BLANK):
        if control:
            style = None
        else:
            if pre:
                style = pre + style
            if post:
                style = style + post if style else post
        out.append(Segment(text, style, control))
    return out


