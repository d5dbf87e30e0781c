"""The Console facade: the one door the UI and the CLI use to see and change the fleet.

It owns the Hub (polling), the Store (cache + history) and the budgets, composes the new
readings into one immutable :class:`FleetSnapshot`, and hands it to subscribers: at once when a
source's state changed (it came up, failed, recovered), else once per refresh, when every source
polled at the console's interval has answered (see :data:`COALESCE_S`). Subscribers are called
from worker threads; the UI forwards the snapshot to its event loop as a message.

Budgets come from :attr:`Console.budget_ops` (the Store, the configuration file and, in the
demo, the demo budgets); every compose evaluates them into ``snapshot.budgets``,
``snapshot.pending_actions`` and the budget alerts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gpuconsole.backends.base import BackendError, Capability
from gpuconsole.core.access.aws_roles import attach_aws_roles
from gpuconsole.core.access.guard import Guard, default_guard, demo_guard
from gpuconsole.core.access.rbac import ClusterPermissions
from gpuconsole.core.config import ConfigError, ConfigFile
from gpuconsole.core.fleet.hub import READING_TYPES, Hub, PollPolicy
from gpuconsole.core.fleet.services import Services
from gpuconsole.core.fleet.sources import SourceOptions, build_sources
from gpuconsole.core.fleet.tls_config import apply_tls_config
from gpuconsole.core.money import costs
from gpuconsole.core.money.budget_config import load_config
from gpuconsole.core.money.cost_explorer import CostExplorer
from gpuconsole.core.money.cron_costs import cronjob_costs
from gpuconsole.core.money.idle import IdleTracker, by_owner
from gpuconsole.core.money.reconcile import last_day_line
from gpuconsole.core.money.run_history import basis_text
from gpuconsole.core.money.storage import storage_cost
from gpuconsole.core.ops.actions import ActionError, ActionLog, one_line
from gpuconsole.core.ops.autopilot.rules import RuleError
from gpuconsole.core.ops.autopilot.service import AutopilotService
from gpuconsole.core.ops.budget_ops import BudgetOps
from gpuconsole.core.ops.cloud_ops import CloudOps
from gpuconsole.core.ops.gpu_ops import GpuOps
from gpuconsole.core.ops.job_ops import JobOps
from gpuconsole.model import (
    Alert,
    Budget,
    CloudReading,
    CostLine,
    CronJob,
    FleetSnapshot,
    GpuReading,
    GpuSample,
    Instance,
    InstanceState,
    Job,
    JobsReading,
    JobState,
    Market,
    Severity,
    SourceKind,
    SourceState,
)

if TYPE_CHECKING:  # the Store pulls in sqlite-utils: imported only where a database is used
    from gpuconsole.core.fleet.store import Store

log = logging.getLogger(__name__)

HOT_GPU_C = 85
CACHE_EVERY_S = 30.0
MAINTAIN_EVERY_S = 60.0
HISTORY_POINTS = 240  # samples a chart asks a history-keeping GPU source for
# Sources polled at the console's interval answer one after another, each cycle: answers that
# keep every source's state are composed into one snapshot once all of them have answered, or
# this long (at most half the interval) after the first, whichever comes first.
COALESCE_S = 0.5
COST_EXPLORER_CHECK_S = 300.0  # how often the billing watcher looks whether an answer is due

Subscriber = Callable[[FleetSnapshot], None]


@dataclass
class ConsoleOptions:
    """Everything that shapes a console session (the CLI fills it from flags)."""

    sources: SourceOptions = field(default_factory=SourceOptions)
    db_path: Path | None = None
    no_db: bool = False  # --no-db: nothing is kept on disk (cache, experiments) beyond this process
    interval: float = 1.0
    timeout: float = 5.0
    clock: Callable[[], float] = time.time
    use_cache: bool = True
    config_path: Path | None = None  # --config; None: $GPUCONSOLE_CONFIG or the user config dir
    cost_explorer_calls: int = 4  # Cost Explorer requests a day at most (each is billed); 0: none
    act_on_budgets: bool = True  # notify and run automatic budget actions as snapshots show them due
    read_only: bool = False  # --read-only: every change is denied, to everyone
    guard: Guard | None = None  # who may act, and the audit log; None: the files of this home


class Console:
    """Live state of the fleet and the actions on it.

    Args:
        options: sources, database and polling settings.
        store: an open Store; ``None`` runs without cache and history (tests, ``--no-db``).
        open_store: opens the Store in the background when the console starts, so the first
            frame does not wait for SQLite; the cached state appears as soon as it is read.
            A failure to open is shown as an alert and the console goes on without a cache.
    """

    def __init__(
        self,
        options: ConsoleOptions,
        store: Store | None = None,
        *,
        open_store: Callable[[], Store] | None = None,
    ) -> None:
        self.options = options
        self.store = store
        self._open_store = open_store
        self._store_alerts: list[Alert] = []
        tls_problem = apply_tls_config(options.config_path)  # before any source connects
        if tls_problem:
            self._store_alerts.append(Alert(Severity.WARNING, "config", tls_problem, options.clock()))
        self._hygiene_alerts: tuple[Alert, ...] = ()
        self._hygiene_wake = threading.Event()  # a refresh (after every action) checks again now
        self.clock = options.clock
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._composed_states: tuple[SourceState, ...] | None = None  # the sources' states in the last snapshot
        self._soon: threading.Timer | None = None  # the composition coming for answers that changed no state
        self._answered: set[SourceKind] = set()  # the sources that answered since the last composition
        self._soon_lock = threading.Lock()
        self._last_cached: dict[SourceKind, float] = {}
        self._last_maintain = 0.0
        self.guard = options.guard if options.guard is not None else (
            demo_guard(read_only=options.read_only) if options.sources.demo
            else default_guard(read_only=options.read_only, config=options.config_path))
        self.actions = ActionLog(guard=self.guard)
        self.idle_tracker = IdleTracker()
        self._cron_memo: tuple[object, tuple[CostLine, ...], tuple[str, ...]] = (None, (), ())
        self._stopping = threading.Event()
        self.hub = self._make_hub(options.sources)
        self.aws_roles = attach_aws_roles(self._runner_source(SourceKind.CLOUD), self.guard, options.config_path)
        self.cloud = self._make_cloud()
        self.jobs = JobOps(self._job_backend(), self.clock, self.actions)
        self.rbac = ClusterPermissions(lambda: self.jobs.control, self.clock)  # asked per namespace, kept a minute
        self.gpus = GpuOps(lambda: self._runner_source(SourceKind.GPUS), lambda: self.hub.reading(SourceKind.GPUS),  # type: ignore[arg-type,return-value]
                           self.clock, self.actions, pod_namespace=self._pod_namespace)
        self.cost_explorer = self._make_cost_explorer()
        self.budget_ops = self._make_budget_ops(store, pending=open_store is not None and store is None)
        self.autopilot = self._make_autopilot()
        self.snapshot = self._compose()

    # ------------------------------------------------------------------ set-up
    def _make_hub(self, source_options: SourceOptions) -> Hub:
        sources = build_sources(source_options, clock=self.clock)
        hub = Hub(sources, self._on_update, {kind: self._policy(source) for kind, source in sources.items()},
                  clock=self.clock)
        self._seed_from_cache(hub)
        return hub

    def _policy(self, source: object) -> PollPolicy:
        # A cloud API is polled no faster than its backend asks (rate limits cost money and
        # throttle other tools of the account), and given the time a multi-region call needs.
        interval = max(self.options.interval, float(getattr(source, "min_interval", 0.0)))
        timeout = max(self.options.timeout, float(getattr(source, "poll_timeout", 0.0)))
        return PollPolicy(interval=interval, timeout=timeout)

    def _make_cloud(self) -> CloudOps:
        runner = self.hub.runners.get(SourceKind.CLOUD)
        ops = CloudOps(runner.source if runner else None, lambda: self.store, self.clock, self.actions)
        ops.on_history = self._publish  # CloudTrail's runs or the volumes arrived: show them
        return ops

    def _make_cost_explorer(self) -> CostExplorer | None:
        """Cost Explorer for a cloud that has it (each request is billed: calls are bounded)."""
        runner = self.hub.runners.get(SourceKind.CLOUD)
        source = runner.source if runner else None
        calls = self.options.cost_explorer_calls
        if source is None or not hasattr(source, "cost_and_usage") or calls <= 0:
            return None
        return CostExplorer(source, self.store, self.clock, max_calls_per_day=calls, key=f"cost_explorer:{source.name}")

    def _watch_billing(self) -> None:
        """Ask Cost Explorer when its answer is due (a few times a day), off every other path."""
        while not self._stopping.wait(COST_EXPLORER_CHECK_S):
            explorer = self.cost_explorer
            if explorer is None:
                continue
            try:
                if explorer.refresh():
                    self._publish()
                if explorer.resources_due():  # once a day: yesterday's bill per instance
                    explorer.fetch_resources()
                    self._publish()
            except Exception as exc:  # noqa: BLE001 - billing data is optional; say why it is missing
                log.info("Cost Explorer: %s", exc)

    def _make_budget_ops(self, store: Store | None, *, pending: bool) -> BudgetOps:
        try:
            config, error = load_config(self.options.config_path), None
        except ConfigError as exc:
            config, error = ConfigFile(None), str(exc)
        sources = self.options.sources
        demo_start = (sources.sim_start if sources.sim_start is not None else self.clock()) if sources.demo else None
        return BudgetOps(
            store=store,
            store_pending=pending,
            config=config,
            config_error=error,
            cloud=lambda: self.cloud,
            jobs=self._job_backend,
            log=self.actions,
            clock=self.clock,
            demo_start=demo_start,
            act=self.options.act_on_budgets,
            on_change=self.refresh,
        )

    def _make_autopilot(self) -> AutopilotService:
        """The autopilot of this console: it runs where the console acts by itself (the
        full-screen console), on the demo's rules in a demo; one-shot commands show no rules."""
        from gpuconsole.core.ops.autopilot import leader
        from gpuconsole.core.ops.autopilot.loading import console_rules, state_path
        from gpuconsole.core.ops.autopilot.state import AutopilotState

        demo = self.options.sources.demo
        acts = self.options.act_on_budgets
        state, lead, error = AutopilotState(), None, ""
        if acts and demo:
            lead = leader.LocalLeadership("this console (demo)")
        elif acts:
            try:
                path = state_path()
                path.parent.mkdir(parents=True, exist_ok=True)
                state = AutopilotState(path)
                namespaces = self.options.sources.namespaces
                lead = leader.leadership_for(self._job_backend(), namespaces[0] if namespaces else "default",
                                             path.with_suffix(".lock"))
            except Exception as exc:  # noqa: BLE001 - the autopilot is optional: say why it is off
                error = f"the autopilot is off: its database cannot be opened: {exc}"

        def rules(st: AutopilotState) -> tuple[Any, ...]:
            if error:
                raise RuleError(error)
            return console_rules(self.options.config_path, st, demo=demo) if acts else ()

        return AutopilotService(rules, state, cloud=lambda: self.cloud, log=self.actions, clock=self.clock,
                                leadership=lead, act=acts and not self.options.read_only, on_change=self.refresh)

    def _pod_namespace(self, pod_uid: str) -> str | None:
        """The namespace of the job whose pod has ``pod_uid``, from the last jobs reading."""
        reading = self.hub.reading(SourceKind.JOBS)
        jobs = getattr(reading, "jobs", ())
        return next((j.namespace for j in jobs if j.pod_uid == pod_uid), None)

    def _job_backend(self) -> object | None:
        return self._runner_source(SourceKind.JOBS)

    def _runner_source(self, kind: SourceKind) -> object | None:
        runner = self.hub.runners.get(kind)
        return runner.source if runner else None

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """Every budget the console evaluates (demo, configuration file, Store)."""
        return self.budget_ops.budgets()

    def _seed_from_cache(self, hub: Hub) -> None:
        if self.store is None or not self.options.use_cache:
            return
        for kind, runner in hub.runners.items():
            if runner.reading is not None:
                continue  # the source answered already: its cache is older than what is shown
            cached = self.store.load_reading(self._cache_key(kind, runner.source.name), READING_TYPES[kind])
            if cached is not None:
                hub.seed(kind, cached, cached.taken_at)

    def open_store_in_background(self) -> None:
        """Open the Store given as ``open_store`` in a thread (once; later calls do nothing)."""
        opener, self._open_store = self._open_store, None
        if opener is None:
            return

        def run() -> None:
            try:
                store = opener()
            except Exception as exc:  # noqa: BLE001 - the console works without its cache
                message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                self._store_alerts.append(Alert(Severity.WARNING, "cache", f"no cache or history: {message}", self.clock()))
                self.budget_ops.attach_store(None)
            else:
                self._store_alerts.extend(Alert(Severity.WARNING, "cache", w, self.clock()) for w in store.warnings)
                self.store = store
                self._seed_from_cache(self.hub)
                self.budget_ops.attach_store(store)
                if self.cost_explorer is not None:
                    self.cost_explorer.use_store(store)
            self._publish()

        threading.Thread(target=run, name="open-store", daemon=True).start()

    def _cache_key(self, kind: SourceKind, name: str) -> str:
        # Keyed by source name, so cached demo data never shows in a real session, and for the
        # simulator by its world too, so two demo worlds never mix in one screen.
        if name == "sim":
            sim = self.options.sources
            jobs = f":{sim.demo_jobs}-jobs" if sim.demo_jobs else ""
            return f"{kind.value}:sim:{sim.seed}:{sim.demo_nodes or 'default'}{jobs}"
        return f"{kind.value}:{name}"

    @property
    def demo(self) -> bool:
        return self.options.sources.demo

    @property
    def services(self) -> Services:
        """The collaborators of the world on screen now (a new set after a demo or context switch)."""
        return Services(guard=self.guard, actions=self.actions, jobs=self.jobs, gpus=self.gpus, cloud=self.cloud,
                        rbac=self.rbac, budget_ops=self.budget_ops, autopilot=self.autopilot,
                        cost_explorer=self.cost_explorer, aws_roles=self.aws_roles, clock=self.clock,
                        demo=self.demo)

    def subscribe(self, callback: Subscriber) -> None:
        """Call ``callback`` (from a worker thread) with every new snapshot."""
        self._subscribers.append(callback)

    def start(self, *, open_store: bool = True) -> None:
        """Start polling; with ``open_store=False`` the caller opens the Store later
        (:meth:`open_store_in_background`), e.g. once the first complete frame is painted."""
        self.hub.start()
        if open_store:
            self.open_store_in_background()
        if self.cost_explorer is not None:
            threading.Thread(target=self._watch_billing, name="cost-explorer", daemon=True).start()
        threading.Thread(target=self._watch_key_hygiene, name="key-hygiene", daemon=True).start()
        self.subscribe(lambda snapshot: self.autopilot.observe(snapshot))  # the autopilot of the moment

    def _watch_key_hygiene(self) -> None:
        """Key age, credential expiry and insecure launches: at start, then hourly."""
        from gpuconsole.core.access.key_hygiene import LAUNCH_CHECK_S, KeyHygiene

        hygiene = KeyHygiene(None, None, self.guard.audit)
        while not self._stopping.is_set():
            hygiene.cloud, hygiene.jobs = self._runner_source(SourceKind.CLOUD), self._runner_source(SourceKind.JOBS)
            try:
                alerts = hygiene.check(self.snapshot.instances, self.clock())
            except Exception:  # noqa: BLE001 - a check that fails must not stop the console
                log.warning("key hygiene check failed", exc_info=True)
                alerts = self._hygiene_alerts
            if [a.message for a in alerts] != [a.message for a in self._hygiene_alerts]:
                self._hygiene_alerts = alerts
                self._publish()
            self._hygiene_wake.wait(LAUNCH_CHECK_S)
            self._hygiene_wake.clear()

    def stop(self) -> None:
        self._stopping.set()
        self._hygiene_wake.set()
        with self._soon_lock:
            if self._soon is not None:
                self._soon.cancel()
                self._soon = None
        self.hub.stop()

    def close(self) -> None:
        self.stop()
        self.autopilot.close()
        self.budget_ops.close()
        if self.store is not None:
            self.store.close()

    def refresh(self) -> None:
        self.hub.refresh()
        self._hygiene_wake.set()

    def switch_to_demo(self) -> None:
        """Replace every source with the simulated world (the user asked for the demo)."""
        old = self.hub
        self.options.sources = replace(self.options.sources, demo=True, gpus="auto")
        self.hub = self._make_hub(self.options.sources)
        self.cloud = self._make_cloud()
        self.jobs = JobOps(self._job_backend(), self.clock, self.actions)
        self.cost_explorer = None
        self.idle_tracker = IdleTracker()
        self.budget_ops.set_demo(self.clock())
        self.autopilot.close()
        self.autopilot = self._make_autopilot()
        if self.options.guard is None:  # the demo's own audit log and MFA state from here on
            self.guard = demo_guard(read_only=self.guard.read_only, user=self.guard.user)
            self.actions.guard = self.guard
        threading.Thread(target=old.stop, daemon=True).start()
        self.hub.start()
        self._publish()

    # ------------------------------------------------------------------ Kubernetes contexts
    def kube_contexts(self) -> tuple[tuple[str, ...], str | None]:
        """The kubeconfig's contexts and the one in use (reads files: call from a worker).

        Raises:
            ActionError: no Kubernetes source, or a kubeconfig that cannot be read.
        """
        runner = self.hub.runners.get(SourceKind.JOBS)
        source = runner.source if runner else None
        if source is None or not source.name.startswith("kube"):
            raise ActionError("the jobs source is not a Kubernetes cluster")
        from gpuconsole.backends import kube

        try:
            names, current = kube.contexts(source.kubeconfig)
        except BackendError as exc:
            raise ActionError(one_line(exc)) from exc
        return names, source.context or current

    def switch_context(self, name: str) -> None:
        """Watch the jobs of kubeconfig context ``name`` instead (like k9s ``:ctx``); the other
        sources keep running. Raises :class:`ActionError` for a context the kubeconfig lacks."""
        names, _ = self.kube_contexts()
        if name not in names:
            raise ActionError(f"no context {name!r} in the kubeconfig: {', '.join(names) or 'none'}")
        from gpuconsole.backends.kube import KubeJobs

        sources = self.options.sources = replace(self.options.sources, context=name)
        source = KubeJobs(sources.kubeconfig, name, sources.namespaces, watch=sources.watch_jobs)
        self.hub.replace(SourceKind.JOBS, source, self._policy(source))
        self.jobs = JobOps(self._job_backend(), self.clock, self.actions)
        self._publish()

    def wait_for_first_answers(self, timeout: float) -> None:
        """Block until every source answered once (or ``timeout``): for the headless snapshot."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(r.polls for r in self.hub.runners.values()):
                return
            time.sleep(0.02)

    # ------------------------------------------------------------------ history
    def gpu_history(self, uuid: str, seconds: float) -> list[GpuSample]:
        """The last ``seconds`` of one GPU's samples (blocking: call from a worker).

        A GPU source that keeps its own history (Prometheus: ``query_range``) answers first, at
        about :data:`HISTORY_POINTS` samples whatever the span; the Store otherwise, or when
        that source fails.
        """
        now = self.clock()
        source = self._runner_source(SourceKind.GPUS)
        if Capability.HISTORY in getattr(source, "capabilities", ()) and hasattr(source, "history"):
            try:
                return list(source.history(uuid, now - seconds, now, max(1.0, seconds / HISTORY_POINTS)))
            except BackendError as exc:
                log.info("history of %s from %s: %s; using the cache", uuid, source.name, exc)
        if self.store is None:
            return []
        return self.store.gpu_history(uuid, now - seconds, now)

    # ------------------------------------------------------------------ composition
    def _on_update(self, kind: SourceKind) -> None:
        runner = self.hub.runners.get(kind)
        if kind is SourceKind.GPUS and runner is not None and isinstance(runner.reading, GpuReading):
            self.gpus.observe(runner.reading)  # the detail view's five minutes, before they are shown
        if tuple(status.state for status in self.hub.statuses()) != self._composed_states:
            self._publish()  # a source came up, failed or recovered: shown at once
        else:
            self._publish_soon(kind)
        # Written after publishing, so a slow disk never delays what the user sees.
        if runner is not None and runner.status.state is SourceState.LIVE and runner.reading is not None:
            self._persist(kind, runner.source.name, runner.reading)

    def _publish_soon(self, kind: SourceKind) -> None:
        """Compose once every live source of the console's interval has answered since the last
        composition, or :data:`COALESCE_S` (at most half the interval) after ``kind``'s answer."""
        with self._soon_lock:
            if self._stopping.is_set():
                return
            self._answered.add(kind)
            fast = {k for k, runner in self.hub.runners.items()
                    if runner.status.state is SourceState.LIVE and runner.policy.interval <= self.options.interval}
            if fast <= self._answered:
                timer, self._soon = self._soon, None
            elif self._soon is None:
                self._soon = timer = threading.Timer(min(COALESCE_S, self.options.interval / 2.0), self._publish_due)
                timer.daemon = True
                timer.name = "compose"
                timer.start()
                return
            else:
                return
        if timer is not None:
            timer.cancel()
        self._publish()

    def _publish_due(self) -> None:
        with self._soon_lock:
            if self._soon is threading.current_thread():  # this timer's thread; not one set since
                self._soon = None
        if not self._stopping.is_set():
            self._publish()

    def _publish(self) -> None:
        with self._soon_lock:
            self._answered.clear()  # an answer from now on is composed by a later composition
        with self._lock:
            self.snapshot = snapshot = self._compose()
            self._composed_states = tuple(status.state for status in snapshot.sources)
        for callback in list(self._subscribers):
            try:
                callback(snapshot)
            except Exception:  # noqa: BLE001 - a broken subscriber must not stop polling
                log.exception("snapshot subscriber failed")

    def _persist(self, kind: SourceKind, name: str, reading: GpuReading | JobsReading | CloudReading) -> None:
        if self.store is None:
            return
        now = self.clock()
        try:
            if isinstance(reading, GpuReading):
                self.store.record_gpus(reading.gpus, reading.taken_at)
                if now - self._last_maintain >= MAINTAIN_EVERY_S:
                    self._last_maintain = now
                    self.store.maintain(now)
            if now - self._last_cached.get(kind, 0.0) >= CACHE_EVERY_S:
                self._last_cached[kind] = now
                self.store.save_reading(self._cache_key(kind, name), reading)
        except Exception:  # noqa: BLE001 - the cache is optional; the console goes on without it
            log.warning("could not write the cache", exc_info=True)

    def _compose(self) -> FleetSnapshot:
        with costs.one_moment():
            return self._compose_at(self.clock())

    def _compose_at(self, now: float) -> FleetSnapshot:
        gpu_reading = self.hub.reading(SourceKind.GPUS)
        jobs_reading = self.hub.reading(SourceKind.JOBS)
        cloud_reading = self.hub.reading(SourceKind.CLOUD)
        gpus = gpu_reading.gpus if isinstance(gpu_reading, GpuReading) else ()
        jobs = jobs_reading.jobs if isinstance(jobs_reading, JobsReading) else ()
        cronjobs = jobs_reading.cronjobs if isinstance(jobs_reading, JobsReading) else ()
        nodes = jobs_reading.nodes if isinstance(jobs_reading, JobsReading) else ()
        instances = cloud_reading.instances if isinstance(cloud_reading, CloudReading) else ()
        instances = self.cloud.price_instances(instances, now)
        idle = self.idle_tracker.update(gpus, instances, now)
        statuses = self.hub.statuses()
        billed_month, billed_note = None, ""
        if self.cost_explorer is not None:
            billed_month = self.cost_explorer.total()
            billed_note = f"Cost Explorer, {self.cost_explorer.age_text()}"
        loose = self.cloud.loose_volumes()
        spend_today = costs.spend(instances, costs.day_start(now), now) + storage_cost(loose, costs.day_start(now), now)
        spend_month = costs.spend(instances, costs.month_start(now), now) + storage_cost(loose, costs.month_start(now), now)
        basis = basis_text(instances)
        if isinstance(cloud_reading, CloudReading):
            spend_today = cloud_reading.spend_today if cloud_reading.spend_today is not None else spend_today
            spend_month = cloud_reading.spend_month if cloud_reading.spend_month is not None else spend_month
        snapshot = FleetSnapshot(
            taken_at=now,
            gpus=gpus,
            jobs=jobs,
            cronjobs=cronjobs,
            nodes=nodes,
            instances=instances,
            sources=statuses,
            spend_today=spend_today,
            spend_month=spend_month,
            burn_per_hour=costs.burn_per_hour(instances),
            idle=idle,
            billed_month=billed_month,
            billed_note=billed_note,
            spend_basis=basis,
            day_difference=self._day_difference(instances, now),
            demo=self.demo,
        )
        budget_states, pending, budget_alerts = self.budget_ops.evaluate(snapshot)
        budgets = tuple(status.budget for status in budget_states)
        cron_lines, cron_warnings = self._cron_costs(jobs_reading, cloud_reading, cronjobs, jobs, instances, budgets, now)
        snapshot = msgspec.structs.replace(snapshot, budgets=budget_states, pending_actions=pending, cronjob_costs=cron_lines,
                                           autopilot=self.autopilot.statuses(now), autopilot_leader=self.autopilot.holder)
        cron_alerts = tuple(Alert(Severity.WARNING, "budget", w, now) for w in cron_warnings)
        return _with_alerts(snapshot, [*self._store_alerts, *self._hygiene_alerts, *self.autopilot.alerts(now)],
                            budget_alerts + cron_alerts)

    def load_cloud_history(self) -> None:
        """Read CloudTrail for the instances polled and the EBS volumes now (blocking), then
        compose: a command prints figures that include the history, not the first poll's."""
        reading = self.hub.reading(SourceKind.CLOUD)
        if isinstance(reading, CloudReading):
            self.cloud.load_history(reading.instances, self.clock())
        self._publish()

    def _day_difference(self, instances: tuple[Instance, ...], now: float) -> str:
        """The fleet's estimate vs Cost Explorer for the last full day, when a per-resource
        answer is cached."""
        answer = self.cost_explorer.resources() if self.cost_explorer is not None else None
        return last_day_line(instances, answer[0], now) if answer is not None else ""

    def _cron_costs(self, jobs_reading: object, cloud_reading: object, cronjobs: tuple[CronJob, ...],
                    jobs: tuple[Job, ...], instances: tuple[Instance, ...], budgets: tuple[Budget, ...],
                    now: float) -> tuple[tuple[CostLine, ...], tuple[str, ...]]:
        """Schedules' monthly costs, recomputed when a new jobs or cloud reading arrives, the
        budgets change or a minute has passed (a tick that changed none reuses the last answer)."""
        key = (id(jobs_reading), id(cloud_reading), int(now // 60), budgets)
        if self._cron_memo[0] != key:
            lines, warnings = cronjob_costs(cronjobs, jobs, instances, budgets, now)
            self._cron_memo = (key, lines, warnings)
        return self._cron_memo[1], self._cron_memo[2]


def _idle_alert(snap: FleetSnapshot) -> Alert | None:
    """The waste of GPUs idle for 30+ min while billed when there are any; else what the GPUs
    idle at this moment cost (the per-GPU scan runs only in that second case)."""
    now = snap.taken_at
    if snap.idle:
        per_hour = sum(g.per_hour for g in snap.idle)
        wasted = sum(g.wasted for g in snap.idle)
        owners = by_owner(snap.idle)
        top = f"; most: {owners[0].key} ${owners[0].amount:,.2f}" if owners else ""
        return Alert(Severity.WARNING, "costs",
                     f"{len(snap.idle)} GPU(s) idle for 30+ min while billed: wasting ${per_hour:,.2f}/h, "
                     f"${wasted:,.2f} so far{top}", now)
    prices = costs.gpu_price_per_hour(snap.instances)
    idle = [g for g in snap.gpus if not g.busy and g.node in prices]
    if not idle:
        return None
    per_hour = costs.idle_cost_per_hour(idle, prices)
    return Alert(Severity.INFO, "costs", f"{len(idle)} billed GPU(s) idle, costing ${per_hour:,.2f}/h", now)


def _with_alerts(snap: FleetSnapshot, extra: list[Alert], budget_alerts: tuple[Alert, ...] = ()) -> FleetSnapshot:
    """Derive the alerts the overview lists, most severe first (the budget alerts come from
    :meth:`BudgetOps.evaluate`)."""
    now = snap.taken_at
    alerts: list[Alert] = list(extra)
    for status in snap.sources:
        if status.state in (SourceState.ERROR, SourceState.STALE) and status.error != "cached":
            alerts.append(Alert(Severity.WARNING, status.name, f"{status.kind.value} source {status.describe(now)}", now))
    alerts.extend(budget_alerts)
    hot = [g for g in snap.gpus if g.temperature_c >= HOT_GPU_C]
    if hot:
        alerts.append(Alert(Severity.WARNING, "gpus", f"{len(hot)} GPU(s) at or above {HOT_GPU_C} °C", now))
    gone = [i for i in snap.instances if i.state in (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED) and i.market is Market.SPOT]
    for inst in gone:
        alerts.append(Alert(Severity.WARNING, "cloud", f"spot instance {inst.instance_id} ({inst.instance_type}) {inst.state.value}", now))
    idle_alert = _idle_alert(snap)
    if idle_alert is not None:
        alerts.append(idle_alert)
    waiting = [j for j in snap.jobs if j.state is JobState.PENDING and now - j.created > 600]
    if waiting:
        alerts.append(Alert(Severity.INFO, "jobs", f"{len(waiting)} job(s) pending for over 10 min", now))
    order = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    alerts.sort(key=lambda a: order[a.severity])
    return msgspec.structs.replace(snap, alerts=tuple(alerts))
