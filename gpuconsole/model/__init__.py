"""The values every layer of gpuconsole shares: immutable ``msgspec.Struct`` s, one module per domain.

Backends translate their protocol (NVML, Kubernetes REST, EC2, the simulated world) into these
types; the core composes them into a :class:`FleetSnapshot`; the UI and the CLI only read them.
Every value is frozen, so a snapshot can cross threads without locks, and untracked by the
garbage collector (``gc=False``), so a reading of thousands of GPUs costs no collections.

Times are POSIX seconds (UTC). Memory is MiB, power is watts, money is US dollars.

Modules:
    value: the base :class:`Value` and tags.
    fleet: GPUs, MIG slices, vGPUs, GPU processes and history samples.
    jobs: Kubernetes nodes, Jobs and CronJobs.
    queues: Kueue and Volcano queues, and what a waiting job waits for.
    cloud: instances, instance types, prices, subnets and what a launch asks for.
    money: budgets, thresholds, budget actions, idle GPUs and cost lines.
    access: roles, users, the acting principal and audit records.
    snapshot: source health, alerts, readings and the fleet snapshot.
    serving: inference services, their replicas, HPA, SLO, serving figures and readings.
    codec: to plain JSON types and back.

Other layers import names from this package (``from gpuconsole.model import Gpu``).
"""

from __future__ import annotations

from gpuconsole.model.access import AuditFilter, AuditRecord, Principal, Role, User
from gpuconsole.model.autopilot import AutopilotRuleStatus
from gpuconsole.model.cloud import (
    BillingSpan,
    Instance,
    InstanceState,
    InstanceType,
    KeyPair,
    LaunchAttempt,
    LaunchSpec,
    MachineImage,
    Market,
    RegionPrice,
    SecurityGroup,
    SpotPrice,
    Subnet,
    Volume,
    Workload,
)
from gpuconsole.model.codec import from_jsonable, to_jsonable
from gpuconsole.model.launch_options import AlibabaLaunchOptions, AzureLaunchOptions, LaunchOptions
from gpuconsole.model.fleet import (
    Gpu,
    GpuProcess,
    GpuSample,
    MigMode,
    MigSlice,
    VgpuInstance,
    mig_share,
)
from gpuconsole.model.jobs import FINISHED_STATES, JOB_KINDS, CronJob, Job, JobRole, JobState, Node, unfinished
from gpuconsole.model.money import (
    DEFAULT_THRESHOLDS,
    Budget,
    BudgetAction,
    BudgetPeriod,
    BudgetStatus,
    CostLine,
    IdleGpu,
    PendingAction,
    Threshold,
    ThresholdBasis,
)
from gpuconsole.model.queues import Queue, QueueKind, WaitingFor
from gpuconsole.model.serving import (
    PodSeries,
    Rollout,
    Service,
    ServiceHpa,
    ServiceKind,
    ServiceReplica,
    ServicesReading,
    ServiceSlo,
    ServingReading,
    ServingSeries,
)
from gpuconsole.model.snapshot import (
    Alert,
    CloudReading,
    FleetSnapshot,
    GpuReading,
    JobsReading,
    Severity,
    SourceKind,
    SourceState,
    SourceStatus,
)
from gpuconsole.model.value import Tags, Value, tag_of

__all__ = [
    "DEFAULT_THRESHOLDS", "FINISHED_STATES", "AlibabaLaunchOptions", "AzureLaunchOptions", "Alert", "AuditFilter", "AuditRecord", "AutopilotRuleStatus", "BillingSpan", "Budget",
    "BudgetAction", "BudgetPeriod", "BudgetStatus", "CloudReading", "CostLine", "CronJob", "FleetSnapshot",
    "Gpu", "GpuProcess", "GpuReading", "GpuSample", "IdleGpu", "Instance", "InstanceState", "InstanceType",
    "JOB_KINDS", "Job", "JobRole", "JobState", "JobsReading", "KeyPair", "LaunchAttempt", "LaunchOptions", "LaunchSpec", "MachineImage", "Market",
    "MigMode", "MigSlice", "Node", "PendingAction", "PodSeries", "Principal", "Queue", "QueueKind", "RegionPrice", "Role", "Rollout",
    "SecurityGroup", "Service", "ServiceHpa", "ServiceKind", "ServiceReplica", "ServiceSlo", "ServicesReading",
    "ServingReading", "ServingSeries", "Severity", "SourceKind", "SourceState", "SourceStatus", "SpotPrice",
    "Subnet", "Tags", "Threshold", "ThresholdBasis", "User", "Value", "VgpuInstance", "Volume", "WaitingFor", "Workload",
    "from_jsonable", "mig_share", "tag_of", "to_jsonable", "unfinished",
]
