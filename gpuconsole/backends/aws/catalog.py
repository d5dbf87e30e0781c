"""What can be launched on AWS and at what price: GPU instance types, on-demand and spot prices,
zones, networks, key pairs, the default image, and the account's billed spend."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.mapping import error_code
from gpuconsole.backends.aws.session import AwsSession
from gpuconsole.backends.base import BackendError, NotSupported
from gpuconsole.model import (
    CostLine,
    InstanceType,
    KeyPair,
    MachineImage,
    RegionPrice,
    SecurityGroup,
    SpotPrice,
    Subnet,
    Workload,
)

# The Pricing API answers only from a few regions; us-east-1 serves every commercial region.
PRICING_REGION = "us-east-1"
# Cost Explorer has one endpoint, in us-east-1, for the whole account.
COST_EXPLORER_REGION = "us-east-1"

# Both workloads start from the Base OSS NVIDIA driver DLAMI: driver, CUDA, Docker and the NVIDIA
# container toolkit, with frameworks pulled as containers. AWS keeps the id of the newest build
# of each DLAMI in a public SSM parameter per region.
DLAMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
DLAMI_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)"


class AwsCatalog(AwsSession):
    """The Provisioner's questions: what exists in a region and what it costs."""

    def instance_types(self, region: str) -> tuple[InstanceType, ...]:
        """The NVIDIA GPU types of the region, as ``DescribeInstanceTypes`` describes them.

        Asked for by family (``p4d.*`` …, see :data:`~gpuconsole.backends.aws.mapping.NVIDIA_GPU_FAMILIES`)
        so the catalog offers exactly the types the instances pane lists, in two pages instead
        of ten; ``GpuInfo`` then decides the GPU model, count and memory.
        """
        ec2 = self._client("ec2", region)
        with self._errors(region):
            raws = self._items(
                ec2, "describe_instance_types", "InstanceTypes",
                Filters=[{"Name": "instance-type", "Values": aws_mapping.family_patterns()}],
            )
            types = [t for t in map(aws_mapping.instance_type, raws) if t is not None]
        return tuple(sorted(types, key=lambda t: t.name))

    def on_demand_prices(self, regions: tuple[str, ...]) -> tuple[RegionPrice, ...]:
        """Linux, shared-tenancy, on-demand prices of GPU instances from the Pricing API.

        One filtered ``GetProducts`` listing per region (``instanceFamily`` "GPU instance"),
        rather than one call per type and region.

        Raises:
            NotSupported: the endpoint answers but not as the Pricing API does (a local emulator
                without it, a partition without it); callers fall back to bundled prices.
        """
        pricing = self._client("pricing", PRICING_REGION)
        prices: dict[tuple[str, str], RegionPrice] = {}
        for region in regions:
            filters = [
                {"Type": "TERM_MATCH", "Field": name, "Value": value}
                for name, value in (
                    ("regionCode", region), ("operatingSystem", "Linux"), ("tenancy", "Shared"),
                    ("preInstalledSw", "NA"), ("capacitystatus", "Used"), ("instanceFamily", "GPU instance"),
                )
            ]
            try:
                with self._errors("Pricing API"):
                    entries = self._items(pricing, "get_products", "PriceList", ServiceCode="AmazonEC2", Filters=filters)
                    found = [p for p in (aws_mapping.on_demand_price(e, region) for e in entries) if p is not None]
            except BackendError as exc:
                cause = exc.__cause__
                if isinstance(cause, ClientError) and error_code(cause).isdigit():
                    # botocore names an error by its HTTP status when the body is not AWS's
                    raise NotSupported(f"the Pricing API is not available at this endpoint (HTTP {error_code(cause)})") from cause
                raise
            for price in found:  # a type can be listed twice (license variants): keep the lower
                key = (price.instance_type, region)
                if key not in prices or price.price < prices[key].price:
                    prices[key] = price
        return tuple(sorted(prices.values(), key=lambda p: (p.region, p.instance_type)))

    def spot_prices(self, region: str, instance_types: tuple[str, ...], since: float) -> tuple[SpotPrice, ...]:
        """Linux/UNIX spot price history since ``since``, oldest first."""
        if not instance_types:
            return ()
        ec2 = self._client("ec2", region)
        with self._errors(region):
            raws = self._items(
                ec2, "describe_spot_price_history", "SpotPriceHistory",
                InstanceTypes=list(instance_types), ProductDescriptions=["Linux/UNIX"],
                StartTime=datetime.fromtimestamp(since, tz=UTC),
            )
            prices = [aws_mapping.spot_price(r) for r in raws]
        return tuple(sorted(prices, key=lambda p: (p.ts, p.availability_zone)))

    def offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Zones offering each type; a type offered nowhere in the region maps to ``()``."""
        if not instance_types:
            return {}
        ec2 = self._client("ec2", region)
        zones: dict[str, set[str]] = {t: set() for t in instance_types}
        with self._errors(region):
            raws = self._items(
                ec2, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": list(instance_types)}],
            )
            for raw in raws:
                zones.setdefault(raw["InstanceType"], set()).add(raw["Location"])
        return {t: tuple(sorted(z)) for t, z in zones.items()}

    def subnets(self, region: str) -> tuple[Subnet, ...]:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            subnets = [aws_mapping.subnet(r) for r in self._items(ec2, "describe_subnets", "Subnets")]
        return tuple(sorted(subnets, key=lambda s: (s.vpc_id, s.availability_zone, s.subnet_id)))

    def security_groups(self, region: str) -> tuple[SecurityGroup, ...]:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            groups = [aws_mapping.security_group(r) for r in self._items(ec2, "describe_security_groups", "SecurityGroups")]
        return tuple(sorted(groups, key=lambda g: (g.vpc_id, g.name)))

    def key_pairs(self, region: str) -> tuple[KeyPair, ...]:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            keys = [aws_mapping.key_pair(r) for r in ec2.describe_key_pairs().get("KeyPairs", ())]  # one page
        return tuple(sorted(keys, key=lambda k: k.name))

    def default_image(self, region: str, workload: Workload) -> MachineImage:
        """The newest Base OSS NVIDIA driver DLAMI in ``region`` (the same for both workloads)."""
        ssm = self._client("ssm", region)
        try:
            with self._errors(region):
                image_id = ssm.get_parameter(Name=DLAMI_PARAMETER)["Parameter"]["Value"]
        except BackendError as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and error_code(cause) == "ParameterNotFound":
                raise BackendError(f"no Deep Learning AMI parameter in {region}; enter an AMI id") from cause
            raise
        return MachineImage(image_id=image_id, name=DLAMI_NAME, source=DLAMI_PARAMETER)

    def cost_and_usage(self, start: float, end: float, group_by_tag: str | None = None) -> tuple[CostLine, ...]:
        """The account's actual spend (unblended, daily) from Cost Explorer over ``[start, end)``,
        in whole UTC days; per day, or per value of tag ``group_by_tag``.

        Each request costs money (a cent a page): callers bound how often this runs
        (:class:`gpuconsole.core.money.cost_explorer.CostExplorer`). Pages are followed, at most 20.
        """
        ce = self._client("ce", COST_EXPLORER_REGION)
        params: dict[str, Any] = {
            "TimePeriod": aws_mapping.cost_period(start, end),
            "Granularity": "DAILY",
            "Metrics": [aws_mapping.COST_METRIC],
        }
        if group_by_tag:
            params["GroupBy"] = [{"Type": "TAG", "Key": group_by_tag}]
        pages: list[dict[str, Any]] = []
        with self._errors("Cost Explorer"):
            token = None
            for _ in range(20):
                page = ce.get_cost_and_usage(**params, **({"NextPageToken": token} if token else {}))
                pages.append(page)
                token = page.get("NextPageToken")
                if not token:
                    break
            return aws_mapping.cost_lines(pages, group_by_tag)
