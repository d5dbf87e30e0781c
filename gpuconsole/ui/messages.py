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

    @classmethod
    def delivered(cls, snapshot: FleetSnapshot) -> SnapshotUpdated:
        """The message for ``snapshot``, made in the core's thread that delivers it, with what
        the panes derive from a new reading of 100,000 jobs or 7,600 GPUs made there too (the
        jobs by state, their pods' UIDs read out for the GPUs' holders, the distributed ones;
        the GPUs' tally), so the UI thread only looks it up."""
        if snapshot.gpus:
            from gpuconsole.ui.panes.overview import GpuTally

            GpuTally.of(snapshot)
        if snapshot.jobs:
            from gpuconsole.core.money.attribution import job_index
            from gpuconsole.ui.panes.job_roles import with_roles
            from gpuconsole.ui.panes.job_rows import JobTally

            JobTally.of(snapshot.jobs)
            job_index(snapshot.jobs).prepare()
            with_roles(snapshot.jobs)
        return cls(snapshot)
