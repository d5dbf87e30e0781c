"""The simulated world's mutable state: plain slotted classes, cheap to update every second.

The frozen :mod:`gpuconsole.model` objects are only built when a reading is taken, so a
step over thousands of GPUs touches a few attributes per GPU and allocates nothing.
"""

from __future__ import annotations

import zlib
from array import array
from typing import Any

from gpuconsole.backends.sim.catalog import GpuModel, region_of
from gpuconsole.backends.sim.ids import SUFFIX_ALPHABET
from gpuconsole.model import (
    BillingSpan,
    Gpu,
    GpuProcess,
    InstanceState,
    InstanceType,
    Job,
    JobState,
    Market,
    Tags,
)

POD_PAIRS = tuple(a + b for b in SUFFIX_ALPHABET for a in SUFFIX_ALPHABET)  # two base-27 digits, low first


def pod_suffix(pod_uid: str, index: int) -> str:
    """A pod's five-letter name suffix, derived from its UID: the same pod keeps its name, and
    naming a pod draws nothing from the world's generators. The CRC's base-27 digits, lowest
    first, two at a time (a big world names 100,000 pods as it starts)."""
    value = zlib.crc32(f"{pod_uid}:{index}".encode())
    pairs = len(POD_PAIRS)
    value, low = divmod(value, pairs)
    value, middle = divmod(value, pairs)
    return POD_PAIRS[low] + POD_PAIRS[middle] + SUFFIX_ALPHABET[value % len(SUFFIX_ALPHABET)]


class SimSlice:
    """One MIG device of a :class:`SimGpu` and the job (if any) that holds it."""

    __slots__ = ("uuid", "gpu", "gi_id", "ci_id", "profile", "compute", "memory_total",
                 "job", "util", "mem")

    def __init__(self, uuid: str, gpu: SimGpu, gi_id: int, profile: str, compute: int,
                 memory_total: int) -> None:
        self.uuid = uuid
        self.gpu = gpu
        self.gi_id = gi_id
        self.ci_id = 0
        self.profile = profile
        self.compute = compute
        self.memory_total = memory_total
        self.job: SimJob | None = None
        self.util = 0.0
        self.mem = 0


class SimGpu:
    """One physical GPU: fixed identity plus the telemetry the next reading reports.

    ``settled`` marks an idle GPU whose temperature and power have reached their resting
    values; a step skips it and a reading reuses ``view``, which keeps idle fleets cheap.
    """

    __slots__ = ("uuid", "node", "index", "model", "total", "limit", "idle_power", "idle_temp",
                 "busy_temp", "idle_mem", "job", "rank", "proc_mem", "procs", "slices", "util", "mem",
                 "temp", "power", "settled", "view", "hist", "born")

    def __init__(self, uuid: str, node: str, index: int, model: GpuModel, idle_temp: float,
                 busy_temp: float, idle_mem: int, born: float) -> None:
        self.uuid = uuid
        self.node = node
        self.index = index
        self.model = model
        self.total = model.memory_mib
        self.limit = model.power_limit_w
        self.idle_power = round(model.power_limit_w * model.idle_fraction, 1)
        self.idle_temp = idle_temp
        self.busy_temp = busy_temp
        self.idle_mem = idle_mem
        self.job: SimJob | None = None
        self.rank = 0
        self.proc_mem = 0
        self.procs: tuple[GpuProcess, ...] = ()  # what the holding job runs here
        self.slices: list[SimSlice] = []
        self.util = 0.0
        self.mem = idle_mem
        self.temp = idle_temp
        self.power = self.idle_power
        self.settled = True
        self.view: Gpu | None = None
        self.hist: array[float] | None = None
        self.born = born


