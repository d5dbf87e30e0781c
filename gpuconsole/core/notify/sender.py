"""The sender: snapshot after snapshot, episodes begin, fire, repeat and resolve, and every
channel's queue drains.

Level-triggered like the autopilot: each :meth:`NotifySender.cycle` reads the conditions of a
fresh snapshot, compares them with the episodes the :class:`Outbox` remembers, queues what is
new (in the same transaction that marks the episode), then tries each channel that is due. A
channel that fails waits (1 s doubling to a minute) and keeps its queue in order; nothing is
dropped and nothing delivered is sent again, across restarts too. Only the process that holds
the sender's Lease or lock calls it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpuconsole.backends.base import BackendError, one_line
from gpuconsole.core.notify.alerts import KINDS, NotifyAlert, conditions, severity_at_least
from gpuconsole.core.notify.channels import deliver
from gpuconsole.core.notify.config import Channel
from gpuconsole.core.notify.outbox import Episode, Outbox
from gpuconsole.model import FleetSnapshot, Severity

ALERTMANAGER_REPOST_S = 60.0  # active alerts re-posted at least this often (Alertmanager de-duplicates)


@dataclass(slots=True)
class CycleReport:
    """What one cycle did, for ``notify run``'s lines."""

    fired: list[NotifyAlert] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    delivered: list[tuple[str, str, str]] = field(default_factory=list)  # (channel, message id, status)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (channel, error line)

    def lines(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"event": "fired", "id": a.identity, "severity": a.severity.value,
                                      "summary": a.summary} for a in self.fired]
        out += [{"event": "resolved", "id": i} for i in self.resolved]
        out += [{"event": "delivered", "channel": c, "message": m, "status": s} for c, m, s in self.delivered]
        out += [{"event": "failed", "channel": c, "error": e} for c, e in self.failed]
        return out


def wants(channel: Channel, alert: dict[str, Any] | NotifyAlert) -> bool:
    """Whether ``channel``'s ``kinds`` and ``min_severity`` let ``alert`` through (a test alert always)."""
    kind, severity = (alert.kind, alert.severity) if isinstance(alert, NotifyAlert) else (alert["kind"], alert["severity"])
    if kind == "test":
        return True
    if channel.kinds and kind not in channel.kinds:
        return False
    return severity_at_least(Severity(severity), channel.min_severity)


def message_id(ep: Episode, status: str, n: int = 0) -> str:
    """Stable for an episode and what the message says: queued twice, it is one message."""
    return f"{ep.identity}@{ep.started:.0f}:{status}:{n}"


def body(ep: Episode, status: str, alert: dict[str, Any], ends_at: float | None = None, n: int = 0) -> dict[str, Any]:
    """A queued message; ``id`` is its :func:`message_id` (a FIFO topic de-duplicates by it)."""
    return {"id": message_id(ep, status, n), "status": status, "alert": alert, "starts_at": ep.started,
            "ends_at": ends_at}


class NotifySender:
    """Turns snapshots into messages on ``channels``, remembering everything in ``outbox``."""

    def __init__(self, channels: Iterable[Channel], outbox: Outbox, clock: Callable[[], float] = time.time) -> None:
        self.channels = tuple(channels)
        self.outbox = outbox
        self.clock = clock
        self._posted: dict[str, float] = {}

    def cycle(self, snapshot: FleetSnapshot, extra: Iterable[NotifyAlert] = ()) -> CycleReport:
        """Observe ``snapshot``'s conditions (and ``extra`` ones), then deliver what is due."""
        report = CycleReport()
        found = conditions(snapshot)
        for alert in extra:
            found[alert.identity] = alert.with_demo() if snapshot.demo else alert
        now = self.clock()
        self.observe(found, now, report)
        self.flush(now, report)
        return report

    def observe(self, found: dict[str, NotifyAlert], now: float, report: CycleReport) -> None:
        active = self.outbox.active()
        for identity, alert in found.items():
            wire = msgspec.to_builtins(alert)
            ep = active.get(identity)
            if ep is None:
                since = alert.since if alert.since is not None and alert.since <= now else now
                self.outbox.begin(identity, since, wire)
                ep = Episode(identity, since, None, None, wire)
            elif ep.alert != wire:
                self.outbox.update_alert(identity, wire)
            kind = KINDS.get(alert.kind)
            if ep.fired is None:
                if now - ep.started >= (kind.for_s if kind else 0.0):
                    msgs = [(message_id(ep, "firing"), c.name, "firing", body(ep, "firing", wire))
                            for c in self.channels if wants(c, alert)]
                    self.outbox.mark(identity, fired=now, messages=msgs, now=now)
                    report.fired.append(alert)
                continue
            repeats = []
            for c in self.channels:
                n = int((now - ep.fired) // c.repeat_s)
                if c.kind != "alertmanager" and n >= 1 and wants(c, alert):
                    repeats.append((message_id(ep, "firing", n), c.name, "firing", body(ep, "firing", wire, n=n)))
            if repeats:
                self.outbox.queue(identity, repeats, now)
        for identity, ep in active.items():
            if identity in found:
                continue
            if ep.fired is None:
                self.outbox.drop(identity)
                continue
            msgs = [(message_id(ep, "resolved"), c.name, "resolved", body(ep, "resolved", ep.alert, now))
                    for c in self.channels if wants(c, ep.alert)]
            self.outbox.mark(identity, resolved=now, messages=msgs, now=now)
            report.resolved.append(identity)

    def flush(self, now: float, report: CycleReport | None = None) -> None:
        """Try every channel that is due (not waiting out a failure)."""
        report = report if report is not None else CycleReport()
        firing = [ep for ep in self.outbox.active().values() if ep.fired is not None]
        for channel in self.channels:
            if not self.outbox.channel_due(channel.name, now):
                continue
            waiting = self.outbox.waiting(channel.name)
            if channel.kind == "alertmanager":
                if not waiting and now - self._posted.get(channel.name, float("-inf")) < ALERTMANAGER_REPOST_S:
                    continue
                active = [body(ep, "firing", ep.alert) for ep in firing if wants(channel, ep.alert)]
                batches = [(waiting, active)]
            else:
                batches = [([m], []) for m in waiting]
            for messages, active in batches:
                try:
                    deliver(channel, [m.body for m in messages], active, now)
                except BackendError as exc:
                    first = waiting.index(messages[0]) if messages else len(waiting)
                    rest = [m.id for m in waiting[first:]]  # the failed one and those behind it
                    self.outbox.failed(channel.name, rest, one_line(exc), now)
                    report.failed.append((channel.name, one_line(exc)))
                    break
                self.outbox.delivered(channel.name, [m.id for m in messages], now)
                self._posted[channel.name] = now
                report.delivered += [(channel.name, m.id, m.status) for m in messages]

    def test(self, channel: Channel, alert: NotifyAlert) -> None:
        """Send ``alert`` through ``channel``, then its resolve, now (nothing queued).

        Raises:
            BackendError: the channel failed (one line).
        """
        now = self.clock()
        ep = Episode(alert.identity, now, now, None, msgspec.to_builtins(alert))
        firing = body(ep, "firing", ep.alert)
        deliver(channel, [firing], [firing] if channel.kind == "alertmanager" else [], now)
        deliver(channel, [body(ep, "resolved", ep.alert, self.clock())], [], self.clock())
