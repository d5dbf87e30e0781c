"""The static facts of the simulated cloud: GPU models, instance types, zones and MIG layouts.

Numbers follow what the real hardware and EC2 report (``nvidia-smi`` memory totals, board power
limits, us-east-1 on-demand Linux prices), so the console looks the same on the simulator as on
a real fleet and cost views add up to believable sums.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuconsole.model import InstanceType


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU board as NVML and the NVIDIA device plugin name it.

    Attributes:
        name: what NVML reports, e.g. ``"NVIDIA A100-SXM4-80GB"``.
        label: the ``nvidia.com/gpu.product`` node label, spaces turned into dashes.
        memory_mib: usable memory as ``nvidia-smi`` shows it.
        power_limit_w: default board power limit.
        idle_fraction: share of the limit drawn while idle (clocks down, memory refreshed).
        sm_clock_mhz: the SM clock idle (P8) and at full load (the boost clock).
        memory_clock_mhz: the memory clock idle and under load; HBM boards keep theirs.
        pcie_mb_s: the host link's throughput each way (Gen3/4/5 x16).

    None of these boards reports a fan: SXM modules and the passively cooled PCIe cards (T4,
    A10G, L4) are cooled by the server's fans, which NVML does not see, so the fan stays N/A.
    """

    name: str
    label: str
    memory_mib: int
    power_limit_w: float
    idle_fraction: float
    sm_clock_mhz: tuple[int, int]
    memory_clock_mhz: tuple[int, int]
    pcie_mb_s: int


GEN3, GEN4, GEN5 = 15_750, 31_500, 63_000  # MB/s each way of an x16 link

A100_80GB = GpuModel("NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", 81920, 400.0, 0.16, (210, 1410), (1593, 1593), GEN4)
A100_40GB = GpuModel("NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", 40960, 400.0, 0.16, (210, 1410), (1215, 1215), GEN4)
H100_80GB = GpuModel("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3", 81559, 700.0, 0.15, (345, 1980), (2619, 2619), GEN5)
A10G = GpuModel("NVIDIA A10G", "NVIDIA-A10G", 23028, 300.0, 0.2, (210, 1710), (405, 6251), GEN4)
T4 = GpuModel("Tesla T4", "Tesla-T4", 15360, 70.0, 0.22, (300, 1590), (405, 5001), GEN3)
L4 = GpuModel("NVIDIA L4", "NVIDIA-L4", 23034, 72.0, 0.22, (210, 2040), (405, 6251), GEN4)
A10 = GpuModel("NVIDIA A10", "NVIDIA-A10", 23028, 150.0, 0.2, (210, 1695), (405, 6251), GEN4)
A100_PCIE = GpuModel("NVIDIA A100 80GB PCIe", "NVIDIA-A100-80GB-PCIe", 81920, 300.0, 0.16, (210, 1410), (1512, 1512), GEN4)

# GPU memory is per GPU, as EC2's DescribeInstanceTypes reports it (GpuInfo.Gpus[].MemoryInfo).
INSTANCE_TYPES: tuple[InstanceType, ...] = (
    InstanceType("p5.48xlarge", H100_80GB.name, 8, 80, 192, 2048, 98.32, "3200 Gbps EFA", 30400, True),
    InstanceType("p4de.24xlarge", A100_80GB.name, 8, 80, 96, 1152, 40.96608, "400 Gbps EFA", 8000, True),
    InstanceType("p4d.24xlarge", A100_40GB.name, 8, 40, 96, 1152, 32.77248, "400 Gbps EFA", 8000, True),
    InstanceType("g5.xlarge", A10G.name, 1, 24, 4, 16, 1.006, "Up to 10 Gbps", 250),
    InstanceType("g5.12xlarge", A10G.name, 4, 24, 48, 192, 5.672, "40 Gbps", 3800),
    InstanceType("g5.48xlarge", A10G.name, 8, 24, 192, 768, 16.288, "100 Gbps", 7600),
    InstanceType("g6.xlarge", L4.name, 1, 24, 4, 16, 0.8048, "Up to 10 Gbps", 250),
    InstanceType("g6.12xlarge", L4.name, 4, 24, 48, 192, 4.6016, "40 Gbps", 3760),
    InstanceType("g4dn.xlarge", T4.name, 1, 16, 4, 16, 0.526, "Up to 25 Gbps", 125),
    InstanceType("g4dn.12xlarge", T4.name, 4, 16, 48, 192, 3.912, "50 Gbps", 900),
)

