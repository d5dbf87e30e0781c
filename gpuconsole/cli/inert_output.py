"""Every line the command line writes is inert: control characters that came from data (a
name, a tag, an instance id typed with an escape sequence in it, an error an API returned) are
spelled out, never sent to the terminal as an escape sequence or an OSC 52 clipboard write.

The tables already spell out what they show (:mod:`gpuconsole.cli.table`); this is the last
guard, for every other line: standard output and standard error are wrapped while a command
runs. C0 controls but tab, newline and a line-ending CR are written as ``\\x1b``; DEL and the C1 controls as
``\\u009b``, which is also how JSON writes them, so a JSON answer stays valid JSON. The
full-screen console draws through its own driver and is not wrapped.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterator
from typing import TextIO

_SPELLED = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x0d), *range(0x0e, 0x20))} | {
    c: f"\\u{c:04x}" for c in range(0x7f, 0xa0)}
_LONE_CR = re.compile(r"\r(?!\n)")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def spelled(text: str) -> str:
    """``text`` with its control characters spelled out: tab, newline and a carriage return
    that ends a line (CSV's CRLF) are kept; a carriage return that would let the rest of a line
    overwrite its start is not."""
    if _CONTROL.search(text) is None:  # the usual case: a search in C, no copy
        return text
    text = text.translate(_SPELLED)
    return _LONE_CR.sub(r"\\x0d", text) if "\r" in text else text


class InertStream(io.TextIOBase):
    """A text stream that writes to ``inner`` with control characters spelled out."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(spelled(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def fileno(self) -> int:
        return self.inner.fileno()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")


@contextlib.contextmanager
def inert_streams() -> Iterator[None]:
    """Standard output and error inert while the block runs."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(out), InertStream(err)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        sys.stdout, sys.stderr = out, err


@contextlib.contextmanager
def plain_streams() -> Iterator[None]:
    """The streams as they were before :func:`inert_streams` (the full-screen console)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = out.inner if isinstance(out, InertStream) else out
    sys.stderr = err.inner if isinstance(err, InertStream) else err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
