"""The account's actual spend from Cost Explorer, asked for sparingly.

Cost Explorer bills every request (a cent a page), and its numbers move a few times a day at
most, so :class:`CostExplorer` keeps the last answer in the Store with the time it was fetched,
shows that (with its age) in between, and refuses to ask more than ``max_calls_per_day`` times
within a UTC day. The count lives in the Store too, so restarting the console, or a second
console on the same cache, does not reset it; without a Store (or when it fails) the count is
kept in memory for this process.

Every attempt counts, a failed one included: a failing endpoint cannot be asked without end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from gpuconsole.backends.base import BillingReports, ResourceCosts
from gpuconsole.core.money.costs import month_start
from gpuconsole.core.money.periods import RESOURCE_DAYS
from gpuconsole.model import CostLine, from_jsonable, to_jsonable

log = logging.getLogger(__name__)

DEFAULT_MAX_CALLS_PER_DAY = 4
SETTING = "cost_explorer"

Answer = tuple[tuple[CostLine, ...], float]  # lines, fetched at (POSIX seconds)
ResourceRow = tuple[str, str, float]  # resource id, UTC day ("2026-11-30"), dollars
ResourceAnswer = tuple[tuple[ResourceRow, ...], float]  # rows, fetched at


CostSource = BillingReports  # a cloud that reports billed spend


class SettingsStore(Protocol):
    """Where the answer and the count are kept (:class:`gpuconsole.core.fleet.store.Store`)."""

    def get_setting(self, key: str, default: Any = None) -> Any: ...

    def set_setting(self, key: str, value: Any) -> None: ...


class CallLimitReached(Exception):
    """Today's Cost Explorer requests are used up; the cached answer is all there is."""


