"""Text that fits a terminal of :data:`WIDTH` columns: tables, and lines that wrap.

Every human-readable answer of the command line fits 80 columns; ``--wide`` prints it whole.
A table makes room from its least important columns first: it cuts them (with an ellipsis),
then drops the ones that may go, and cuts its identifying column (a name, an id) only when
nothing else can give. A long line wraps between its clauses, then before an aside, then
between its words, with its continuation indented. Text is inert: a control character in a
name is spelled out, never sent to the terminal.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from gpuconsole.ui.format import inert

WIDTH = 80
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table.

    Attributes:
        title: the header.
        right: align right (numbers, money); such a column is shown whole or dropped, never cut.
        key: the identifying column: cut only when no other column can give.
        give: how readily it is cut to make room, the highest first; 0: never cut.
        least: the fewest characters it is cut to (default: its title's length).
        drop: it may be left out when cutting the others is not enough.
    """

    title: str
    right: bool = False
    key: bool = False
    give: int = 0
    least: int = 0
    drop: bool = False


def add_wide_option(parser: argparse.ArgumentParser) -> None:
    """``--wide``: print tables and lines whole, however wide."""
    parser.add_argument("--wide", action="store_true", default=argparse.SUPPRESS,
                        help=f"print every column and line whole (default: fit {WIDTH} columns)")


def width_of(args: argparse.Namespace) -> int | None:
    """The width the command's text must fit: :data:`WIDTH`, or None (no limit) with ``--wide``."""
    return None if getattr(args, "wide", False) else WIDTH


def cut(text: str, width: int) -> str:
    """``text`` in ``width`` characters at most, its end replaced with an ellipsis when cut."""
    if len(text) <= width:
        return text
    return text[: width - 1] + ELLIPSIS if width > 0 else ""


def fit(line: str, width: int | None = WIDTH) -> str:
    """One line, inert, cut to ``width`` with an ellipsis (whole with None)."""
    line = inert(line)
    return line if width is None else cut(line, width)


def render_table(columns: Sequence[Column], rows: Sequence[Sequence[object]], width: int | None = WIDTH,
                 gap: int = 1) -> list[str]:
    """The header and the rows, each line at most ``width`` characters (any with None)."""
    cells = [[inert(str(cell)) for cell in row] for row in rows]
    natural = [max([len(c.title), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    widths, shown = _layout(columns, natural, width, gap)
    lines = []
    for row in ([c.title for c in columns], *cells):
        parts = [cut(cell, widths[i]).rjust(widths[i]) if columns[i].right else cut(cell, widths[i]).ljust(widths[i])
                 for i, cell in enumerate(row) if i in shown]
        lines.append((" " * gap).join(parts).rstrip())
    return lines


def _layout(columns: Sequence[Column], natural: list[int], width: int | None, gap: int) -> tuple[list[int], set[int]]:
    """Each column's width and the columns shown: cut the giving columns (the most giving
    first), then drop what may go, and cut the identifying columns last. A number (a column
    aligned right) is never cut: it is shown whole or dropped."""
    everything = set(range(len(columns)))
    if width is None:
        return natural, everything
    least = [n if c.right and not c.key else min(n, c.least or len(c.title)) for c, n in zip(columns, natural, strict=True)]
    order = sorted(everything, key=lambda i: -columns[i].give)
    givers = [i for i in order if columns[i].give > 0 and not columns[i].key]
    droppable = [i for i in order if columns[i].drop and not columns[i].key]
    for dropped in range(len(droppable) + 1):
        shown = everything - set(droppable[:dropped])
        widths = _cut(natural, least, [i for i in givers if i in shown], shown, width, gap)
        if _total(widths, shown, gap) <= width:
            return widths, shown
    return _cut(widths, least, [i for i in order if columns[i].key], shown, width, gap), shown


def _cut(natural: list[int], least: list[int], order: list[int], shown: set[int], width: int, gap: int) -> list[int]:
    """The widths with the columns of ``order`` cut, one after the other, each as far as the
    line needs and down to its least."""
    widths = list(natural)
    for i in order:
        over = _total(widths, shown, gap) - width
        if over <= 0:
            break
        widths[i] -= min(over, widths[i] - least[i])
    return widths


def _total(widths: list[int], shown: set[int], gap: int) -> int:
    return sum(widths[i] for i in shown) + gap * (len(shown) - 1)


def wrap(text: str, width: int | None = WIDTH, *, indent: str = "  ") -> str:
    """``text`` in lines of ``width`` characters at most (unchanged with None), continued
    under ``indent``. It breaks where the sense allows it most: after a ``;``, else after a
    ``,``, else before a ``(`` or a ``[``, else between words, so that a clause that fits a
    line stays on one; a word longer than a line (a path, a URL) is kept whole. The text is
    inert."""
    if "\n" in text:
        return "\n".join(wrap(line, width, indent=indent) for line in text.split("\n"))
    text = inert(text)
    if width is None or len(text) <= width:
        return text
    words = text.split(" ")
    lines = [""]
    _place(words, _gaps(words), 0, lines, width, indent)
    return "\n".join(lines)


AFTER_CLAUSE, AFTER_ITEM, BEFORE_ASIDE, BETWEEN_WORDS = range(4)  # where a line may break, the best first


def _gaps(words: list[str]) -> list[int]:
    """The kind of break after each word but the last; inside brackets, only between words."""
    kinds = []
    depth = 0
    for word, following in zip(words, words[1:]):
        depth = max(0, depth + sum(map(word.count, "([")) - sum(map(word.count, ")]")))
        kinds.append(BETWEEN_WORDS if depth else AFTER_CLAUSE if word.endswith(";") else
                     AFTER_ITEM if word.endswith(",") else BEFORE_ASIDE if following.startswith(("(", "[")) else
                     BETWEEN_WORDS)
    return kinds


def _place(words: list[str], gaps: list[int], kind: int, lines: list[str], width: int, indent: str) -> None:
    """Add ``words`` to ``lines``, split at the breaks of ``kind`` or better: each part on the
    last line if it fits there, else on a line of its own, else split at the next kind."""
    parts: list[list[int]] = [[0]]  # [start, end) of each part
    for n, gap in enumerate(gaps):
        if gap <= kind:
            parts[-1].append(n + 1)
            parts.append([n + 1])
    parts[-1].append(len(words))
    for start, end in parts:
        text = " ".join(words[start:end])
        blank = not lines[-1]
        joined = text if blank else f"{lines[-1]} {text}"
        last = kind == BETWEEN_WORDS
        if len(joined) <= width or (blank and last):  # a word longer than a line stays whole
            lines[-1] = joined
        elif last or (not blank and len(indent + text) <= width):
            lines.append(indent + text)
        else:
            _place(words[start:end], gaps[start:end - 1], kind + 1, lines, width, indent)
