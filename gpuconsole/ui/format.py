"""Display helpers shared by the panes and the text snapshot: money, ages, sizes, short names, bars.

Display-only logic lives here, on the UI side; the core hands out raw numbers.
"""

from __future__ import annotations

import re

import humanize
from rich.text import Text

BAR_FULL = "█"
BAR_EMPTY = "░"


def money(amount: float) -> str:
    """``$1,234`` for big sums, ``$12.34`` for small ones."""
    if abs(amount) >= 1000:
        return f"${amount:,.0f}"
    return f"${amount:,.2f}"


def age(seconds: float) -> str:
    """A compact age like kubectl prints it: ``45s``, ``12m``, ``3h20m``, ``4d``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h}h{m:02d}m" if h < 10 else f"{h}h"
    d, h = divmod(s // 3600, 24)
    return f"{d}d{h}h" if d < 10 else f"{d}d"


def mib(value: float) -> str:
    """MiB as a short binary size: ``512Mi``, ``40.0Gi``."""
    return humanize.naturalsize(value * 1024 * 1024, binary=True, format="%.1f").replace(" ", "").replace("iB", "i")


_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


def short_node(name: str | None) -> str:
    """``ip-10-0-1-23.ec2.internal`` → ``ip-10-0-1-23``: the cluster-local suffix adds nothing.
    An ACK node's ``cn-hangzhou.192.168.0.23`` → ``192.168.0.23``: there the address tells it apart."""
    if not name:
        return "-"
    head, _, rest = name.partition(".")
    return rest if _IPV4.fullmatch(rest) else head


def short_model(name: str) -> str:
    """``NVIDIA A100-SXM4-80GB`` → ``A100-80GB``; ``Tesla T4`` → ``T4``: the words that differ
    (``NVIDIA A100 80GB PCIe``, an Azure NC A100 v4's board, → ``A100-80GB`` too)."""
    words = name.replace("NVIDIA ", "").replace("Tesla ", "").removesuffix(" PCIe")
    parts = words.split("-")
    if len(parts) >= 3 and parts[1].startswith(("SXM", "PCIE")):
        return f"{parts[0]}-{parts[-1]}"
    return words.replace(" HBM3", "").replace(" ", "-")


def bar(percent: float, width: int) -> str:
    """A text gauge of ``width`` cells."""
    p = min(max(percent, 0.0), 100.0)
    filled = round(p / 100.0 * width)
    return BAR_FULL * filled + BAR_EMPTY * (width - filled)


# Control characters (C0 but tab and newline, DEL, C1) spelled out: a name, a log line or an
# error from data that carries an escape sequence is shown as ``\x1b[2J``, never sent to the
# terminal. The one place that says what inert text is, on screen and in every command's output.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))}
# In a command's output a carriage return that ends a line (CSV's CRLF) stays, and DEL and the C1
# controls are written ``\u009b``, as JSON writes them, so a JSON answer stays valid JSON.
_STREAM = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x0d), *range(0x0e, 0x20))} | {
    c: f"\\u{c:04x}" for c in range(0x7f, 0xa0)}
_LONE_CR = re.compile(r"\r(?!\n)")


def inert(words: str, *, stream: bool = False) -> str:
    """``words`` with every control character spelled out, so the terminal draws it as text.

    Args:
        stream: for a command's output (see :data:`_STREAM`): tab, newline and a carriage return
            that ends a line are kept; a carriage return that would let the rest of a line
            overwrite its start is not.
    """
    if _CONTROL.search(words) is None:  # the usual case: a search in C, no copy
        return words
    if not stream:
        return words.translate(_CONTROLS)
    text = words.translate(_STREAM)
    return _LONE_CR.sub(r"\\x0d", text) if "\r" in text else text


def inert_text(text: Text) -> Text:
    """``text`` with every control character spelled out, its styles kept (each spelled
    character takes the style the character had); the same object when it has none."""
    plain = text.plain
    if _CONTROL.search(plain) is None:
        return text
    out = text.copy()
    for found in reversed(list(_CONTROL.finditer(plain))):
        at = found.start()
        spelled = Text(inert(plain[at]))
        for span in text[at:at + 1].spans:
            spelled.stylize(span.style)
        out = out[:at] + spelled + out[at + 1:]
    return out
