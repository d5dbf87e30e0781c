"""What a console shows of the sender without being it: who sends, and each channel's health.

:func:`sender_status` reads the sender's lock (or Lease) holder and the queue's per-channel
failures; :func:`channel_alerts` turns a failing channel into the Overview / Sources alert
``notify channel NAME failing for 2 min: …`` (its host only, never a secret).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuconsole.core.notify.config import Channel
from gpuconsole.core.notify.outbox import ChannelHealth, Outbox
from gpuconsole.model import Alert, Severity


@dataclass(frozen=True, slots=True)
class SenderStatus:
    holder: str  # "host:pid (notify run)", "" when no sender runs
    channels: tuple[tuple[Channel, ChannelHealth], ...]


def sender_status(channels: tuple[Channel, ...], outbox_path: Path, lock_path: Path) -> SenderStatus:
    """The sender on this host (its lock) and each channel's health, read-only."""
    from gpuconsole.core.ops.autopilot.leader import FileLeadership

    holder = FileLeadership(lock_path).holder()
    if not outbox_path.exists():
        return SenderStatus(holder, tuple((c, ChannelHealth(c.name, None, "", None, 0)) for c in channels))
    outbox = Outbox(outbox_path)
    try:
        return SenderStatus(holder, tuple((c, outbox.health(c.name)) for c in channels))
    finally:
        outbox.close()


def channel_alerts(status: SenderStatus, now: float) -> list[Alert]:
    """One warning per failing channel, for the console's alerts and its Sources."""
    out = []
    for channel, health in status.channels:
        if health.failing_since is not None:
            minutes = max(0, int((now - health.failing_since) // 60))
            out.append(Alert(Severity.WARNING, f"notify:{channel.name}",
                             f"notify channel {channel.name} failing for {minutes} min, {health.waiting} waiting: "
                             f"{health.last_error}", now))
    return out
