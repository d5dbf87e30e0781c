"""The runs of real cloud instances: CloudTrail's history, read once per instance, then what the
console observes between polls.

A describe call tells only the state now and the last start (``LaunchTime``), so an instance
stopped and started again would lose its earlier runs, and one launched seconds ago would show
seconds of spend where EC2 bills a minute. :class:`RunBook` keeps, per instance, the starts and
ends CloudTrail recorded (the last 90 days) and those it saw itself, and turns them into billing
spans (:mod:`gpuconsole.core.money.runs`) that the shared billing rules price. Where CloudTrail
is refused, the spans cover only what this console saw, and say so: ``since last start only``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from gpuconsole.core.money.runs import Event, PricePoint, billing_spans, runs_from_events
from gpuconsole.model import BillingSpan, Instance

log = logging.getLogger(__name__)

TRAIL_DAYS = 90
TRAIL_SETTING = "cloudtrail"  # Store setting per instance: "cloudtrail:i-…"
CLOUDTRAIL = "cloudtrail"
OBSERVED = "observed"
# Each cloud's own record of what ran: AWS's CloudTrail, Alibaba Cloud's ActionTrail, Azure's Activity Log.
TRAILS = {"alibaba": "actiontrail", "azure": "activity-log"}
BASIS_TEXT = {CLOUDTRAIL: "CloudTrail history", "actiontrail": "ActionTrail history",
              "activity-log": "Activity Log history", OBSERVED: "since last start only"}


class HistorySource(Protocol):
    """A cloud that can say when an instance started and stopped
    (:meth:`gpuconsole.backends.aws.source.AwsCloud.instance_history`)."""

    def instance_history(self, region: str, instance_id: str, since: float, until: float) -> tuple[Event, ...]: ...


class SettingsStore(Protocol):
    """Where CloudTrail's answers are kept between sessions (:class:`gpuconsole.core.fleet.store.Store`)."""

    def get_setting(self, key: str, default: Any = None) -> Any: ...

    def set_setting(self, key: str, value: Any) -> None: ...


class RunBook:
    """Starts and ends of each instance, from CloudTrail and from the polls (thread-safe).

    CloudTrail's answer is kept in the Store with the moment it covers up to, so a console
    started again asks only for the events since (a stop and a start while it was closed), not
    for 90 days again.

    Args:
        source: what answers ``instance_history``; None: observations only.
        store: returns the Store once it is open, or None.
    """

    def __init__(self, source: HistorySource | None, store: Callable[[], SettingsStore | None] = lambda: None) -> None:
        self.source = source
        self._store = store
        self._lock = threading.Lock()
        self._trail: dict[str, tuple[float, tuple[Event, ...]]] = {}  # id → (looked up since, events)
        self._refused: dict[str, str] = {}  # id → why CloudTrail gave nothing
        self._seen: dict[str, list[Event]] = {}
        self._billed: dict[str, bool] = {}

    # ------------------------------------------------------------------ what the polls show
    def observe(self, instance: Instance, now: float) -> None:
        """Note a start or an end if the instance's billed state changed since the last poll.

        A start is dated by ``LaunchTime`` (EC2 sets it at every start) when that is newer than
        the last event known, else by this poll; an end by this poll.
        """
        key = instance.instance_id
        billed = instance.state.billed
        with self._lock:
            before = self._billed.get(key)
            self._billed[key] = billed
            if before == billed or (before is None and not billed):
                return
            seen = self._seen.setdefault(key, [])
            if billed:
                last = max((ts for ts, _ in seen), default=None)
                seen.append((instance.launch_time if last is None or instance.launch_time > last else now, True))
            else:
                seen.append((now, False))

    # ------------------------------------------------------------------ CloudTrail
    def needs_trail(self, instance: Instance) -> bool:
        key = instance.instance_id
        return self.source is not None and key not in self._trail and key not in self._refused

    def load_trail(self, instance: Instance, now: float) -> None:
        """Read the instance's CloudTrail history once (blocking: a worker calls this)."""
        if self.source is None:
            return
        key = f"{TRAIL_SETTING}:{instance.instance_id}"
        since, until, known = self._kept(key, now)
        try:
            events = (*known, *self.source.instance_history(instance.region, instance.instance_id, until, now))
        except Exception as exc:  # noqa: BLE001 - a refusal (no permission) or an outage: observations only
            log.info("CloudTrail history of %s unavailable: %s", instance.instance_id, exc)
            with self._lock:
                self._refused[instance.instance_id] = str(exc)
            return
        events = tuple(sorted(set(events)))
        with self._lock:
            self._trail[instance.instance_id] = (since, events)
        self._keep(key, {"since": since, "until": now, "events": [[ts, starts] for ts, starts in events]})

    def _kept(self, key: str, now: float) -> tuple[float, float, tuple[Event, ...]]:
        """``(since, until, events)`` of an earlier session's answer, or a fresh 90-day window."""
        fresh = now - TRAIL_DAYS * 86400.0
        store = self._store()
        try:
            value = store.get_setting(key) if store is not None else None
            if isinstance(value, dict) and fresh <= float(value["until"]) <= now:
                events = tuple((float(ts), bool(starts)) for ts, starts in value["events"])
                return max(fresh, float(value["since"])), float(value["until"]), events
        except Exception:  # noqa: BLE001 - the cache is optional: ask CloudTrail for everything
            log.debug("kept CloudTrail history unreadable", exc_info=True)
        return fresh, fresh, ()

    def _keep(self, key: str, value: dict[str, Any]) -> None:
        store = self._store()
        if store is None:
            return
        try:
            store.set_setting(key, value)
        except Exception:  # noqa: BLE001 - the cache is optional
            log.warning("could not keep the CloudTrail history of %s", key, exc_info=True)

    # ------------------------------------------------------------------ billing
    def spans(self, instance: Instance, prices: Sequence[PricePoint], default: float) -> tuple[tuple[BillingSpan, ...], str]:
        """The instance's billing spans and where they come from (its cloud's trail:
        :data:`CLOUDTRAIL` or one of :data:`TRAILS`, or :data:`OBSERVED`); no spans when nothing
        says it ever ran."""
        key = instance.instance_id
        with self._lock:
            trail = self._trail.get(key)
            events = list(self._seen.get(key, ()))
        basis = OBSERVED
        since = instance.launch_time
        if trail is not None:
            since, trail_events = trail
            events.extend(trail_events)
            basis = TRAILS.get(instance.cloud, CLOUDTRAIL)
        return billing_spans(runs_from_events(events, since), prices, default), basis


def basis_text(instances: Sequence[Instance]) -> str:
    """What the fleet's spend covers, in the words shown beside it: "CloudTrail history" when
    every instance's runs come from its cloud's trail (each cloud's named: "Activity Log history
    + CloudTrail history"), "since last start only" when any does not, "" when the backend keeps
    its own history (the simulator)."""
    kinds = {i.history for i in instances if i.history}
    if not kinds:
        return ""
    if OBSERVED in kinds:
        return BASIS_TEXT[OBSERVED]
    return " + ".join(sorted(BASIS_TEXT.get(kind, BASIS_TEXT[CLOUDTRAIL]) for kind in kinds))
