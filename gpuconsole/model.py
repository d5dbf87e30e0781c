"""Frozen dataclasses shared by every layer of gpuconsole.

Backends translate their protocol (NVML, Kubernetes REST, EC2, the simulated world) into these
types; the core composes them into a :class:`FleetSnapshot`; the UI and the CLI only read them.
Everything here is immutable so a snapshot can cross threads without locks.

Times are POSIX seconds (UTC). Memory is MiB, power is watts, money is US dollars.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, Union

_T = TypeVar("_T")

Tags = tuple[tuple[str, str], ...]


class MigMode(str, enum.Enum):
    """MIG mode of a GPU as NVML reports it."""

    DISABLED = "disabled"
    ENABLED = "enabled"
    NOT_SUPPORTED = "n/a"


class JobState(str, enum.Enum):
    """Lifecycle of a Kubernetes-style job, in the order the queue view groups them."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SUSPENDED = "suspended"


class Market(str, enum.Enum):
    """How an instance is paid for."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"


class InstanceState(str, enum.Enum):
    """EC2 instance states (the names EC2 uses)."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    SHUTTING_DOWN = "shutting-down"
    TERMINATED = "terminated"

    @property
    def billed(self) -> bool:
        """Whether compute is billed in this state."""
        return self in (InstanceState.RUNNING, InstanceState.PENDING, InstanceState.STOPPING)


class SourceState(str, enum.Enum):
    """Health of one data source as the Hub sees it."""

    CONNECTING = "connecting"
    LIVE = "live"
    STALE = "stale"
    ERROR = "error"
    UNCONFIGURED = "unconfigured"


class SourceKind(str, enum.Enum):
    """The three faces a backend can have."""

    GPUS = "gpus"
    JOBS = "jobs"
    CLOUD = "cloud"


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
    STOP_SPOT = "stop-spot"  # stop (terminate, for one-time spot) the spot instances in scope
    STOP_ALL = "stop-all"  # stop every instance in scope
    SUSPEND_CRONJOBS = "suspend-cronjobs"  # suspend the CronJobs in scope


