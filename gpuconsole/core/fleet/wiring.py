"""Wiring: the Hub of a session's sources and the :class:`Services` that act on them.

:func:`build_services` makes the whole set at start-up and for the switch to the demo; a new
Kubernetes context only replaces the job operations (:func:`with_jobs`). The collaborators
reach the console's moving parts (the source polled now, the set in use now, the Store once it
is open) through :class:`Wires`, read each time they are used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuconsole.backends.base import BillingReports, IntervalHint, TimeoutHint
from gpuconsole.core.access.alibaba_roles import attach_alibaba_roles
from gpuconsole.core.access.aws_roles import attach_aws_roles
from gpuconsole.core.access.guard import Guard, default_guard, demo_guard
from gpuconsole.core.access.rbac import ClusterPermissions
from gpuconsole.core.access.site import own_file_plans_only
from gpuconsole.core.config import ConfigError, ConfigFile
from gpuconsole.core.fleet.cron_memo import CronCostMemo
from gpuconsole.core.fleet.hub import Hub, PollPolicy
from gpuconsole.core.fleet.options import ConsoleOptions
from gpuconsole.core.fleet.services import Services
from gpuconsole.core.fleet.sources import build_sources
from gpuconsole.core.money.budget_config import load_config, plan_only
from gpuconsole.core.money.cost_explorer import CostExplorer
from gpuconsole.core.money.idle import IdleTracker
from gpuconsole.core.ops.actions import ActionLog
from gpuconsole.core.ops.autopilot.rules import RuleError
from gpuconsole.core.ops.autopilot.service import AutopilotService
from gpuconsole.core.ops.budget_ops import BudgetOps
from gpuconsole.core.ops.cloud_ops import CloudOps
from gpuconsole.core.ops.gpu_ops import GpuOps
from gpuconsole.core.ops.job_ops import JobOps
from gpuconsole.core.ops.service_ops import ServiceOps
from gpuconsole.core.serving.config import DEMO_SLOS
from gpuconsole.core.serving.config import load as load_serving
from gpuconsole.core.serving.join import ServingBook
from gpuconsole.model import JobsReading, SourceKind

if TYPE_CHECKING:
    from gpuconsole.core.fleet.store import Store


@dataclass(frozen=True, slots=True)
class Wires:
    """How the services reach what changes under them (each call reads the state of now).

    Attributes:
        source: the source polled now for a kind (None where there is none).
        reading: that source's latest reading.
        current: the :class:`Services` in use now.
        store: the Store once it is open, else None.
        publish: compose and hand on a snapshot now (new history or volumes arrived).
        refresh: poll every source now (after a change).
    """

    source: Callable[[SourceKind], Any]
    reading: Callable[[SourceKind], Any]
    current: Callable[[], Services]
    store: Callable[[], Store | None]
    publish: Callable[[], None]
    refresh: Callable[[], None]


def poll_policy(source: object, options: ConsoleOptions) -> PollPolicy:
    """The console's interval and timeout, or what the source asks where it needs more: a cloud
    API is polled no faster than its backend asks (rate limits cost money and throttle other
    tools of the account), and given the time a multi-region call needs."""
    interval, timeout = options.interval, options.timeout
    if isinstance(source, IntervalHint):
        interval = max(interval, float(source.min_interval))
    if isinstance(source, TimeoutHint):
        timeout = max(timeout, float(source.poll_timeout))
    return PollPolicy(interval=interval, timeout=timeout)


def make_hub(options: ConsoleOptions, on_update: Callable[[SourceKind], None]) -> Hub:
    """The Hub of the sources ``options`` ask for (ValueError for a bad choice, in one line)."""
    sources = build_sources(options.sources, clock=options.clock)
    return Hub(sources, on_update, {kind: poll_policy(source, options) for kind, source in sources.items()},
               clock=options.clock)


def session_guard(options: ConsoleOptions) -> Guard:
    """Who may act and the audit log: the one given, the demo's own, or this home's files."""
    if options.guard is not None:
        return options.guard
    if options.sources.demo:
        return demo_guard(read_only=options.read_only)
    return default_guard(read_only=options.read_only, config=options.config_path)


def build_services(options: ConsoleOptions, wires: Wires, *, store: Store | None = None, store_pending: bool = False,
                   keep: Services | None = None) -> Services:
    """Every collaborator of a session on the sources of now.

    Args:
        options: the session's options (read again where they may change: the config path).
        wires: how the collaborators reach the sources, the set in use and the Store.
        store: the open Store, if any; ``store_pending``: one is being opened in the background.
        keep: the set this one replaces (the switch to the demo): its action log and budgets go
            on, on the demo's own guard unless a guard was given.
    """
    clock = options.clock
    if keep is None:
        guard = session_guard(options)
        actions = ActionLog(guard=guard)
    else:
        actions, guard = keep.actions, keep.guard
        if options.guard is None:  # the demo's own audit log and MFA state from here on
            guard = demo_guard(read_only=guard.read_only, user=guard.user)
            actions.guard = guard
    cloud_source = wires.source(SourceKind.CLOUD)
    aws_roles = attach_aws_roles(cloud_source, guard, options.config_path, automation=options.automation)
    guard.alibaba_roles = attach_alibaba_roles(cloud_source, guard, options.config_path, automation=options.automation)
    cloud = CloudOps(cloud_source, wires.store, clock, actions)
    cloud.on_history = wires.publish  # CloudTrail's runs or the volumes arrived: show them
    explorer = cost_explorer(cloud_source, store, options)
    return Services(
        guard=guard,
        actions=actions,
        jobs=JobOps(wires.source(SourceKind.JOBS), clock, actions),
        gpus=GpuOps(lambda: wires.source(SourceKind.GPUS), lambda: wires.reading(SourceKind.GPUS), clock, actions,
                    pod_namespace=lambda uid: pod_namespace(wires.reading(SourceKind.JOBS), uid)),
        cloud=cloud,
        rbac=ClusterPermissions(lambda: wires.current().jobs.control, clock),  # asked per namespace, kept a minute
        budget_ops=keep.budget_ops if keep is not None else budget_ops(options, wires, actions, store,
                                                                       pending=store_pending),
        autopilot=autopilot(options, wires, actions),
        cost_explorer=explorer,
        aws_roles=aws_roles,
        clock=clock,
        demo=options.sources.demo,
        idle=IdleTracker(),
        cron_costs=CronCostMemo(),
        serving=keep.serving if keep is not None else serving_book(options),
        service_ops=ServiceOps(lambda: wires.source(SourceKind.SERVICES), clock, actions),
    )


def serving_book(options: ConsoleOptions) -> ServingBook:
    """The ``[services]`` table of the configuration file (its defaults, and why, when it is bad);
    in the demo, with the demo's SLOs where the file sets none."""
    try:
        config = load_serving(options.config_path)
    except ConfigError as exc:
        return ServingBook(error=str(exc))
    if options.sources.demo and not config.slos:
        config = dataclasses.replace(config, slos=DEMO_SLOS)
    return ServingBook(config)


