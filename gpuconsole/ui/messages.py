"""Messages that cross from the core's worker threads into the UI's event loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from gpuconsole.model import FleetSnapshot


class SnapshotUpdated(Message):
    """A new fleet snapshot. A newer one replaces a queued older one: the UI never lags behind."""

    def __init__(self, snapshot: FleetSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotUpdated)
