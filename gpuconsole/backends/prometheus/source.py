"""Whole-fleet GPU telemetry from Prometheus, where NVIDIA's DCGM exporter publishes it.

:class:`PrometheusGpus` sends one instant query per metric for the whole fleet (never one per
GPU) over one keep-alive pool (:class:`~gpuconsole.backends.prometheus.client.PrometheusClient`),
and re-reads the series that change seldom only now and then. Failures are the one-line errors
of :mod:`gpuconsole.backends.base`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from gpuconsole.backends.base import BackendError, Capability
from gpuconsole.backends.prometheus import answers as pa
from gpuconsole.backends.prometheus import mapping as pm
from gpuconsole.backends.prometheus.client import (  # noqa: F401 - the settings and variables are named here too
    PASSWORD_ENV,
    TOKEN_ENV,
    PrometheusClient,
    PrometheusSettings,
)
from gpuconsole.model import GpuReading, GpuSample

log = logging.getLogger(__name__)

SLOW_EVERY_S = 15.0  # how often the identity labels and the seldom-changing values are read again


class PrometheusGpus:
    """Every GPU the DCGM exporter reports to one Prometheus, behind the GPU source interface.

    Args:
        settings: where and how to connect (checked by :meth:`PrometheusSettings.check`).
        env: where the token and password variables are read.
    """

    capabilities: frozenset[Capability] = frozenset({Capability.MIG, Capability.HISTORY})

    def __init__(self, settings: PrometheusSettings, env: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.env = env
        self._client = PrometheusClient(settings, env)
        self.host = self._client.host
        self.name = self._client.name
        # The Hub waits this long for a poll: a request's own timeout is reported as such first.
        self.poll_timeout = 2.0 * settings.timeout
        self._queries = pm.instant_queries(settings.selector)
        self._by_uuid = True
        self._roster: pa.Roster | None = None  # what the identity labels name, read every SLOW_EVERY_S
        self._slow: dict[str, pa.Column] = {}
        self._size: pa.Column | None = None  # memory size (used + free) per GPU and instance at the last full read
        # The last answer of each query read every SLOW_EVERY_S (without its times), and what was read from it.
        self._kept: dict[str, tuple[bytes, pa.Column | pa.Roster]] = {}
        self._slow_at = 0.0
        self._polled_at: float | None = None  # when the last poll began (monotonic)
        # The read of the seldom-changing answers planned between two polls: its thread, and the
        # event that starts it before its moment (see _plan_read_between_polls).
        self._between: tuple[threading.Thread, threading.Event] | None = None
        self._between_failed = False  # that read failed: the next poll reads everything itself
        self._state = threading.Lock()  # the kept answers, replaced by that read while the console runs
        self._closed = threading.Event()

    # ------------------------------------------------------------------ GpuSource
    def poll_gpus(self) -> GpuReading:
        """Every GPU of the fleet: one instant query per metric, for the whole fleet.

        The metrics that change between scrapes are read on every poll. The identity labels
        (model, pods) and the values that seldom change are read by the first poll, then every
        :data:`SLOW_EVERY_S` between two polls (half-way, so that a refresh only waits for what
        changes between scrapes), and by the poll itself when a GPU appears that they do not
        name yet, or when the last read between polls failed.

        Raises:
            BackendTimeout, BackendPermissionDenied, BackendThrottled, BackendError: see the module.
        """
        headers = self._client.headers()
        now = time.time()
        started = time.monotonic()
        gap = started - self._polled_at if self._polled_at is not None else None
        self._polled_at = started
        if self._roster is None or self._between_failed:
            self.settle()
            self._between_failed = False
            answers = self._query((pm.IDENTITY, *pm.SLOW, *pm.FAST), now, headers)
            self._keep_slow(answers, answers.get(pm.FB_USED))
        else:
            answers = self._query(pm.FAST, now, headers)
        if self._roster is not None and not self._roster.keyed_by_uuid and self._by_uuid:
            # An exporter without UUID labels: key the values by node and index from now on.
            self.settle()
            self._by_uuid = False
            self._queries = pm.instant_queries(self.settings.selector, by_uuid=False)
            self._kept.clear()
            answers = self._query(pm.FAST, now, headers)
        elif self._unnamed(answers.get(pm.ANCHOR)):
            self.settle()  # a read between polls may be naming it right now
            if self._unnamed(answers.get(pm.ANCHOR)):
                self._keep_slow(self._query((pm.IDENTITY, *pm.SLOW), now, headers), answers.get(pm.FB_USED))
        with self._state:
            roster, slow, size = self._roster, self._slow, self._size
        columns = {**slow, **{m: answers[m] for m in pm.FAST if m in answers}}
        if size is not None:
            columns[pm.FB_FREE] = pa.less(size, columns.get(pm.FB_USED))
        roster = (roster or pa.Roster({})).including(columns, first=pm.ANCHOR)
        gpus = pm.build_gpus(columns, roster)
        if not gpus:
            raise BackendError(f"Prometheus at {self.host} has no DCGM exporter series ({pm.ANCHOR}): "
                               "is the exporter scraped?")
        self._plan_read_between_polls(started, gap)
        return GpuReading(gpus, now, pm.driver_versions(roster))

    def _plan_read_between_polls(self, started: float, gap: float | None) -> None:
        """Read the seldom-changing answers half-way to the next poll (expected ``gap`` seconds
        after this one) when they will be :data:`SLOW_EVERY_S` old by then."""
        between = self._between
        if gap is None or self._closed.is_set() or (between is not None and between[0].is_alive()):
            return
        if started + gap - self._slow_at < SLOW_EVERY_S:
            return
        go = threading.Event()
        thread = threading.Thread(target=self._read_between_polls, args=(min(gap / 2.0, SLOW_EVERY_S), go),
                                  name="prometheus-seldom", daemon=True)
        self._between = (thread, go)
        thread.start()

    def _read_between_polls(self, delay: float, go: threading.Event) -> None:
        go.wait(delay)
        if self._closed.is_set():
            return
        try:
            answers = self._query((pm.IDENTITY, pm.FB_USED, *pm.SLOW), time.time(), self._client.headers())
            self._keep_slow(answers, answers.get(pm.FB_USED))
        except BaseException as exc:  # noqa: BLE001 - the next poll reads everything, and fails as it may
            log.debug("reading the seldom-changing answers between polls failed: %s", exc)
            self._between_failed = True

    def settle(self, timeout: float | None = None) -> None:
        """Finish the read of the seldom-changing answers planned between polls, if any: start
        it now if it is still waiting for its moment, and wait for it (at most ``timeout`` s)."""
        between = self._between
        if between is not None:
            thread, go = between
            go.set()
            thread.join(timeout)

    def _keep_slow(self, answers: dict[str, Any], used: pa.Column | None) -> None:
        """Keep the identity and the seldom-changing answers until the next full read. Free
        memory moves with the memory used, which every poll reads: what is kept of it is the
        memory size then (used + free), and each poll's free memory is that size less its used."""
        slow = {m: answers[m] for m in pm.SLOW if m in answers}
        free = slow.pop(pm.FB_FREE, None)
        size = pa.plus(free, used) if free is not None else None
        with self._state:
            self._roster, self._slow, self._size = answers[pm.IDENTITY], slow, size
            self._slow_at = time.monotonic()

    def _unnamed(self, column: pa.Column | None) -> bool:
        """Whether the anchor metric has a series the kept identity labels do not name."""
        if column is None:
            return False
        roster = self._roster or pa.Roster({})
        return not (column.whole.keys() <= roster.gpus.keys() and column.parts.keys() <= roster.named.keys())

    def _query(self, names: tuple[str, ...], now: float, headers: Mapping[str, str]) -> dict[str, Any]:
        """Run the named instant queries at ``now``, a few at a time; the first failure is raised.

        Returns:
            ``{metric: Column}``, and the :class:`~gpuconsole.backends.prometheus.answers.Roster`
            of the identity query under :data:`~gpuconsole.backends.prometheus.mapping.IDENTITY`.
        """
        params = {"time": f"{now:.3f}"}
        executor = self._client.executor()
        previous = self._roster
        kept = dict(self._kept)

        def one(name: str) -> pa.Column | pa.Roster:
            body = self._client.get("/api/v1/query", {"query": self._queries[name], **params}, headers, raw=True)
            seldom = name not in pm.FAST
            if seldom:
                # Read again only when it changed: these answers mostly stay the same for hours.
                same = pa.without_times(body)
                last = kept.get(name)
                if last is not None and last[0] == same:
                    return last[1]
            try:
                read = pa.read_roster(body, previous) if name == pm.IDENTITY else pa.read_values(body)
            except pa.PrometheusAnswerError as exc:
                raise BackendError(f"Prometheus at {self.host}: {exc} for {name}") from exc
            if seldom:
                self._kept[name] = (same, read)
            return read

        futures = {name: executor.submit(one, name) for name in names}
        results: dict[str, Any] = {}
        error: BaseException | None = None
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except BaseException as exc:  # noqa: BLE001 - the first failure is raised below
                error = error or exc
        if error is not None:
            raise error
        return results

    def history(self, uuid: str, since: float, until: float, step: float) -> tuple[GpuSample, ...]:
        """One GPU's utilization, memory, temperature and power from ``since`` to ``until``,
        one sample every ``step`` seconds (``query_range``), oldest first."""
        headers = self._client.headers()
        step = max(1.0, float(step))
        params = {"start": f"{since:.3f}", "end": f"{until:.3f}", "step": f"{step:g}"}
        series: dict[str, list[Any]] = {}
        for name, query in pm.history_queries(uuid, self.settings.selector).items():
            answer = self._client.get("/api/v1/query_range", {"query": query, **params}, headers)
            try:
                series[name] = pa.matrix(answer)
            except pa.PrometheusAnswerError as exc:
                raise BackendError(f"Prometheus at {self.host}: {exc}") from exc
        return pm.samples(series)

    def close(self) -> None:
        self._closed.set()
        between = self._between
        if between is not None:
            between[1].set()  # a read still waiting for its moment ends at once
        self._client.close()