class SimInstance:
    """An EC2 instance and, while it runs, the Kubernetes node it backs.

    Billing keeps the list of ``(ts, state)`` transitions EC2 would show plus a running total
    of billed seconds at the current price up to the last change (and the dollars billed at
    earlier prices), so the accrued cost at any moment is one multiplication, however long the
    instance has lived. ``billing`` holds the same history as billing spans, one per billed
    state or spot price, the open one last; it changes only when the state or the price does,
    so a reading shares it instead of rebuilding it.
    """

    __slots__ = ("instance_id", "itype", "model", "region", "az", "market", "price",
                 "launch_time", "name", "tags", "node_name", "state", "transitions",
                 "billed_closed", "cost_closed", "state_since", "mark", "billing", "gpus", "whole",
                 "slices", "free", "ready", "listed", "replace", "interrupt_at", "gone_at", "mig_gpu",
                 "mig_capacity", "managed", "persistent", "reason", "cloud", "stopped_bills")

    def __init__(self, instance_id: str, itype: InstanceType, model: GpuModel, az: str,
                 market: Market, price: float, launch_time: float, name: str, tags: Tags,
                 node_name: str) -> None:
        self.instance_id = instance_id
        self.itype = itype
        self.model = model
        self.region = region_of(az)
        self.az = az
        self.market = market
        self.price = price
        self.launch_time = launch_time
        self.name = name
        self.tags = tags
        self.node_name = node_name
        self.state = InstanceState.PENDING
        self.transitions: list[tuple[float, InstanceState]] = [(launch_time, InstanceState.PENDING)]
        self.billed_closed = 0.0  # billed seconds at ``price`` up to ``mark``
        self.cost_closed = 0.0  # dollars billed at earlier prices
        self.state_since = launch_time
        self.mark = launch_time  # the last state or price change
        self.billing: tuple[BillingSpan, ...] = (BillingSpan(launch_time, None, price),)
        self.gpus: list[SimGpu] = []
        self.whole: list[SimGpu] = []  # GPUs offered as nvidia.com/gpu
        self.slices: list[SimSlice] = []  # MIG devices offered as nvidia.com/mig-<profile>
        self.free = 0
        self.ready = False  # schedulable node
        self.listed = False  # the node object exists in the cluster
        self.replace = False  # launch a like-for-like replacement once terminated
        self.interrupt_at: float | None = None
        self.gone_at: float | None = None
        self.mig_gpu: int | None = None  # index of the MIG-partitioned GPU, if any
        self.mig_capacity: tuple[tuple[str, int], ...] = ()
        self.managed = True  # a node group's member: replaced after a spot interruption
        self.persistent = False  # spot of a persistent request that stops when interrupted (else one-time)
        self.reason = ""  # EC2's state reason, e.g. a spot interruption
        self.cloud = itype.cloud  # the provider's name, as Instance.cloud says it
        # Stopped but still billed (an Azure VM shut down from inside: allocated until deallocated).
        # Changed only while the state is not STOPPED, so a billed interval is never left open.
        self.stopped_bills = False

    @property
    def bills_stopped(self) -> bool:
        """Stopped, and its compute still billed (allocated: stopping it again deallocates it)."""
        return self.stopped_bills and self.state is InstanceState.STOPPED

    @property
    def bills(self) -> bool:
        """Whether its compute is billed in its state (Instance.bills_now)."""
        return self.state.billed or self.bills_stopped

    def set_state(self, state: InstanceState, ts: float) -> None:
        """Record a transition, closing the billed interval of the state being left."""
        self._close(ts)
        self.state = state
        self.state_since = ts
        self.transitions.append((ts, state))
        if self.bills:
            self.billing = (*self.billing, BillingSpan(ts, None, self.price))

    def set_price(self, price: float, ts: float) -> None:
        """Bill from ``ts`` on at ``price`` (a spot price change)."""
        self._close(ts)
        self.cost_closed += self.price * self.billed_closed / 3600.0
        self.billed_closed = 0.0
        self.price = price
        if self.bills:
            self.billing = (*self.billing, BillingSpan(ts, None, price))

    def _close(self, ts: float) -> None:
        """Count the billed time since the last change and close the open billing span."""
        if self.bills:
            self.billed_closed += max(0.0, ts - self.mark)
            last = self.billing[-1]
            self.billing = (*self.billing[:-1], BillingSpan(last.start, max(last.start, ts), last.price_per_hour))
        self.mark = ts

    def billed_seconds(self, now: float) -> float:
        """Seconds billed at the current price."""
        open_part = max(0.0, now - self.mark) if self.bills else 0.0
        return self.billed_closed + open_part

    def accrued(self, now: float) -> float:
        return self.cost_closed + self.price * self.billed_seconds(now) / 3600.0