class Severity(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


# --------------------------------------------------------------------------- GPUs


@dataclass(frozen=True, slots=True)
class MigSlice:
    """One MIG device (GPU instance + compute instance) carved out of a physical GPU."""

    uuid: str  # "MIG-…", what CUDA_VISIBLE_DEVICES takes
    gpu_uuid: str
    gi_id: int
    ci_id: int
    profile: str  # e.g. "1g.10gb"
    memory_total_mib: int
    memory_used_mib: int = 0
    utilization: float | None = None  # percent; None where the driver cannot say
    pod_uid: str | None = None
    pod: str | None = None  # the pod's name, where a metrics exporter maps it
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding GPU memory."""

    pid: int
    gpu_uuid: str
    name: str
    memory_used_mib: int
    mig_uuid: str | None = None
    user: str | None = None
    pod_uid: str | None = None
    kind: str = "compute"  # "compute" or "graphics"
    command: str = ""
    cpu_percent: float | None = None
    sm_utilization: float | None = None  # percent of the GPU's SMs this process kept busy
    container_id: str | None = None


@dataclass(frozen=True, slots=True)
class VgpuInstance:
    """An active vGPU on a host GPU (what a vGPU host's driver reports)."""

    vgpu_id: int
    type_name: str
    vm_id: str = ""
    memory_used_mib: int | None = None
    utilization: float | None = None


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical GPU at one moment."""

    uuid: str  # "GPU-…"
    node: str
    index: int
    name: str  # model, e.g. "NVIDIA A100-SXM4-80GB"
    utilization: float  # percent of time a kernel ran
    memory_used_mib: int
    memory_total_mib: int
    temperature_c: int
    power_w: float
    power_limit_w: float
    mig_mode: MigMode = MigMode.DISABLED
    mig_slices: tuple[MigSlice, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    # Telemetry a real source may add; None means "N/A" (the driver or exporter cannot say).
    pci_bus_id: str = ""
    memory_utilization: float | None = None  # percent of time memory was read or written
    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    fan_percent: int | None = None
    pcie_rx_kbps: int | None = None
    pcie_tx_kbps: int | None = None
    ecc_volatile_errors: int | None = None
    persistence_mode: bool | None = None
    compute_mode: str | None = None  # "default", "exclusive_process", "prohibited"
    throttle_reasons: tuple[str, ...] = ()
    mig_pending: MigMode | None = None  # the mode after the next reset, where it differs
    virtualization: str | None = None  # "none", "passthrough", "vgpu" (guest), "host_vgpu", "host_vsga"
    vgpu_instances: tuple[VgpuInstance, ...] = ()
    xid_errors: int | None = None  # the last XID error reported (0: none)
    gr_engine_active: float | None = None  # percent, DCGM's profiling counter
    pod: str | None = None  # the pod using the whole GPU, where a metrics exporter maps it
    namespace: str | None = None
    # Names of the fields above that must hold a number but that the driver could not report
    # (e.g. "utilization" of a MIG-enabled GPU, "power_w" of a board without a sensor): the
    # number is 0 and the console shows N/A.
    not_reported: tuple[str, ...] = ()

    @property
    def memory_percent(self) -> float:
        return 100.0 * self.memory_used_mib / self.memory_total_mib if self.memory_total_mib else 0.0

    @property
    def busy(self) -> bool:
        """A GPU counts as busy when it computes or holds a job's memory."""
        if self.mig_mode is MigMode.ENABLED:
            return any(s.memory_used_mib > 0 or (s.utilization or 0) >= 5 for s in self.mig_slices)
        return self.utilization >= 5.0 or bool(self.processes)


def slotted_constructor(cls: type[_T], given: tuple[str, ...] | None = None) -> Callable[..., _T]:
    """A constructor for the frozen, slotted dataclass ``cls`` that fills each field's slot
    directly: with the signature of ``cls(...)``, or, with ``given``, taking exactly those fields
    by position (every other field at its default).

    A frozen dataclass's ``__init__`` pays an ``object.__setattr__`` call per field; a reading of
    thousands of GPUs (about 30 fields each) spends most of its time there. This one fills an
    instance of a plain class with the very same slots (plain attribute stores, the fastest
    Python has) and then makes it a ``cls``, which Python allows between classes of one memory
    layout: the same immutable value, about four times faster. A class it cannot serve that way
    (no slots of its own, a base with state, a ``__post_init__``, a default factory) gets ``cls``
    itself back.
    """
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    slots = cls.__dict__.get("__slots__")
    if (slots is None or cls.__bases__ != (object,) or hasattr(cls, "__post_init__")
            or any(f.name in ("_layout", "_cls") or f.name.startswith("_default") for f in fields)
            or any(f.default_factory is not dataclasses.MISSING or not f.init for f in fields)):
        return cls
    names = {f.name for f in fields}
    if given is not None and (not set(given) <= names or any(
            f.default is dataclasses.MISSING and f.name not in given for f in fields)):
        raise ValueError(f"{cls.__name__}: {given} must name fields, every required one among them")
    layout = type(f"_{cls.__name__}Slots", (), {"__slots__": tuple(slots), "__module__": cls.__module__})
    try:
        layout().__class__ = cls  # type: ignore[assignment]
    except TypeError:  # another memory layout after all
        return cls
    scope: dict[str, Any] = {"_layout": layout, "_cls": cls}
    made = "_made"
    while made in names or made in scope:  # the local that holds the new value: no field's name
        made += "_"
    params, body = [], []
    for i, f in enumerate(fields):
        if given is None or f.name in given:
            value = f.name
            if given is None:
                if f.default is not dataclasses.MISSING:
                    scope[f"_default{i}"] = f.default
                    params.append(f"{f.name}=_default{i}")
                else:
                    params.append(f.name)
        else:
            scope[f"_default{i}"] = f.default
            value = f"_default{i}"
        body.append(f"    {made}.{f.name} = {value}")
    if given is not None:
        params = list(given)
    source = (f"def make({', '.join(params)}):\n    {made} = _layout()\n" + "\n".join(body)
              + f"\n    {made}.__class__ = _cls\n    return {made}\n")
    exec(source, scope)  # noqa: S102 - code made above from the dataclass's own field names
    make = scope["make"]
    make.__doc__ = f"Build a {cls.__name__} (as ``{cls.__name__}(...)`` does, faster)."
    return make


make_gpu = slotted_constructor(Gpu)
make_process = slotted_constructor(GpuProcess)
make_slice = slotted_constructor(MigSlice)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One point of a GPU's history (raw or rolled up)."""

    ts: float
    utilization: float
    memory_used_mib: float
    temperature_c: float
    power_w: float


# --------------------------------------------------------------------------- Kubernetes


@dataclass(frozen=True, slots=True)
class Node:
    """A Kubernetes node and its GPU capacity."""

    name: str
    gpu_product: str
    gpu_capacity: int
    gpu_allocatable: int
    gpu_allocated: int
    instance_id: str | None = None
    mig_strategy: str | None = None  # "single" / "mixed"
    mig_capacity: tuple[tuple[str, int], ...] = ()  # (profile, count)
    ready: bool = True
    mig_allocated: tuple[tuple[str, int], ...] = ()  # (profile, count) held by running pods


@dataclass(frozen=True, slots=True)
class Job:
    """A Kubernetes Job as the queue view needs it."""

    uid: str
    name: str
    namespace: str
    state: JobState
    created: float
    gpus: int = 0
    mig_profile: str | None = None
    node: str | None = None
    started: float | None = None
    finished: float | None = None
    pending_reason: str | None = None
    cronjob: str | None = None
    image: str = ""
    owner: str | None = None
    pod_uid: str | None = None
    pod: str | None = None  # the pod's name (of index 0 for an Indexed Job), what logs are read from

    @property
    def gpu_request(self) -> str:
        """What the job asked for, in the words of its resource request."""
        if self.mig_profile:
            return f"{max(self.gpus, 1)}×{self.mig_profile}"
        return str(self.gpus) if self.gpus else "-"


@dataclass(frozen=True, slots=True)
class CronJob:
    """A Kubernetes CronJob (periodic training or evaluation)."""

    uid: str
    name: str
    namespace: str
    schedule: str
    created: float
    suspended: bool = False
    last_schedule: float | None = None
    next_schedule: float | None = None
    gpus: int = 0
    mig_profile: str | None = None
    active: int = 0


# --------------------------------------------------------------------------- Cloud


@dataclass(frozen=True, slots=True)
class InstanceType:
    """A GPU instance type of the catalog."""

    name: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int
    vcpus: int
    memory_gib: int
    on_demand_price: float  # $/h, Linux
    network: str = ""
    nvme_gb: int = 0
    nvlink: bool = False


@dataclass(frozen=True, slots=True)
class SpotPrice:
    instance_type: str
    availability_zone: str
    price: float
    ts: float


@dataclass(frozen=True, slots=True)
class BillingSpan:
    """An interval an instance was billed for at one price (a state or a spot price change
    starts a new span). ``end`` is None while the span is open."""

    start: float
    end: float | None
    price_per_hour: float


@dataclass(frozen=True, slots=True)
class Instance:
    """A cloud instance with GPUs."""

    instance_id: str  # "i-…"
    instance_type: str
    region: str
    availability_zone: str
    market: Market
    state: InstanceState
    launch_time: float
    price_per_hour: float
    gpus: int = 0
    gpu_model: str = ""
    accrued_cost: float = 0.0  # since launch
    name: str = ""
    node: str | None = None  # the Kubernetes node it backs, where known
    tags: Tags = ()
    billing: tuple[BillingSpan, ...] = ()  # billed intervals with their price, oldest first
    state_reason: str = ""  # EC2's StateReason message, e.g. a spot interruption
    spot_status: str = ""  # the spot request's status code, e.g. "instance-terminated-no-capacity"

    def tag(self, key: str) -> str | None:
        for k, v in self.tags:
            if k == key:
                return v
        return None


# --------------------------------------------------------------------------- Provisioning


class Workload(str, enum.Enum):
    """What an instance is for; the wizard recommends types from it."""

    TRAINING = "training"
    INFERENCE = "inference"


@dataclass(frozen=True, slots=True)
class RegionPrice:
    """The on-demand Linux price of one type in one region."""

    instance_type: str
    region: str
    price: float  # $/h


@dataclass(frozen=True, slots=True)
class Subnet:
    subnet_id: str
    vpc_id: str
    availability_zone: str
    cidr: str
    name: str = ""
    default_for_az: bool = False
    available_ips: int = 0


@dataclass(frozen=True, slots=True)
class SecurityGroup:
    group_id: str
    name: str
    vpc_id: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class KeyPair:
    name: str
    key_type: str = ""


@dataclass(frozen=True, slots=True)
class MachineImage:
    """An AMI, and where its id came from (an SSM parameter path, or "explicit")."""

    image_id: str
    name: str = ""
    source: str = "explicit"


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """Everything a launch asks for; the EC2 request and the Terraform block derive from it.

    ``availability_zone`` picks the zone when ``subnet_id`` is empty (the default VPC's subnet);
    with a subnet the subnet decides. Tags include Name, Owner, Project and Budget when given.
    """

    region: str
    instance_type: str
    image_id: str
    market: Market = Market.ON_DEMAND
    count: int = 1
    availability_zone: str = ""
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()
    key_name: str = ""
    root_volume_gib: int = 200
    encrypted: bool = True
    kms_key_id: str = ""  # empty: the account's default EBS key
    imdsv2_required: bool = True
    max_spot_price: float | None = None  # $/h; None: capped at the on-demand price
    tags: Tags = ()

    def tag(self, key: str) -> str | None:
        for k, v in self.tags:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True)
class LaunchAttempt:
    """One try of a launch: where, what, and what the cloud answered."""

    instance_type: str
    availability_zone: str
    market: Market
    ok: bool
    message: str  # "launched i-…" or the error code and message
    instance_ids: tuple[str, ...] = ()
    ts: float = 0.0


# --------------------------------------------------------------------------- Money


@dataclass(frozen=True, slots=True)
class Threshold:
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


@dataclass(frozen=True, slots=True)
class Budget:
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


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """A budget with what has been spent against it and where it is heading."""

    budget: Budget
    spent: float
    forecast: float
    burn_per_hour: float
    crossed: tuple[Threshold, ...] = ()

    @property
    def percent(self) -> float:
        return 100.0 * self.spent / self.budget.amount if self.budget.amount else 0.0


@dataclass(frozen=True, slots=True)
class PendingAction:
    """A budget action a crossed threshold calls for, with exactly what it would act on."""

    budget: str
    percent: float
    basis: ThresholdBasis
    action: BudgetAction
    targets: tuple[str, ...]  # instance ids or CronJob uids
    automatic: bool
    detail: str = ""  # one line: "stop 3 instances: i-… (p4de.24xlarge, $40.97/h), …"


@dataclass(frozen=True, slots=True)
class IdleGpu:
    """A GPU below 5% utilization for 30 minutes or more while its instance is billed."""

    uuid: str
    node: str
    instance_id: str
    owner: str  # the instance's Owner tag, "" when untagged
    idle_since: float
    per_hour: float  # what it costs per hour (instance price / GPUs)
    wasted: float  # dollars since idle_since


@dataclass(frozen=True, slots=True)
class CostLine:
    """Spend attributed to one key of one dimension over a period."""

    dimension: str  # "instance", "tag:Owner", "namespace", …
    key: str
    amount: float
    per_hour: float = 0.0


# --------------------------------------------------------------------------- Status


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """Health of one source, shown wherever its data is shown."""

    name: str  # "sim", "nvml", "kubernetes", "aws"…
    kind: SourceKind
    state: SourceState
    updated_at: float | None = None  # last successful poll
    error: str | None = None
    hint: str | None = None  # how to set it up / what to do
    latency_s: float | None = None

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
        return "connecting"


@dataclass(frozen=True, slots=True)
class Alert:
    severity: Severity
    source: str
    message: str
    at: float


# --------------------------------------------------------------------------- Readings


@dataclass(frozen=True, slots=True)
class GpuReading:
    """What one poll of a GPU source returns."""

    gpus: tuple[Gpu, ...]
    taken_at: float
    versions: tuple[tuple[str, str], ...] = ()  # e.g. ("driver", "550.54.15"), ("cuda", "12.4"), ("nvml", "12.550.54.15")


@dataclass(frozen=True, slots=True)
class JobsReading:
    jobs: tuple[Job, ...]
    cronjobs: tuple[CronJob, ...]
    nodes: tuple[Node, ...]
    taken_at: float


@dataclass(frozen=True, slots=True)
class CloudReading:
    instances: tuple[Instance, ...]
    taken_at: float
    spend_today: float | None = None  # where the cloud reports billed spend itself
    spend_month: float | None = None


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
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
    demo: bool = False

    def source(self, kind: SourceKind) -> SourceStatus | None:
        for status in self.sources:
            if status.kind is kind:
                return status
        return None


# --------------------------------------------------------------------------- Codec

_HINTS: dict[type, dict[str, Any]] = {}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_PLAIN = (str, int, float, bool, type(None))


def to_jsonable(value: Any) -> Any:
    """Turn a model value into plain JSON types (enums by value, tuples as lists).

    Called on whole fleet readings for the cache, so the common cases come first and each
    dataclass's field names are looked up once.
    """
    cls = type(value)
    if cls in _PLAIN:
        return value
    names = _FIELD_NAMES.get(cls)
    if names is None and dataclasses.is_dataclass(cls):
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def from_jsonable(cls: Any, data: Any) -> Any:
    """Rebuild a model value of type ``cls`` from :func:`to_jsonable` output.

    Raises:
        ValueError: the data does not fit the type (a corrupt cache row, say).
    """
    try:
        return _decode(cls, data)
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"cannot decode {getattr(cls, '__name__', cls)}: {exc}") from exc


def _decode(tp: Any, data: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _decode(arg, data)
            except (TypeError, ValueError, KeyError, AttributeError):
                continue
        raise ValueError(f"{data!r} fits none of {args}")
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in data)
        return tuple(_decode(a, v) for a, v in zip(args, data, strict=True))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {tp.__name__}")
        hints = _HINTS.get(tp)
        if hints is None:
            hints = _HINTS[tp] = typing.get_type_hints(tp)
        kwargs = {f.name: _decode(hints[f.name], data[f.name]) for f in dataclasses.fields(tp) if f.name in data}
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise TypeError(f"expected a number, got {data!r}")
        return float(data)
    if tp in (int, str, bool):
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise TypeError(f"expected {tp.__name__}, got {data!r}")
        return data
    if tp is Any:
        return data
    raise TypeError(f"unsupported type {tp!r}")