class CostExplorer:
    """Month-to-date actual spend, cached, with a daily bound on requests.

    Args:
        provider: what answers ``cost_and_usage``.
        store: where the answer and the count of today's calls are kept; None keeps them in
            memory only.
        clock: POSIX seconds now.
        max_calls_per_day: requests allowed within one UTC day.
        group_by_tag: a tag key (Owner, Project…) to split the spend by; None gives spend per day.
        key: the Store setting names (``<key>.calls``, ``<key>.answer.<grouping>``); give each
            account its own.
    """

    def __init__(self, provider: CostSource, store: SettingsStore | None, clock: Callable[[], float] = time.time,
                 max_calls_per_day: int = DEFAULT_MAX_CALLS_PER_DAY, *, group_by_tag: str | None = None,
                 key: str = SETTING) -> None:
        self.provider = provider
        self.store = store
        self.clock = clock
        self.max_calls_per_day = max_calls_per_day
        self.group_by_tag = group_by_tag
        self._calls_key = f"{key}.calls"
        self._answer_key = f"{key}.answer.{'tag:' + group_by_tag if group_by_tag else 'day'}"
        self._resources_key = f"{key}.answer.resources"
        self._lock = threading.Lock()
        self._memory: dict[str, Any] = {}  # settings when the Store is missing or failing
        self._answer: Answer | None = None
        self._loaded = False

    def use_store(self, store: SettingsStore) -> None:
        """Keep the answer and the count in ``store`` from now on (a Store opened late); the
        calls already counted in memory still count today."""
        self.store = store
        if self._answer is None:
            self._loaded = False  # the Store may hold an answer from an earlier session

    # ------------------------------------------------------------------ what is known
    def answer(self) -> Answer | None:
        """The last answer and when it was fetched, or None when there never was one."""
        if not self._loaded:  # read once, without the lock: a fetch in flight must not block it
            stored = self._decode(self._get(self._answer_key))
            if not self._loaded:
                self._answer, self._loaded = stored, True
        return self._answer

    def total(self) -> float | None:
        """The sum of the last answer (month to date, dollars), or None."""
        answer = self.answer()
        return sum(line.amount for line in answer[0]) if answer is not None else None

    def age_text(self) -> str:
        """How old the answer is, in the words the console shows: ``3 h old``."""
        answer = self.answer()
        if answer is None:
            return "never fetched"
        age = max(0.0, self.clock() - answer[1])
        if age < 60:
            return "just now"
        if age < 3600:
            return f"{int(age // 60)} min old"
        if age < 86400:
            return f"{int(age // 3600)} h old"
        return f"{int(age // 86400)} d old"

    def calls_today(self) -> int:
        """Requests made so far in the current UTC day (by any console sharing the Store)."""
        return self._count(_day(self.clock()))

    def calls_left(self) -> int:
        return max(0, self.max_calls_per_day - self.calls_today())

    def due(self, max_age_s: float | None = None) -> bool:
        """Whether :meth:`refresh` would ask: the answer is older than ``max_age_s`` (by default
        a day spread over the allowed calls) and a call is left today."""
        if max_age_s is None:
            max_age_s = 86400.0 / max(1, self.max_calls_per_day)
        answer = self.answer()
        stale = answer is None or self.clock() - answer[1] >= max_age_s
        return stale and self.calls_left() > 0

    # ------------------------------------------------------------------ asking
    def fetch(self) -> Answer:
        """Ask Cost Explorer for month-to-date spend now (blocking: call from a worker).

        Raises:
            CallLimitReached: today's requests are used up.
            BackendError: the provider's failure (the attempt still counts).
        """
        with self._lock:
            now = self._count_a_call()
            lines = tuple(self.provider.cost_and_usage(month_start(now), now, self.group_by_tag))
            fetched = self.clock()
            self._answer = (lines, fetched)
            self._loaded = True
            self._set(self._answer_key, {"lines": to_jsonable(lines), "fetched_at": fetched})
            return self._answer

    def _count_a_call(self) -> float:
        """Count one request against today's limit (the caller holds the lock); returns now.

        Raises:
            CallLimitReached: today's requests are used up.
        """
        now = self.clock()
        day = _day(now)
        used = self._count(day)
        if used >= self.max_calls_per_day:
            raise CallLimitReached(
                f"Cost Explorer already asked {used} times today (limit {self.max_calls_per_day}); "
                "showing the last answer until 00:00 UTC")
        self._set(self._calls_key, {"day": day, "count": used + 1})
        return now

    # ------------------------------------------------------------------ per resource
    def fetch_resources(self, days: int = RESOURCE_DAYS) -> ResourceAnswer:
        """Ask for each instance's and volume's daily cost over the last ``days`` whole days and
        today (blocking), under the same daily limit as :meth:`fetch`.

        Raises:
            CallLimitReached: today's requests are used up.
            BackendError: the provider's failure, e.g. an account that has not opted in to
                resource-level data (the attempt still counts).
        """
        with self._lock:
            now = self._count_a_call()
            start = now - min(days, RESOURCE_DAYS) * 86400.0
            rows = tuple(self.provider.resource_costs(start, now)) if isinstance(self.provider, ResourceCosts) else ()
            fetched = self.clock()
            self._set(self._resources_key, {"rows": [list(r) for r in rows], "fetched_at": fetched})
            return rows, fetched

    def resources(self) -> ResourceAnswer | None:
        """The last per-resource answer and when it was fetched, or None."""
        value = self._get(self._resources_key)
        if not isinstance(value, dict):
            return None
        try:
            rows = tuple((str(r[0]), str(r[1]), float(r[2])) for r in value.get("rows", ()))
            return rows, float(value["fetched_at"])
        except (ValueError, KeyError, TypeError, IndexError):
            return None

    def resources_due(self) -> bool:
        """Whether the per-resource answer is missing or from before today (UTC), with a call left
        and a provider that has the call."""
        if not isinstance(self.provider, ResourceCosts) or self.calls_left() <= 0:
            return False
        answer = self.resources()
        return answer is None or _day(answer[1]) != _day(self.clock())

    def refresh(self, max_age_s: float | None = None) -> bool:
        """Fetch when :meth:`due`; returns whether it asked. Errors of the ask propagate."""
        if not self.due(max_age_s):
            return False
        try:
            self.fetch()
        except CallLimitReached:  # another console used the last call in between
            return False
        return True

    # ------------------------------------------------------------------ the Store
    def _count(self, day: str) -> int:
        stored = self._get(self._calls_key)
        memory = self._memory.get(self._calls_key)
        counts = [int(v.get("count", 0)) for v in (stored, memory)
                  if isinstance(v, dict) and v.get("day") == day]
        return max(counts, default=0)

    def _get(self, key: str) -> Any:
        if self.store is not None:
            try:
                return self.store.get_setting(key)
            except Exception:  # noqa: BLE001 - the cache is optional; memory stands in
                log.warning("could not read %s from the cache", key, exc_info=True)
        return self._memory.get(key)

    def _set(self, key: str, value: Any) -> None:
        self._memory[key] = value
        if self.store is not None:
            try:
                self.store.set_setting(key, value)
            except Exception:  # noqa: BLE001 - the cache is optional; memory stands in
                log.warning("could not write %s to the cache", key, exc_info=True)

    @staticmethod
    def _decode(value: Any) -> Answer | None:
        if not isinstance(value, dict):
            return None
        try:
            lines = from_jsonable(tuple[CostLine, ...], value.get("lines", []))
            return lines, float(value["fetched_at"])
        except (ValueError, KeyError, TypeError):
            return None


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).date().isoformat()