class SimJob:
    """A Kubernetes Job with one pod, plus the hidden facts that decide how it will go.

    ``fails``, ``stalled``, ``util_base`` and ``mem_frac`` are drawn when the pod starts;
    ``run`` counts pod starts so a completion scheduled for an evicted pod is ignored.
    """

    __slots__ = ("uid", "name", "namespace", "state", "created", "gpus", "mig_profile",
                 "product", "node", "devices", "slice", "started", "finished", "end_at", "duration",
                 "fails", "stalled", "util_base", "mem_frac", "pending_reason", "cronjob",
                 "image", "owner", "pod_uid", "pid", "give_up_at", "run", "view", "workers", "manifest", "gang",
                 "queue")

    def __init__(self, uid: str, name: str, namespace: str, created: float, gpus: int,
                 mig_profile: str | None, product: str | None, duration: float, image: str,
                 owner: str, pod_uid: str, cronjob: str | None = None) -> None:
        self.uid = uid
        self.name = name
        self.namespace = namespace
        self.state = JobState.PENDING
        self.created = created
        self.gpus = gpus
        self.mig_profile = mig_profile
        self.product = product  # nvidia.com/gpu.product node selector, if any
        self.node: SimInstance | None = None
        self.devices: list[SimGpu] = []  # whole GPUs held
        self.slice: SimSlice | None = None  # the MIG device held
        self.started: float | None = None
        self.finished: float | None = None
        self.end_at = 0.0
        self.duration = duration
        self.fails = False
        self.stalled = False
        self.util_base = 0.0
        self.mem_frac = 0.0
        self.pending_reason: str | None = None
        self.cronjob = cronjob
        self.image = image
        self.owner = owner
        self.pod_uid = pod_uid
        self.pid = 0
        self.give_up_at = created + 4 * 3600.0  # the owner deletes it if still pending then
        self.run = 0
        self.view: Job | None = None
        self.workers = 1  # pods of an Indexed Job; the sim places them together, holding ``gpus`` in all
        self.manifest: dict[str, Any] | None = None  # what was submitted, for a describe
        self.gang: Any = None  # the distributed job it is a replica of (listed instead of it)
        self.queue: str | None = None  # the Kueue LocalQueue it names (kueue.x-k8s.io/queue-name)

    def pod_names(self) -> list[str]:
        """Its pods' names, ``<job>-<suffix>`` (``<job>-<index>-<suffix>`` for an Indexed Job);
        none while suspended."""
        if self.state is JobState.SUSPENDED:
            return []
        if self.workers <= 1:
            return [f"{self.name}-{pod_suffix(self.pod_uid, 0)}"]
        return [f"{self.name}-{i}-{pod_suffix(self.pod_uid, i)}" for i in range(self.workers)]

    def to_model(self) -> Job:
        if self.view is None:
            self.view = Job(
                uid=self.uid, name=self.name, namespace=self.namespace, state=self.state,
                created=self.created, gpus=self.gpus, mig_profile=self.mig_profile,
                node=self.node.node_name if self.node is not None else None,
                started=self.started, finished=self.finished,
                pending_reason=self.pending_reason if self.state is JobState.PENDING else None,
                cronjob=self.cronjob, image=self.image, owner=self.owner, pod_uid=self.pod_uid,
                pod=next(iter(self.pod_names()), None),
            )
        return self.view


class SimCronJob:
    """A CronJob and the template of the Jobs it creates."""

    __slots__ = ("uid", "name", "namespace", "schedule", "created", "suspended", "last", "next",
                 "gpus", "mig_profile", "product", "minutes", "image", "owner", "policy", "workers", "manifest",
                 "queue")

    def __init__(self, uid: str, name: str, namespace: str, schedule: str, created: float,
                 gpus: int, mig_profile: str | None, product: str | None,
                 minutes: tuple[float, float], image: str, owner: str,
                 suspended: bool = False) -> None:
        self.uid = uid
        self.name = name
        self.namespace = namespace
        self.schedule = schedule
        self.created = created
        self.suspended = suspended
        self.last: float | None = None
        self.next: float | None = None
        self.gpus = gpus
        self.mig_profile = mig_profile
        self.product = product
        self.minutes = minutes
        self.image = image
        self.owner = owner
        self.policy = "Allow"  # concurrencyPolicy: Allow, Forbid or Replace
        self.workers = 1
        self.manifest: dict[str, Any] | None = None
        self.queue: str | None = None  # the Kueue LocalQueue its Jobs name
