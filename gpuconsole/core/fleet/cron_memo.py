"""The schedules' monthly costs of the last snapshot, kept until something they depend on changes."""

from __future__ import annotations

from gpuconsole.core.money.cron_costs import cronjob_costs
from gpuconsole.model import Budget, CostLine, CronJob, Instance, Job


class CronCostMemo:
    """Schedules' monthly costs, recomputed when a new jobs or cloud reading arrives, the budgets
    change or a minute has passed (a snapshot that changed none reuses the last answer)."""

    def __init__(self) -> None:
        self._memo: tuple[object, tuple[CostLine, ...], tuple[str, ...]] = (None, (), ())

    def __call__(self, jobs_reading: object, cloud_reading: object, cronjobs: tuple[CronJob, ...],
                 jobs: tuple[Job, ...], instances: tuple[Instance, ...], budgets: tuple[Budget, ...],
                 now: float) -> tuple[tuple[CostLine, ...], tuple[str, ...]]:
        """The cost lines and the warnings (a schedule that would break a budget)."""
        key = (id(jobs_reading), id(cloud_reading), int(now // 60), budgets)
        if self._memo[0] != key:
            lines, warnings = cronjob_costs(cronjobs, jobs, instances, budgets, now)
            self._memo = (key, lines, warnings)
        return self._memo[1], self._memo[2]
