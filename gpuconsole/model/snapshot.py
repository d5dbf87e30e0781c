"""One moment of the fleet: source health, alerts, the readings sources return, and the snapshot panes render.
"""

from __future__ import annotations

import enum

from gpuconsole.model.autopilot import AutopilotRuleStatus
from gpuconsole.model.cloud import Instance
from gpuconsole.model.fleet import Gpu
from gpuconsole.model.jobs import CronJob, Job, Node
from gpuconsole.model.money import BudgetStatus, CostLine, IdleGpu, PendingAction
from gpuconsole.model.queues import Queue
from gpuconsole.model.serving import Service
from gpuconsole.model.value import Value


class SourceState(str, enum.Enum):
    """Health of one data source as the Hub sees it."""

    CONNECTING = "connecting"
    LIVE = "live"
    STALE = "stale"
    ERROR = "error"
    UNCONFIGURED = "unconfigured"


class SourceKind(str, enum.Enum):
    """The faces a backend can have."""

    GPUS = "gpus"
    JOBS = "jobs"
    CLOUD = "cloud"
    SERVICES = "services"  # inference services: the cluster's GPU Deployments and their serving figures



class Severity(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"



class SourceStatus(Value):
    """Health of one source, shown wherever its data is shown."""

    name: str  # "sim", "nvml", "kubernetes", "aws"…
    kind: SourceKind
    state: SourceState
    updated_at: float | None = None  # last successful poll
    error: str | None = None
    hint: str | None = None  # how to set it up / what to do
    latency_s: float | None = None
    waiting_since: float | None = None  # connecting: when the first poll, still unanswered, began

    def describe(self, now: float) -> str:
        """``live``, ``stale for 12 s``, ``error: reason`` — the words the console shows."""
        if self.state is SourceState.LIVE:
            return "live"
        if self.state is SourceState.STALE:
            age = int(now - self.updated_at) if self.updated_at else 0
            return f"stale for {age} s"
        if self.state is SourceState.ERROR:
            return f"error: {self.error or 'unknown'}"
        if self.state is SourceState.UNCONFIGURED:
            return f"not configured: {self.error or 'no backend'}"
        if self.waiting_since is not None:
            return f"no answer yet, {int(max(0.0, now - self.waiting_since))} s"
        return "connecting"


class Alert(Value):
    severity: Severity
    source: str
    message: str
    at: float


# --------------------------------------------------------------------------- Readings


class GpuReading(Value):
    """What one poll of a GPU source returns."""

    gpus: tuple[Gpu, ...]
    taken_at: float
    versions: tuple[tuple[str, str], ...] = ()  # e.g. ("driver", "550.54.15"), ("cuda", "12.4"), ("nvml", "12.550.54.15")


class JobsReading(Value):
    jobs: tuple[Job, ...]
    cronjobs: tuple[CronJob, ...]
    nodes: tuple[Node, ...]
    taken_at: float
    queues: tuple[Queue, ...] = ()  # Kueue ClusterQueues and Volcano Queues where the cluster has them


class CloudReading(Value):
    instances: tuple[Instance, ...]
    taken_at: float
    spend_today: float | None = None  # where the cloud reports billed spend itself
    spend_month: float | None = None


class FleetSnapshot(Value):
    """Everything the console shows at one moment. Panes render nothing else."""

    taken_at: float
    gpus: tuple[Gpu, ...] = ()
    jobs: tuple[Job, ...] = ()
    cronjobs: tuple[CronJob, ...] = ()
    nodes: tuple[Node, ...] = ()
    instances: tuple[Instance, ...] = ()
    budgets: tuple[BudgetStatus, ...] = ()
    sources: tuple[SourceStatus, ...] = ()
    alerts: tuple[Alert, ...] = ()
    spend_today: float = 0.0
    spend_month: float = 0.0
    burn_per_hour: float = 0.0
    idle: tuple[IdleGpu, ...] = ()
    pending_actions: tuple[PendingAction, ...] = ()
    cronjob_costs: tuple[CostLine, ...] = ()  # key: CronJob uid; amount: its next 30 days
    billed_month: float | None = None  # month to date as the cloud's billing (Cost Explorer) says
    billed_note: str = ""  # where that figure comes from and how old it is
    spend_basis: str = ""  # what the spend covers: "" (the backend's own history), "CloudTrail history", "since last start only"
    spend_left_out: str = ""  # spend in another currency the totals leave out (no [money] rates)
    day_difference: str = ""  # the fleet's estimate vs Cost Explorer for the last full day, one line
    demo: bool = False
    autopilot: tuple[AutopilotRuleStatus, ...] = ()  # the autopilot's rules, in the console that runs it
    autopilot_leader: str = ""  # who holds the autopilot's lease or lock ("" when none runs)
    services: tuple[Service, ...] = ()  # inference services, with their figures, cost and SLO
    queues: tuple[Queue, ...] = ()  # cluster-wide queues (Kueue, Volcano), with the $/h of what they admitted

    def source(self, kind: SourceKind) -> SourceStatus | None:
        for status in self.sources:
            if status.kind is kind:
                return status
        return None