def with_jobs(services: Services, source: object) -> Services:
    """``services`` with the job operations on ``source`` (another Kubernetes context)."""
    return dataclasses.replace(services, jobs=JobOps(source, services.clock, services.actions))


def pod_namespace(reading: object, pod_uid: str) -> str | None:
    """The namespace of the job whose pod has ``pod_uid``, in a jobs reading."""
    jobs = reading.jobs if isinstance(reading, JobsReading) else ()
    return next((j.namespace for j in jobs if j.owns_pod(pod_uid)), None)


def cost_explorer(source: object, store: Store | None, options: ConsoleOptions) -> CostExplorer | None:
    """Cost Explorer for a cloud that has it (each request is billed: calls are bounded)."""
    calls = options.cost_explorer_calls
    if not isinstance(source, BillingReports) or calls <= 0:
        return None
    return CostExplorer(source, store, options.clock, max_calls_per_day=calls, key=f"cost_explorer:{source.name}")


def budget_ops(options: ConsoleOptions, wires: Wires, actions: ActionLog, store: Store | None, *,
               pending: bool) -> BudgetOps:
    """The budgets of the Store, the configuration file and, in the demo, the demo's own."""
    try:
        config, error = load_config(options.config_path), None
    except ConfigError as exc:
        config, error = ConfigFile(None), str(exc)
    sources = options.sources
    if not sources.demo and config.path is not None and own_file_plans_only(config.path):
        config = plan_only(config)  # a shared machine: automatic budgets come from the site config
    demo_start = (sources.sim_start if sources.sim_start is not None else options.clock()) if sources.demo else None
    return BudgetOps(
        store=store,
        store_pending=pending,
        config=config,
        config_error=error,
        cloud=lambda: wires.current().cloud,
        jobs=lambda: wires.source(SourceKind.JOBS),
        log=actions,
        clock=options.clock,
        demo_start=demo_start,
        act=options.act_on_budgets,
        on_change=wires.refresh,
    )


def autopilot(options: ConsoleOptions, wires: Wires, actions: ActionLog) -> AutopilotService:
    """The autopilot of this console: it runs where the console acts by itself (the full-screen
    console), on the demo's rules in a demo; one-shot commands show no rules."""
    from gpuconsole.core.ops.autopilot import leader
    from gpuconsole.core.access.site import site_rules_file
    from gpuconsole.core.ops.autopilot.loading import console_rules, state_path
    from gpuconsole.core.ops.autopilot.state import AutopilotState

    demo = options.sources.demo
    acts = options.act_on_budgets
    state, lead, error = AutopilotState(), None, ""
    if acts and demo:
        lead = leader.LocalLeadership("this console (demo)")
    elif acts:
        try:
            path = state_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            state = AutopilotState(path)
            namespaces = options.sources.namespaces
            lead = leader.leadership_for(wires.source(SourceKind.JOBS), namespaces[0] if namespaces else "default",
                                         path.with_suffix(".lock"))
        except Exception as exc:  # noqa: BLE001 - the autopilot is optional: say why it is off
            error = f"the autopilot is off: its database cannot be opened: {exc}"

    def rules(st: AutopilotState) -> tuple[Any, ...]:
        if error:
            raise RuleError(error)
        return console_rules(options.config_path, st, demo=demo, site_config=site_rules_file()) if acts else ()

    return AutopilotService(rules, state, cloud=lambda: wires.current().cloud, log=actions,
                            service_ops=lambda: wires.current().service_ops,
                            clock=options.clock, leadership=lead, act=acts and not options.read_only,
                            on_change=wires.refresh)