# The Alibaba Cloud ECS types of the demo's cn-hangzhou region: GPUs as Alibaba Cloud publishes
# them (gn7i: NVIDIA A10, gn6i: Tesla T4, gn7e: A100 80 GB), pay-as-you-go prices of an
# international-site account (billed in US dollars), the simulator's own figures.
ALIBABA_TYPES: tuple[InstanceType, ...] = (
    InstanceType("ecs.gn7i-c8g1.2xlarge", A10.name, 1, 24, 8, 30, 1.58, "Up to 16 Gbps", 0, cloud="alibaba"),
    InstanceType("ecs.gn6i-c4g1.xlarge", T4.name, 1, 16, 4, 15, 0.86, "Up to 4 Gbps", 0, cloud="alibaba"),
    InstanceType("ecs.gn7e-c16g1.32xlarge", A100_80GB.name, 8, 80, 128, 1000, 27.62, "64 Gbps", 0, True,
                 cloud="alibaba"),
)

# The Azure sizes of the demo's eastus region: NC A100 v4 (A100 80GB PCIe, a 960 GiB NVMe disk per
# GPU) and NC T4 v3, with vCPUs, memory and network as Azure's size pages list them. Prices: the
# pay-as-you-go Linux price per hour in East US, in US dollars, as Azure's Linux virtual machines
# price list publishes it (azure.microsoft.com/pricing/details/virtual-machines/linux/), the figures
# the Retail Prices API returns for the Linux Consumption meter of each armSkuName in eastus.
AZURE_TYPES: tuple[InstanceType, ...] = (
    InstanceType("Standard_NC24ads_A100_v4", A100_PCIE.name, 1, 80, 24, 220, 3.673, "20 Gbps", 960, cloud="azure"),
    InstanceType("Standard_NC48ads_A100_v4", A100_PCIE.name, 2, 80, 48, 440, 7.346, "40 Gbps", 1920, cloud="azure"),
    InstanceType("Standard_NC96ads_A100_v4", A100_PCIE.name, 4, 80, 96, 880, 14.692, "80 Gbps", 3840, cloud="azure"),
    InstanceType("Standard_NC4as_T4_v3", T4.name, 1, 16, 4, 28, 0.526, "8 Gbps", 0, cloud="azure"),
    InstanceType("Standard_NC8as_T4_v3", T4.name, 1, 16, 8, 56, 0.752, "8 Gbps", 0, cloud="azure"),
    InstanceType("Standard_NC16as_T4_v3", T4.name, 1, 16, 16, 110, 1.204, "8 Gbps", 0, cloud="azure"),
    InstanceType("Standard_NC64as_T4_v3", T4.name, 4, 16, 64, 440, 4.352, "32 Gbps", 0, cloud="azure"),
)

INSTANCE_TYPE_BY_NAME: dict[str, InstanceType] = {t.name: t for t in (*INSTANCE_TYPES, *ALIBABA_TYPES, *AZURE_TYPES)}

GPU_MODEL_BY_NAME: dict[str, GpuModel] = {
    m.name: m for m in (A100_80GB, A100_40GB, H100_80GB, A10G, T4, L4, A10, A100_PCIE)
}

REGIONS: dict[str, tuple[str, ...]] = {
    "us-east-1": ("us-east-1a", "us-east-1b", "us-east-1c"),
    "us-west-2": ("us-west-2a", "us-west-2b"),
}

ZONES: tuple[str, ...] = tuple(az for zones in REGIONS.values() for az in zones)

