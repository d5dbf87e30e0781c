"""Budgets, their thresholds and actions, and the cost lines spend is attributed by.
"""

from __future__ import annotations

import enum

from gpuconsole.model.value import Value


class BudgetPeriod(str, enum.Enum):
    DAILY = "daily"
    MONTHLY = "monthly"
    CUSTOM = "custom"


class ThresholdBasis(str, enum.Enum):
    ACTUAL = "actual"
    FORECAST = "forecast"


class BudgetAction(str, enum.Enum):
    """What a crossed threshold does (the value is how users write it: ``80:notify+stop-spot``)."""

    NOTIFY = "notify"  # banner, terminal bell, and the budget's command / webhook if set
    STOP_SPOT = "stop-spot"  # stop the spot instances in scope that EC2 lets stop (persistent, stop behaviour)
    STOP_ALL = "stop-all"  # stop every instance in scope that can be stopped (on-demand, and spot as above)
    SUSPEND_CRONJOBS = "suspend-cronjobs"  # suspend the CronJobs in scope
    TERMINATE_SPOT = "terminate-spot"  # terminate the one-time spot instances in scope (they cannot stop)


class Threshold(Value):
    """A percentage of a budget on actual or forecast spend, and what to do when it is reached."""

    percent: float
    basis: ThresholdBasis = ThresholdBasis.ACTUAL
    actions: tuple[BudgetAction, ...] = (BudgetAction.NOTIFY,)


DEFAULT_THRESHOLDS: tuple[Threshold, ...] = (
    Threshold(50.0),
    Threshold(80.0),
    Threshold(100.0),
    Threshold(100.0, ThresholdBasis.FORECAST),
)


class Budget(Value):
    """A spending limit over a period and a scope ("all", "tag:Key=Value", "namespace:NS")."""

    name: str
    amount: float
    period: BudgetPeriod = BudgetPeriod.MONTHLY
    scope: str = "all"
    thresholds: tuple[Threshold, ...] = DEFAULT_THRESHOLDS
    automatic: bool = False  # actions other than notify run without asking a user
    starts: float | None = None  # custom period only
    ends: float | None = None
    notify_command: str = ""  # run by notify (shell), with the crossing in its environment
    webhook: str = ""  # POSTed a JSON body by notify
    origin: str = "store"  # "store" (added in the console or CLI), "config" (the config file), "demo"
    currency: str = "USD"  # of amount; spend in another currency counts only through [money] rates


class BudgetStatus(Value):
    """A budget with what has been spent against it and where it is heading."""

    budget: Budget
    spent: float
    forecast: float
    burn_per_hour: float
    crossed: tuple[Threshold, ...] = ()
    spend_basis: str = ""  # "" (the backend's own history), "CloudTrail history" or "since last start only"
    left_out: str = ""  # spend in scope it cannot count: another currency without [money] rates

    @property
    def percent(self) -> float:
        return 100.0 * self.spent / self.budget.amount if self.budget.amount else 0.0


class PendingAction(Value):
    """A budget action a crossed threshold calls for, with exactly what it would act on."""

    budget: str
    percent: float
    basis: ThresholdBasis
    action: BudgetAction
    targets: tuple[str, ...]  # instance ids or CronJob uids
    automatic: bool
    detail: str = ""  # one line: "stop 3 instances: i-… (p4de.24xlarge, $40.97/h), …"


class IdleGpu(Value):
    """A GPU below 5% utilization for 30 minutes or more while its instance is billed."""

    uuid: str
    node: str
    instance_id: str
    owner: str  # the instance's Owner tag, "" when untagged
    idle_since: float
    per_hour: float  # what it costs per hour (instance price / GPUs)
    wasted: float  # dollars since idle_since


class CostLine(Value):
    """Spend attributed to one key of one dimension over a period."""

    dimension: str  # "instance", "tag:Owner", "namespace", …
    key: str
    amount: float
    per_hour: float = 0.0

