"""Cloud instances, the instance-type catalog, prices, and what a launch asks for, in words every
cloud shares (id, cloud, type, zone, state, market, price, currency, tags, GPUs, image, network,
disks). What only one cloud has lives in that provider's own option Struct
(:mod:`gpuconsole.model.launch_options`), which its adapter reads and its provider's checks check.
"""

from __future__ import annotations

import enum
import re

from gpuconsole.model.launch_options import LaunchOptions
from gpuconsole.model.value import Tags, Value, tag_of

# An instance id as its cloud writes it: EC2's ``i-`` and 8 or 17 lowercase hex digits; Alibaba
# Cloud ECS's ``i-`` and 20 lowercase letters and digits (``i-bp67acfmxazb4ph4abcd``).
EC2_INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")
ECS_INSTANCE_ID = re.compile(r"i-[0-9a-z]{20}")
# An Azure VM's ARM resource id (ARM compares ids without case):
# ``/subscriptions/<GUID>/resourceGroups/<group>/providers/Microsoft.Compute/virtualMachines/<name>``.
AZURE_VM_ID = re.compile(r"(?i:/subscriptions/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
                         r"/resourceGroups/[-\w.()]{1,90}/providers/Microsoft\.Compute/virtualMachines/[A-Za-z0-9][\w.-]{0,63})")
INSTANCE_ID = re.compile(f"{EC2_INSTANCE_ID.pattern}|{ECS_INSTANCE_ID.pattern}|{AZURE_VM_ID.pattern}")
INSTANCE_ID_FORM = ("i- and 8 or 17 hex digits (EC2), i- and 20 letters and digits (Alibaba Cloud), or an Azure VM's "
                    "resource id (/subscriptions/…/virtualMachines/NAME)")

# The clouds gpuconsole speaks to, by the name the command line and JSON use.
CLOUDS = ("aws", "alibaba", "azure")


def is_instance_id(text: str) -> bool:
    """Whether ``text`` is an instance id of a cloud gpuconsole speaks to (nothing else is
    sent to a cloud, or written to the audit log as a target)."""
    return INSTANCE_ID.fullmatch(text) is not None


class Market(str, enum.Enum):
    """How an instance is paid for."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"


class InstanceState(str, enum.Enum):
    """An instance's state in words every cloud maps onto (EC2's names; ECS ``Starting`` is
    pending, ``Stopped`` stopped, a released instance terminated)."""

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



class InstanceType(Value):
    """A GPU instance type of the catalog."""

    name: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int
    vcpus: int
    memory_gib: int
    on_demand_price: float  # per hour in ``currency``, Linux
    network: str = ""
    nvme_gb: int = 0
    nvlink: bool = False
    cloud: str = "aws"
    currency: str = "USD"


class SpotPrice(Value):
    instance_type: str
    availability_zone: str
    price: float
    ts: float


class BillingSpan(Value):
    """An interval an instance was billed for at one price (a state or a spot price change
    starts a new span). ``end`` is None while the span is open."""

    start: float
    end: float | None
    price_per_hour: float


class Volume(Value):
    """An EBS volume: billed per GB-month (and provisioned IOPS / throughput) while it exists,
    attached or not, whatever its instance's state."""

    volume_id: str
    volume_type: str  # "gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"
    size_gib: int
    created: float
    availability_zone: str = ""
    iops: int = 0
    throughput: int = 0  # MiB/s (gp3)
    instance_id: str | None = None  # attached to, if any


class Instance(Value):
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
    volumes: tuple[Volume, ...] = ()  # EBS volumes attached, billed with the instance
    history: str = ""  # where ``billing`` comes from: "cloudtrail", "observed" (since last start only), "" (the backend)
    spot_type: str = ""  # the spot request's type as EC2 names it: "one-time" or "persistent" ("": unknown)
    spot_interruption: str = ""  # its InstanceInterruptionBehavior: "terminate", "stop" or "hibernate"
    cloud: str = "aws"  # the provider's name (CLOUDS)
    currency: str = "USD"  # of price_per_hour and accrued_cost: the account's own currency
    stopped_bills: bool = False  # a stopped instance whose compute still bills (ECS KeepCharging)
    spot_stoppable: bool = False  # a spot instance its cloud lets a user stop and start (ECS preemptible)
    image_id: str = ""  # the image it was launched from, where its cloud says ("": unknown)
    # The most a spot instance may cost per hour (Azure's maxPrice); None: up to on-demand, or unknown.
    spot_max_price: float | None = None

    def tag(self, key: str) -> str | None:
        return tag_of(self.tags, key)

    @property
    def bills_now(self) -> bool:
        """Whether its compute is billed at this moment, on any cloud: while pending, running or
        stopping, and while stopped when its cloud keeps charging a stopped instance."""
        return self.state.billed or (self.state is InstanceState.STOPPED and self.stopped_bills)

    @property
    def one_time_spot(self) -> bool:
        """A spot instance of a one-time request: EC2 refuses to stop it; only a terminate ends it."""
        return self.market is Market.SPOT and self.spot_type == "one-time"

    @property
    def stoppable_spot(self) -> bool:
        """A spot instance of a persistent request that is interrupted by stopping: EC2 lets a
        user stop it like an on-demand one (the request waits, disabled, until it is started)."""
        if self.market is not Market.SPOT:
            return False
        return self.spot_stoppable or (self.spot_type == "persistent" and self.spot_interruption == "stop")

    @property
    def spot_kind(self) -> str:
        """``one-time``, ``persistent/stop``… in EC2's words; empty for on-demand or unknown."""
        if self.market is not Market.SPOT or not self.spot_type:
            return ""
        return f"{self.spot_type}/{self.spot_interruption}" if self.spot_type == "persistent" else self.spot_type


# --------------------------------------------------------------------------- Provisioning


class Workload(str, enum.Enum):
    """What an instance is for; the wizard recommends types from it."""

    TRAINING = "training"
    INFERENCE = "inference"


class RegionPrice(Value):
    """The on-demand Linux price of one type in one region."""

    instance_type: str
    region: str
    price: float  # $/h


class Subnet(Value):
    subnet_id: str
    vpc_id: str
    availability_zone: str
    cidr: str
    name: str = ""
    default_for_az: bool = False
    available_ips: int = 0


class SecurityGroup(Value):
    group_id: str
    name: str
    vpc_id: str
    description: str = ""


class KeyPair(Value):
    name: str
    key_type: str = ""


class MachineImage(Value):
    """An AMI, and where its id came from (an SSM parameter path, or "explicit")."""

    image_id: str
    name: str = ""
    source: str = "explicit"


class LaunchSpec(Value):
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
    options: LaunchOptions | None = None  # what only the type's cloud has (its provider's Struct)

    def tag(self, key: str) -> str | None:
        return tag_of(self.tags, key)


class LaunchAttempt(Value):
    """One try of a launch: where, what, and what the cloud answered."""

    instance_type: str
    availability_zone: str
    market: Market
    ok: bool
    message: str  # "launched i-…" or the error code and message
    instance_ids: tuple[str, ...] = ()
    ts: float = 0.0