# Each region gets its own VPC; each zone its own /20 subnet inside it.
VPC_SECOND_OCTET: dict[str, int] = {"us-east-1": 0, "us-west-2": 1}

# Which zones sell which type (DescribeInstanceTypeOfferings): not every type everywhere, so
# the launch wizard has zones to choose from and somewhere to fall back to.
OFFERINGS: dict[str, tuple[str, ...]] = {
    "p5.48xlarge": ("us-east-1a", "us-east-1b"),
    "p4de.24xlarge": ("us-east-1a", "us-east-1c", "us-west-2b"),
    "p4d.24xlarge": ("us-east-1a", "us-east-1b", "us-east-1c", "us-west-2a", "us-west-2b"),
    "g5.xlarge": ZONES,
    "g5.12xlarge": ZONES,
    "g5.48xlarge": ("us-east-1a", "us-east-1b", "us-west-2a"),
    "g6.xlarge": ZONES,
    "g6.12xlarge": ("us-east-1a", "us-east-1b", "us-west-2a", "us-west-2b"),
    "g4dn.xlarge": ZONES,
    "g4dn.12xlarge": ("us-east-1a", "us-east-1c", "us-west-2a", "us-west-2b"),
}

# Where capacity runs out at the start: the demo's fallback from a full zone to the next one.
NO_CAPACITY_AT_START: frozenset[tuple[str, str]] = frozenset({("p5.48xlarge", "us-east-1a")})

# How EC2 names each board in DescribeInstanceTypes (manufacturer + name), unlike NVML.
EC2_GPU_NAME: dict[str, str] = {
    A100_80GB.name: "NVIDIA A100",
    A100_40GB.name: "NVIDIA A100",
    H100_80GB.name: "NVIDIA H100",
    A10G.name: "NVIDIA A10G",
    T4.name: "NVIDIA T4",
    L4.name: "NVIDIA L4",
}

# The Deep Learning AMI the public SSM parameter resolves to, and what the account has.
DLAMI_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250502"
DLAMI_SSM_PATH = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
KEY_PAIRS: tuple[tuple[str, str], ...] = (("platform-ops", "ed25519"), ("ci-runner", "rsa"))
SECURITY_GROUPS: tuple[tuple[str, str], ...] = (
    ("default", "default VPC security group"),
    ("gpu-training", "NCCL and EFA traffic between training nodes; SSH from the bastion"),
)

# The EKS cluster a node of each region joins.
CLUSTER_BY_REGION: dict[str, str] = {"us-east-1": "gpu-east", "us-west-2": "gpu-west"}


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One MIG device of a partitioned GPU: profile name, compute slices, memory and GI id."""

    profile: str
    compute: int
    memory_mib: int
    gi_id: int


# A100 80GB split the way inference teams usually split one card: one big, one medium and
# two small devices (3 + 2 + 1 + 1 = all 7 compute slices). GI ids are the ones NVML assigns
# to those placements.
A100_80GB_MIG_LAYOUT: tuple[MigProfile, ...] = (
    MigProfile("3g.40gb", 3, 40192, 2),
    MigProfile("2g.20gb", 2, 19968, 3),
    MigProfile("1g.10gb", 1, 9856, 9),
    MigProfile("1g.10gb", 1, 9856, 10),
)

MIG_TOTAL_COMPUTE = 7


def region_of(availability_zone: str) -> str:
    """``us-east-1b`` → ``us-east-1``; Alibaba Cloud's ``cn-hangzhou-h`` → ``cn-hangzhou``; Azure's
    zone 2 of eastus, written ``eastus-2``, → ``eastus``."""
    return availability_zone[:-2] if availability_zone[-2:-1] == "-" else availability_zone[:-1]


def gpu_model_of(instance_type: str) -> GpuModel:
    """The GPU board an instance type carries.

    Raises:
        KeyError: the type is not in the catalog.
    """
    return GPU_MODEL_BY_NAME[INSTANCE_TYPE_BY_NAME[instance_type].gpu_model]
