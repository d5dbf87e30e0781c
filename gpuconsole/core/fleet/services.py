"""The console's collaborators as one frozen set: what the UI and the command line act through.

A :class:`Services` is built once per world by :func:`gpuconsole.core.fleet.wiring.build_services`
(start-up, the switch to the demo; a new Kubernetes context replaces the job operations); the
Console hands out the current one as :attr:`Console.services`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuconsole.core.access.aws_roles import AwsRoleSessions
    from gpuconsole.core.access.guard import Guard
    from gpuconsole.core.access.rbac import ClusterPermissions
    from gpuconsole.core.fleet.cron_memo import CronCostMemo
    from gpuconsole.core.money.idle import IdleTracker
    from gpuconsole.core.money.cost_explorer import CostExplorer
    from gpuconsole.core.ops.actions import ActionLog
    from gpuconsole.core.ops.autopilot.service import AutopilotService
    from gpuconsole.core.ops.budget_ops import BudgetOps
    from gpuconsole.core.ops.cloud_ops import CloudOps
    from gpuconsole.core.ops.gpu_ops import GpuOps
    from gpuconsole.core.ops.job_ops import JobOps
    from gpuconsole.core.ops.service_ops import ServiceOps
    from gpuconsole.core.serving.join import ServingBook


@dataclass(frozen=True)
class Services:
    """Who may act and every operation of one console session.

    Attributes:
        guard: roles, MFA and the audit log of this login (the demo's own in a demo).
        actions: the one action path every change goes through.
        jobs / gpus / cloud / service_ops: the job, GPU-process, instance and inference-service
            operations.
        rbac: what Kubernetes RBAC lets this login do, per namespace.
        budget_ops: budgets, their evaluation and their actions.
        autopilot: the autopilot's rules and decisions.
        cost_explorer: billed spend, for a cloud that reports it (else None).
        aws_roles: the AWS role sessions when ``[aws.roles]`` is set (else None).
        clock: the console's clock (frozen in tests and screenshots).
        demo: whether this is the simulated world.
        idle: how long each GPU has been idle while billed (kept between snapshots).
        cron_costs: the schedules' monthly costs, kept until a reading or the budgets change.
        serving: the ``[services]`` configuration and the SLO states watched so far.
    """

    guard: Guard
    actions: ActionLog
    jobs: JobOps
    gpus: GpuOps
    cloud: CloudOps
    rbac: ClusterPermissions
    budget_ops: BudgetOps
    autopilot: AutopilotService
    cost_explorer: CostExplorer | None
    aws_roles: AwsRoleSessions | None
    clock: Callable[[], float]
    demo: bool
    idle: IdleTracker
    cron_costs: CronCostMemo
    serving: ServingBook
    service_ops: ServiceOps
