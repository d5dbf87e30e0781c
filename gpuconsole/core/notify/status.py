"""What a console shows of the sender without being it: who sends, and each channel's health.

:func:`sender_status` reads the sender's lock (or Lease) holder and the queue's per-channel
failures; :func:`channel_alerts` turns a failing channel into the Overview / Sources alert
``notify channel NAME failing for 2 min: …`` (its host only, never a secret);
:class:`ChannelWatch` is how a console reads them, now and then, off its UI thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuconsole.core.notify import outbox_path, sender_lock_path
from gpuconsole.core.notify.config import Channel
from gpuconsole.core.notify.outbox import ChannelHealth, Outbox
from gpuconsole.model import Alert, Severity

HEALTH_CHECK_S = 5.0  # how often a console reads the channels' health


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


def queue_path(demo: bool) -> Path | None:
    """Where the sender keeps its episodes and queues: :func:`outbox_path`, or a demo's own
    (``notify.db`` in ``$GPUCONSOLE_DEMO_DIR``; None when unset: a demo's is in memory)."""
    from gpuconsole.core import paths

    if not demo:
        return outbox_path()
    kept = paths.demo_dir()
    return paths.private_dir(kept) / "notify.db" if kept is not None else None


class ChannelWatch:
    """The channels' failures as a console shows them, read from the sender's queue.

    Called from the console's poll thread every :data:`HEALTH_CHECK_S`: the config file's
    channels are read once, and without ``[[notify]]`` tables (or before any sender made its
    queue) nothing is opened and no file is made.
    """

    def __init__(self, config: Path | None) -> None:
        self.config = config
        self._channels: tuple[Channel, ...] | None = None
        self.sender: str | None = None  # who sends this host's alerts ("" none); None: no channel configured

    def alerts(self, now: float, *, demo: bool, job_backend: object = None, namespace: str = "default") -> tuple[Alert, ...]:
        if self._channels is None:
            from gpuconsole.core.config import ConfigError
            from gpuconsole.core.notify.config import load_channels

            try:
                self._channels = load_channels(self.config)
            except ConfigError:
                self._channels = ()  # the notify commands say what is wrong with the tables
        if not self._channels:
            return ()
        self.sender = current_sender(job_backend, namespace)
        path = queue_path(demo)
        if path is None or not path.exists():
            return ()
        return tuple(channel_alerts(sender_status(self._channels, path, sender_lock_path()), now))


def current_sender(job_backend: object, namespace: str) -> str | None:
    """Who sends the alerts now: the holder of the ``gpuconsole-autopilot`` Lease when the jobs
    come from a cluster, else of this host's lock ("" nobody); None when the cluster cannot be
    asked (unknown, not "nobody")."""
    from gpuconsole.backends.base import BackendError
    from gpuconsole.backends.registry import lease_for
    from gpuconsole.core.ops.autopilot.leader import LEASE_NAME, FileLeadership, default_identity

    lease = lease_for(job_backend, namespace, LEASE_NAME, default_identity(), lease_s=15) if job_backend else None
    if lease is None:
        return FileLeadership(sender_lock_path()).holder()
    try:
        return lease.current_holder()  # type: ignore[attr-defined, no-any-return]
    except BackendError:
        return None

