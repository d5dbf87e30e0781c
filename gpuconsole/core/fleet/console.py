"""The Console: the one door the UI and the CLI use to see and change the fleet.

It holds the Hub (polling), the cache (:class:`FleetCache`) and the session's :class:`Services`
(built by :mod:`~gpuconsole.core.fleet.wiring`), composes the readings into one immutable
:class:`FleetSnapshot` (:func:`~gpuconsole.core.fleet.compose.compose`) and hands it to
subscribers: at once when a source's state changed, else once per round of answers
(:class:`~gpuconsole.core.fleet.coalescer.PublishCoalescer`); as polling starts, the sources'
first results make one snapshot together. Subscribers are called from worker threads; the UI
forwards the snapshot to its event loop as a message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpuconsole.core.fleet.cache import HISTORY_POINTS, FleetCache
from gpuconsole.core.fleet.coalescer import COALESCE_S, PublishCoalescer
from gpuconsole.core.fleet.compose import Readings, compose
from gpuconsole.core.fleet.contexts import context_source, kube_contexts
from gpuconsole.core.fleet.hub import Hub
from gpuconsole.core.fleet.options import ConsoleOptions
from gpuconsole.core.fleet.periodic import PeriodicJob, PeriodicJobs
from gpuconsole.core.fleet.services import Services
from gpuconsole.core.fleet.tls_config import apply_tls_config
from gpuconsole.core.fleet.wiring import Wires, build_services, make_hub, poll_policy, with_jobs
from gpuconsole.model import Alert, Budget, CloudReading, FleetSnapshot, GpuReading, GpuSample, Severity, SourceKind, SourceState

if TYPE_CHECKING:  # the Store pulls in sqlite-utils: imported only where a database is used
    from gpuconsole.core.fleet.store import Store

__all__ = ["COALESCE_S", "HISTORY_POINTS", "Console", "ConsoleOptions", "Subscriber"]

log = logging.getLogger(__name__)

COST_EXPLORER_CHECK_S = 300.0  # how often the billing watcher looks whether an answer is due

Subscriber = Callable[[FleetSnapshot], None]


class Console:
    """Live state of the fleet and the actions on it.

    Args:
        options: sources, database and polling settings.
        store: an open Store; ``None`` runs without cache and history (tests, ``--no-db``).
        open_store: opens the Store in the background when the console starts, so the first
            frame does not wait for SQLite; the cached state appears as soon as it is read.
            A failure to open is shown as an alert and the console goes on without a cache.
    """

    def __init__(self, options: ConsoleOptions, store: Store | None = None, *,
                 open_store: Callable[[], Store] | None = None) -> None:
        self.options = options
        self.clock = options.clock
        self.cache = FleetCache(store, lambda: self.options.sources, self.clock, open_store)
        tls_problem = apply_tls_config(options.config_path)  # before any source connects
        if tls_problem:
            self.cache.alerts.append(Alert(Severity.WARNING, "config", tls_problem, options.clock()))
        self._hygiene_alerts: tuple[Alert, ...] = ()
        self._channel_alerts: tuple[Alert, ...] = ()  # the [[notify]] channels that fail
        # who sends this host's alerts to the [[notify]] channels ("": nobody); None: none configured
        self.alert_sender: str | None = None
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._composed_states: tuple[SourceState, ...] | None = None  # the sources' states in the last snapshot
        self._first_results: set[SourceKind] = set()  # the sources started whose first result is awaited
        self.periodic = PeriodicJobs()
        self.coalescer = PublishCoalescer(self._publish_round, self._fast_sources, options.interval)
        self._wires = Wires(source=self.source, reading=lambda kind: self.hub.reading(kind),
                            current=lambda: self._services, store=lambda: self.cache.store,
                            publish=self._publish, refresh=self.refresh)
        self.hub = self._new_hub()
        self._services = build_services(options, self._wires, store=store,
                                        store_pending=open_store is not None and store is None)
        self.snapshot = self.compose()

    # ------------------------------------------------------------------ what there is
    @property
    def services(self) -> Services:
        """The collaborators of the world on screen now (a new set after a demo or context switch)."""
        return self._services

    @property
    def store(self) -> Store | None:
        """The Store once it is open, else None."""
        return self.cache.store

    @property
    def demo(self) -> bool:
        return self.options.sources.demo

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """Every budget the console evaluates (demo, configuration file, Store)."""
        return self._services.budget_ops.budgets()

    def source(self, kind: SourceKind) -> Any:
        """The source polled now for ``kind`` (None where there is none)."""
        runner = self.hub.runners.get(kind)
        return runner.source if runner else None

    def readings(self) -> Readings:
        """The sources' latest readings and statuses, with the console's own alerts."""
        return Readings.of(self.hub.reading, self.hub.statuses(),
                           (*self.cache.alerts, *self._hygiene_alerts, *self._channel_alerts))

    def compose(self) -> FleetSnapshot:
        """A snapshot of the readings of now (composed, not handed on)."""
        return compose(self.readings(), self._services, self.clock())

    # ------------------------------------------------------------------ life
    def subscribe(self, callback: Subscriber) -> None:
        """Call ``callback`` (from a worker thread) with every new snapshot."""
        self._subscribers.append(callback)

    def start(self, *, open_store: bool = True) -> None:
        """Start polling; with ``open_store=False`` the caller opens the Store later
        (:meth:`open_store_in_background`), e.g. once the first complete frame is painted."""
        self._first_results = set(self.hub.runners)
        self.hub.start()
        if open_store:
            self.open_store_in_background()
        if self._services.cost_explorer is not None:
            self.periodic.start(PeriodicJob("cost-explorer", COST_EXPLORER_CHECK_S, self._watch_billing,
                                                at_start=False))
        from gpuconsole.core.access.key_hygiene import LAUNCH_CHECK_S, KeyHygiene

        hygiene = KeyHygiene(None, None, self._services.guard.audit)
        self.periodic.start(PeriodicJob("key-hygiene", LAUNCH_CHECK_S, lambda: self._check_keys(hygiene),
                                            wakeable=True))
        from gpuconsole.core.notify.status import HEALTH_CHECK_S, ChannelWatch

        watch = ChannelWatch(self.options.config_path)
        self.periodic.start(PeriodicJob("notify-health", HEALTH_CHECK_S, lambda: self._check_channels(watch)))
        self.subscribe(lambda snapshot: self._services.autopilot.observe(snapshot))  # the autopilot of the moment

    def stop(self) -> None:
        self.periodic.stop()
        self.coalescer.stop()
        self.hub.stop()

    def close(self) -> None:
        self.stop()
        self._services.autopilot.close()
        self._services.budget_ops.close()
        self.cache.close()

    def refresh(self) -> None:
        """Poll every source now, and check the keys again (after every action)."""
        self.hub.refresh()
        self.periodic.wake()

    def wait_for_first_answers(self, timeout: float) -> None:
        """Block until every source answered once and the snapshot shows those answers (or
        ``timeout``): for the headless commands. The first results are published together, a
        moment after the last of them came, so an answer alone is not yet in the snapshot."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(r.polls for r in self.hub.runners.values()) and not any(
                    s.state is SourceState.CONNECTING for s in self.snapshot.sources if s.kind in self.hub.runners):
                return
            time.sleep(0.02)

    # ------------------------------------------------------------------ the Store
    def open_store_in_background(self) -> None:
        """Open the Store given as ``open_store`` in a thread (once; later calls do nothing)."""
        self.cache.open_in_background(self._store_opened)

    def _store_opened(self, store: Store | None) -> None:
        services = self._services
        services.budget_ops.attach_store(store)
        if store is not None:
            self.cache.seed(self.hub, use_cache=self.options.use_cache)
            if services.cost_explorer is not None:
                services.cost_explorer.use_store(store)
        self._publish()

    def gpu_history(self, uuid: str, seconds: float) -> list[GpuSample]:
        """The last ``seconds`` of one GPU's samples (blocking: call from a worker): from a GPU
        source that keeps its own history first, else the Store."""
        return self.cache.gpu_history(self.source(SourceKind.GPUS), uuid, seconds)

    def load_cloud_history(self) -> None:
        """Read CloudTrail for the instances polled and the EBS volumes now (blocking), then
        compose: a command prints figures that include the history, not the first poll's."""
        reading = self.hub.reading(SourceKind.CLOUD)
        if isinstance(reading, CloudReading):
            self._services.cloud.load_history(reading.instances, self.clock())
        self._publish()

    # ------------------------------------------------------------------ switching worlds
    def switch_to_demo(self) -> None:
        """Replace every source with the simulated world (the user asked for the demo)."""
        old_hub, old = self.hub, self._services
        self.options.sources = replace(self.options.sources, demo=True, gpus="auto")
        self.hub = self._new_hub()
        old.budget_ops.set_demo(self.clock())
        old.autopilot.close()
        self._services = build_services(self.options, self._wires, store=self.cache.store, keep=old)
        threading.Thread(target=old_hub.stop, daemon=True).start()
        self._first_results = set(self.hub.runners)
        self.hub.start()
        self._publish()

    def kube_contexts(self) -> tuple[tuple[str, ...], str | None]:
        """The kubeconfig's contexts and the one in use (reads files: call from a worker).

        Raises:
            ActionError: no Kubernetes source, or a kubeconfig that cannot be read.
        """
        return kube_contexts(self.source(SourceKind.JOBS))

    def switch_context(self, name: str) -> None:
        """Watch the jobs of kubeconfig context ``name`` instead (like k9s ``:ctx``); the other
        sources keep running. Raises :class:`ActionError` for a context the kubeconfig lacks."""
        self.options.sources, source = context_source(self.source(SourceKind.JOBS), self.options.sources, name,
                                                      self.clock)
        self.hub.replace(SourceKind.JOBS, source, poll_policy(source, self.options))
        self._services = with_jobs(self._services, source)
        self._publish()

    # ------------------------------------------------------------------ composition
    def _new_hub(self) -> Hub:
        hub = make_hub(self.options, self._on_update)
        self.cache.seed(hub, use_cache=self.options.use_cache)
        return hub

    def _fast_sources(self) -> set[SourceKind]:
        """The live sources polled at the console's interval: every answer of theirs is awaited;
        so is the first result of every source started, while one is awaited."""
        return {k for k, runner in self.hub.runners.items()
                if runner.status.state is SourceState.LIVE and runner.policy.interval <= self.options.interval
                } | self._first_results

    def _on_update(self, kind: SourceKind) -> None:
        runner = self.hub.runners.get(kind)
        if kind is SourceKind.GPUS and runner is not None and isinstance(runner.reading, GpuReading):
            self._services.gpus.observe(runner.reading)  # the detail view's five minutes, before they are shown
        first = kind in self._first_results
        self._first_results.discard(kind)
        # A source's first result waits for the others' (one composition of the whole fleet and
        # one repaint for all, not one each), at most half an interval after the first came.
        if first or tuple(status.state for status in self.hub.statuses()) == self._composed_states:
            self.coalescer.answered(kind)
        else:
            self._publish()  # a source came up, failed or recovered: shown at once
        # Written after publishing, so a slow disk never delays what the user sees.
        if runner is not None and runner.status.state is SourceState.LIVE and runner.reading is not None:
            self.cache.persist(kind, runner.source.name, runner.reading)

    def _publish_round(self) -> None:
        """A round of answers is in (or waited for long enough): the first results too."""
        self._first_results = set()
        self._publish()

    def _publish(self) -> None:
        self.coalescer.composed()  # an answer from now on is composed by a later composition
        with self._lock:
            self.snapshot = snapshot = self.compose()
            self._composed_states = tuple(status.state for status in snapshot.sources)
        for callback in list(self._subscribers):
            try:
                callback(snapshot)
            except Exception:  # noqa: BLE001 - a broken subscriber must not stop polling
                log.exception("snapshot subscriber failed")

    # ------------------------------------------------------------------ periodic jobs
    def _watch_billing(self) -> None:
        """Ask Cost Explorer when its answer is due (a few times a day), off every other path."""
        explorer = self._services.cost_explorer
        if explorer is None:
            return
        try:
            if explorer.refresh():
                self._publish()
            if explorer.resources_due():  # once a day: yesterday's bill per instance
                explorer.fetch_resources()
                self._publish()
        except Exception as exc:  # noqa: BLE001 - billing data is optional; say why it is missing
            log.info("Cost Explorer: %s", exc)

    def _check_keys(self, hygiene: Any) -> None:
        """Key age, credential expiry and insecure launches: at start, then hourly."""
        hygiene.cloud, hygiene.jobs = self.source(SourceKind.CLOUD), self.source(SourceKind.JOBS)
        try:
            alerts = hygiene.check(self.snapshot.instances, self.clock())
        except Exception:  # noqa: BLE001 - a check that fails must not stop the console
            log.warning("key hygiene check failed", exc_info=True)
            alerts = self._hygiene_alerts
        if [a.message for a in alerts] != [a.message for a in self._hygiene_alerts]:
            self._hygiene_alerts = alerts
            self._publish()

    def _check_channels(self, watch: Any) -> None:
        """The notification channels that fail, from the sender's queue (every few seconds)."""
        namespaces = self.options.sources.namespaces
        alerts = watch.alerts(self.clock(), demo=self.demo, job_backend=self._services.jobs.backend,
                              namespace=namespaces[0] if namespaces else "default")
        sender_changed = watch.sender != self.alert_sender
        self.alert_sender = watch.sender
        if sender_changed or [a.message for a in alerts] != [a.message for a in self._channel_alerts]:
            self._channel_alerts = alerts
            self._publish()
