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
import sys
from collections.abc import Iterator
from typing import TextIO

from gpuconsole.ui.format import inert


def spelled(text: str) -> str:
    """``text`` as a command writes it (:func:`gpuconsole.ui.format.inert` for a stream)."""
    return inert(text, stream=True)


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
