"""Text styles as a terminal holds them, and the shortest SGR sequence from one to another.

Textual writes every segment as a reset, the segment's whole style, then its text. A cell-precise
writer (:mod:`gpuconsole.ui.terminal`) changes the style only where it must, so it needs the style
a run of SGR sequences leaves in force, comparable for equality, and the fewest bytes that turn
one style into another (``22`` to clear bold, ``39`` for the default colour, or a reset when that
is shorter). A parameter it does not know makes the style opaque: kept as the parameters that
build it from the default, and always written after a reset, so it is never guessed at.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

# Attributes an SGR parameter turns on (1 bold, 2 dim, 3 italic, 4 underline, 5 blink,
# 7 reverse, 8 conceal, 9 strike), and what turns each off: 22 clears bold and dim together.
_ATTRIBUTES = (1, 2, 3, 4, 5, 7, 8, 9)
_OFF = {22: (1, 2), 23: (3,), 24: (4,), 25: (5,), 27: (7,), 28: (8,), 29: (9,)}


class Style(NamedTuple):
    """The style in force: attributes as a bit per SGR code, colours as their SGR parameters
    (``""`` the terminal's default), or ``opaque``, the parameters that build it from a reset."""

    attributes: int = 0
    fg: str = ""
    bg: str = ""
    opaque: str = ""


PLAIN = Style()


@lru_cache(maxsize=4096)
def apply(style: Style, sequence: str) -> Style:
    """The style in force after ``sequence`` (one ``ESC [ … m``) is written over ``style``.
    Cached: a screen uses a few dozen styles, and Textual writes each one again for every segment."""
    body = sequence[2:-1]
    if ":" in body:  # sub-parameters (curly underlines, colon colours): kept as they came
        return _opaque(style, body)
    params = body.split(";")
    attributes, fg, bg = style.attributes, style.fg, style.bg
    index = 0
    while index < len(params):
        if style.opaque:
            if params[index] in ("", "0"):
                style, attributes, fg, bg = PLAIN, 0, "", ""
                index += 1
                continue
            return _opaque(style, ";".join(params[index:]))
        code = int(params[index]) if params[index].isdigit() else -1
        if code == 0 or params[index] == "":
            attributes, fg, bg = 0, "", ""
        elif code in _ATTRIBUTES:
            attributes |= 1 << code
        elif code in _OFF:
            for off in _OFF[code]:
                attributes &= ~(1 << off)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            fg = str(code)
        elif 40 <= code <= 47 or 100 <= code <= 107:
            bg = str(code)
        elif code == 39:
            fg = ""
        elif code == 49:
            bg = ""
        elif code in (38, 48) and _extended_colour(params, index):
            size = 3 if params[index + 1] == "5" else 5
            colour = ";".join(params[index:index + size])
            fg, bg = (colour, bg) if code == 38 else (fg, colour)
            index += size
            continue
        else:
            return _opaque(Style(attributes, fg, bg), ";".join(params[index:]))
        index += 1
    return Style(attributes, fg, bg)


def transition(real: Style, target: Style) -> str:
    """The shortest SGR sequence that turns the terminal's ``real`` style into ``target``."""
    if real == target:
        return ""
    full = _parameters(target)
    reset = f"\x1b[{full}m" if real == PLAIN else f"\x1b[0;{full}m" if full else "\x1b[0m"
    if real.opaque or target.opaque:
        return reset
    params: list[str] = []
    turned_off = real.attributes & ~target.attributes
    turned_on = target.attributes & ~real.attributes
    if turned_off & 0b110:  # 22 clears bold and dim: turn back on whichever stays
        params.append("22")
        turned_on |= target.attributes & 0b110
    params += [str(off) for off, codes in _OFF.items() if off != 22 and turned_off & (1 << codes[0])]
    params += [str(code) for code in _ATTRIBUTES if turned_on & (1 << code)]
    if real.fg != target.fg:
        params.append(target.fg or "39")
    if real.bg != target.bg:
        params.append(target.bg or "49")
    step = f"\x1b[{';'.join(params)}m"
    return step if len(step) < len(reset) else reset


def _parameters(style: Style) -> str:
    """The parameters that build ``style`` from the terminal's default."""
    if style.opaque:
        return style.opaque
    codes = [str(code) for code in _ATTRIBUTES if style.attributes & (1 << code)]
    return ";".join(codes + [colour for colour in (style.fg, style.bg) if colour])


def _opaque(style: Style, rest: str) -> Style:
    """``style`` followed by parameters this module does not interpret."""
    built = _parameters(style)
    return Style(opaque=f"{built};{rest}" if built else rest)


def _extended_colour(params: list[str], index: int) -> bool:
    """Whether ``38``/``48`` at ``index`` is a whole 256-colour or true-colour parameter run."""
    rest = params[index + 1:]
    if rest[:1] == ["5"]:
        return len(rest) >= 2 and rest[1].isdigit()
    return rest[:1] == ["2"] and len(rest) >= 4 and all(part.isdigit() for part in rest[1:4])
