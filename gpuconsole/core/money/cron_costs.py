"""What each CronJob's schedule costs over the next 30 days, and whether it alone breaks a budget.

A schedule costs: runs in the next 30 days × its typical run time × its GPUs (a MIG profile as
its share of a GPU) × the price of a GPU-hour. The typical run time is the median of its
finished runs (the running one's elapsed time when none finished yet); the GPU-hour price is
the median over the nodes its runs used, else over the fleet's billed instances. A CronJob with
no run seen yet has no estimate: the console says so rather than guessing.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from gpuconsole.core.money import budgets as budget_rules
from gpuconsole.core.money import costs
from gpuconsole.model import FINISHED_STATES, Budget, CostLine, CronJob, Instance, Job, JobState


def typical_runtime(cronjob: CronJob, jobs: Iterable[Job], now: float) -> float | None:
    """Median seconds of the CronJob's finished runs (or its running one's), None if none seen."""
    done: list[float] = []
    running: list[float] = []
    for job in jobs:
        if job.cronjob != cronjob.name or job.namespace != cronjob.namespace or job.started is None:
            continue
        if job.finished is not None and job.state in FINISHED_STATES:
            done.append(job.finished - job.started)
        elif job.state is JobState.RUNNING:
            running.append(now - job.started)
    sample = done or running
    return statistics.median(sample) if sample else None


def cronjob_costs(cronjobs: Sequence[CronJob], jobs: Sequence[Job], instances: Sequence[Instance],
                  budgets: Sequence[Budget], now: float) -> tuple[tuple[CostLine, ...], tuple[str, ...]]:
    """Per CronJob (dimension ``cronjob``, key its uid) the cost of the next 30 days of its
    schedule, and one warning per (CronJob, budget) whose amount the schedule alone exceeds."""
    node_price = costs.gpu_price_per_hour(instances)
    fleet = statistics.median(node_price.values()) if node_price else None
    by_cron: dict[tuple[str, str], list[Job]] = {}
    for job in jobs:
        if job.cronjob:
            by_cron.setdefault((job.namespace, job.cronjob), []).append(job)
    lines: list[CostLine] = []
    warnings: list[str] = []
    for cron in cronjobs:
        runs = by_cron.get((cron.namespace, cron.name), [])
        runtime = typical_runtime(cron, runs, now)
        prices = [node_price[j.node] for j in runs if j.node in node_price]
        price = statistics.median(prices) if prices else fleet
        if runtime is None or price is None:
            continue
        try:
            monthly = costs.cronjob_monthly_cost(cron, runtime, price, now)
        except ValueError:
            continue  # a schedule cron cannot read: the Jobs pane shows it as written
        lines.append(CostLine("cronjob", cron.uid, monthly, per_hour=monthly / (30 * 24)))
        for budget in budgets:
            kind, key, _ = budget_rules.parse_scope(budget.scope)
            if kind == "all" or (kind == "namespace" and key == cron.namespace):
                warning = costs.cronjob_breaks_budget(cron, runtime, price, budget, now)
                if warning:
                    warnings.append(warning)
    return tuple(lines), tuple(warnings)
