"""AWS answers → gpuconsole types, as pure functions: EC2, SSM and Pricing JSON → model, and
botocore exceptions → :class:`~gpuconsole.backends.base.BackendError` subclasses. No I/O: input
is the plain ``dict`` boto3 returns, or the exception it raised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
    SSOError,
    SSOTokenLoadError,
    TokenRetrievalError,
    UnauthorizedSSOTokenError,
)

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendThrottled,
    BackendTimeout,
    BackendUnavailable,
    CapacityError,
)
from gpuconsole.model import (
    CostLine,
    Instance,
    InstanceState,
    InstanceType,
    KeyPair,
    Market,
    RegionPrice,
    SecurityGroup,
    SpotPrice,
    Subnet,
)

# Instance families whose boards are NVIDIA GPUs. EC2 has no server-side "has a GPU" filter for
# DescribeInstances, so the poll recognises GPU instances by family: the part of the type name
# before the dot ("p4d" in "p4d.24xlarge", "p6-b200" in "p6-b200.48xlarge"). Retired families
# (p2, p3, g3) stay listed because old instances of them still run. AMD (g4ad), Inferentia,
# Trainium and Gaudi (dl1) families are left out: the console's GPU views are NVIDIA views.
# The catalog (``instance_types``) asks EC2 for these families too, so a family AWS adds later
# appears in both places once it is listed here (and in polls with ``all_types`` before that).
NVIDIA_GPU_FAMILIES: frozenset[str] = frozenset({
    "p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en",
    "p6-b200", "p6-b300", "p6e-gb200", "p6e-gb300",
    "g3", "g3s", "g4dn", "g5", "g5g", "g6", "g6e", "g6f", "gr6", "gr6f", "g7", "g7e",
})

# Families whose multi-GPU sizes join their GPUs with NVLink/NVSwitch (V100 SXM2 and later SXM
# boards). Single-GPU sizes (p3.2xlarge) have nothing to link; the g families use PCIe cards and
# p2's K80s have no NVLink.
_NVLINK_FAMILY_PREFIXES: tuple[str, ...] = ("p3", "p4d", "p4de", "p5", "p6")


def family(instance_type: str) -> str:
    """The family of an instance type: ``"g5"`` for ``"g5.xlarge"``."""
    return instance_type.split(".", 1)[0]


def is_nvidia_gpu_type(instance_type: str) -> bool:
    """Whether ``instance_type`` belongs to a family listed in :data:`NVIDIA_GPU_FAMILIES`."""
    return family(instance_type) in NVIDIA_GPU_FAMILIES


def family_patterns() -> list[str]:
    """``instance-type`` filter values (``"p4d.*"`` …) selecting the GPU families server-side."""
    return sorted(f"{name}.*" for name in NVIDIA_GPU_FAMILIES)


def has_nvlink(instance_type: str, gpu_count: int) -> bool:
    """NVLink between the GPUs: multi-GPU sizes of p3/p3dn/p4d/p4de/p5*/p6* (see module notes)."""
    fam = family(instance_type)
    return gpu_count > 1 and fam != "p2" and fam.startswith(_NVLINK_FAMILY_PREFIXES)


def _posix(value: Any) -> float:
    """boto3 parses timestamps into aware datetimes; older stubs and JSON give strings."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return 0.0


def _tags(raw: Iterable[Mapping[str, Any]] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(t.get("Key", "")), str(t.get("Value", ""))) for t in raw or ()))


def instance(raw: Mapping[str, Any], region: str, spot_request: Mapping[str, Any] | None = None) -> Instance:
    """One element of ``Reservations[].Instances[]`` → :class:`Instance`; ``spot_request``: its
    ``DescribeSpotInstanceRequests`` entry, for a spot instance (status, type, interruption).

    Price, GPU count and model stay empty: the core fills them from the catalog it already
    holds, so the adapter makes no extra call per poll to learn what a type is.
    """
    request = spot_request or {}
    tags = _tags(raw.get("Tags"))
    reason = (raw.get("StateReason") or {}).get("Message") or raw.get("StateTransitionReason") or ""
    market = Market.SPOT if raw.get("InstanceLifecycle") == "spot" else Market.ON_DEMAND
    return Instance(
        instance_id=raw["InstanceId"],
        instance_type=raw.get("InstanceType", ""),
        region=region,
        availability_zone=(raw.get("Placement") or {}).get("AvailabilityZone", ""),
        market=market,
        state=InstanceState((raw.get("State") or {}).get("Name", "pending")),
        launch_time=_posix(raw.get("LaunchTime")),
        price_per_hour=0.0,
        name=dict(tags).get("Name", ""),
        tags=tags,
        state_reason=str(reason),
        **(_spot_request(request) if market is Market.SPOT else {}),
    )


def _spot_request(request: Mapping[str, Any]) -> dict[str, str]:
    """A spot instance's request fields: its status code, type and interruption behaviour
    (EC2 leaves the behaviour out of older requests: terminate is its default)."""
    if not request:
        return {}
    return {
        "spot_status": str((request.get("Status") or {}).get("Code", "")),
        "spot_type": str(request.get("Type", "")),
        "spot_interruption": str(request.get("InstanceInterruptionBehavior") or "terminate"),
    }


def instance_type(raw: Mapping[str, Any]) -> InstanceType | None:
    """One ``DescribeInstanceTypes`` entry → :class:`InstanceType`; ``None`` without an NVIDIA GPU."""
    gpus = [g for g in (raw.get("GpuInfo") or {}).get("Gpus", ()) if g.get("Manufacturer") == "NVIDIA"]
    if not gpus:
        return None
    board = gpus[0]
    count = sum(int(g.get("Count", 0)) for g in gpus)
    name = raw["InstanceType"]
    return InstanceType(
        name=name,
        gpu_model=f"NVIDIA {board.get('Name', '')}".strip(),
        gpu_count=count,
        gpu_memory_gib=round(int((board.get("MemoryInfo") or {}).get("SizeInMiB", 0)) / 1024),
        vcpus=int((raw.get("VCpuInfo") or {}).get("DefaultVCpus", 0)),
        memory_gib=round(int((raw.get("MemoryInfo") or {}).get("SizeInMiB", 0)) / 1024),
        on_demand_price=0.0,
        network=str((raw.get("NetworkInfo") or {}).get("NetworkPerformance", "")),
        nvme_gb=int((raw.get("InstanceStorageInfo") or {}).get("TotalSizeInGB", 0)),
        nvlink=has_nvlink(name, count),
    )


def spot_price(raw: Mapping[str, Any]) -> SpotPrice:
    """One ``SpotPriceHistory`` entry → :class:`SpotPrice` (EC2 sends the price as a string)."""
    return SpotPrice(
        instance_type=raw["InstanceType"],
        availability_zone=raw.get("AvailabilityZone", ""),
        price=float(raw["SpotPrice"]),
        ts=_posix(raw.get("Timestamp")),
    )


def subnet(raw: Mapping[str, Any]) -> Subnet:
    return Subnet(
        subnet_id=raw["SubnetId"],
        vpc_id=raw.get("VpcId", ""),
        availability_zone=raw.get("AvailabilityZone", ""),
        cidr=raw.get("CidrBlock", ""),
        name=dict(_tags(raw.get("Tags"))).get("Name", ""),
        default_for_az=bool(raw.get("DefaultForAz", False)),
        available_ips=int(raw.get("AvailableIpAddressCount", 0)),
    )


def security_group(raw: Mapping[str, Any]) -> SecurityGroup:
    return SecurityGroup(
        group_id=raw["GroupId"],
        name=raw.get("GroupName", ""),
        vpc_id=raw.get("VpcId", ""),
        description=raw.get("Description", ""),
    )


def key_pair(raw: Mapping[str, Any]) -> KeyPair:
    return KeyPair(name=raw["KeyName"], key_type=raw.get("KeyType", ""))


def on_demand_price(product_json: str, region: str) -> RegionPrice | None:
    """One ``PriceList`` entry of ``pricing.get_products`` → :class:`RegionPrice`.

    Each entry is a JSON *string* holding ``product.attributes`` and ``terms.OnDemand.<offer>.
    priceDimensions.<dim>.pricePerUnit.USD``. ``None`` when the entry carries no hourly price
    above zero (reservation placeholders are listed at $0).
    """
    doc = json.loads(product_json)
    name = (doc.get("product") or {}).get("attributes", {}).get("instanceType")
    if not name:
        return None
    prices = [
        float(dim.get("pricePerUnit", {}).get("USD", 0) or 0)
        for offer in ((doc.get("terms") or {}).get("OnDemand") or {}).values()
        for dim in (offer.get("priceDimensions") or {}).values()
        if str(dim.get("unit", "Hrs")).lower().startswith("hr")
    ]
    positive = [p for p in prices if p > 0]
    return RegionPrice(instance_type=name, region=region, price=min(positive)) if positive else None


# --------------------------------------------------------------------------- Cost Explorer

COST_METRIC = "UnblendedCost"
UNTAGGED = "(untagged)"


def cost_period(start: float, end: float) -> dict[str, str]:
    """``[start, end)`` as Cost Explorer's ``TimePeriod``: whole UTC days, ``End`` exclusive.

    A partial last day counts as a whole one (today's spend so far), and the period is at
    least one day, which the API requires.
    """
    first = datetime.fromtimestamp(start, UTC).date()
    last = datetime.fromtimestamp(end, UTC)
    at_midnight = last == datetime(last.year, last.month, last.day, tzinfo=UTC)
    stop = max(last.date() if at_midnight else last.date() + timedelta(days=1), first + timedelta(days=1))
    return {"Start": first.isoformat(), "End": stop.isoformat()}


def cost_lines(pages: Iterable[Mapping[str, Any]], group_by_tag: str | None = None) -> tuple[CostLine, ...]:
    """``GetCostAndUsage`` answers (every page) → cost lines.

    Without a group, one line per day (dimension ``"day"``, key the day's ``YYYY-MM-DD``); with
    a tag group, one line per tag value summed over the period (dimension ``"tag:<key>"``;
    Cost Explorer's ``"Owner$"`` key of untagged spend becomes ``"(untagged)"``). Amounts are
    US dollars of :data:`COST_METRIC`; ``per_hour`` stays 0, billing data has no rate.
    """
    amounts: dict[str, float] = {}
    for page in pages:
        for period in page.get("ResultsByTime") or ():
            if group_by_tag is None:
                day = str((period.get("TimePeriod") or {}).get("Start", ""))
                amounts[day] = amounts.get(day, 0.0) + _amount(period.get("Total"))
                continue
            for group in period.get("Groups") or ():
                keys = group.get("Keys") or [""]
                value = str(keys[0]).split("$", 1)[1] if "$" in str(keys[0]) else str(keys[0])
                value = value or UNTAGGED
                amounts[value] = amounts.get(value, 0.0) + _amount(group.get("Metrics"))
    if group_by_tag is None:
        return tuple(CostLine("day", day, amount) for day, amount in sorted(amounts.items()))
    ranked = sorted(amounts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(CostLine(f"tag:{group_by_tag}", value, amount) for value, amount in ranked)


def _amount(metrics: Mapping[str, Any] | None) -> float:
    return float(((metrics or {}).get(COST_METRIC) or {}).get("Amount") or 0.0)


# --------------------------------------------------------------------------- errors

CREDENTIALS_HINT = (
    "run `aws configure` or `aws sso login`, or set AWS_PROFILE "
    "(or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
)
REGION_HINT = "pass --region, or set AWS_REGION / a region in your profile"
SSO_HINT = "run `aws sso login`"

THROTTLED_CODES = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException"})
CAPACITY_CODES = frozenset({"InsufficientInstanceCapacity", "InsufficientCapacity"})
# Refusals of the caller, as opposed to of the request; AccessDenied* is matched by prefix.
DENIED_CODES = frozenset({
    "UnauthorizedOperation", "AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException",
    "SignatureDoesNotMatch", "OptInRequired",
})
EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException"})
SSO_ERRORS = (SSOError, SSOTokenLoadError, TokenRetrievalError, UnauthorizedSSOTokenError)

_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{12,}\b")
_OPAQUE = re.compile(r"[A-Za-z0-9/+=]{40,}")
_MAX_MESSAGE = 300


def error_code(exc: ClientError) -> str:
    """The AWS error code of ``exc``; botocore uses the HTTP status when the body had none."""
    return str(exc.response.get("Error", {}).get("Code", "") or "")


def _cut_opaque(match: re.Match[str]) -> str:
    """A long run mixing upper case, lower case and digits is a secret or an encoded blob."""
    run = match.group(0)
    mixed = any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run)
    return "…" if mixed else run


def one_line(text: str, secrets: Iterable[str] = ()) -> str:
    """One line a status bar can show: no credentials, no encoded blob, at most 300 characters.

    ``secrets`` are the credential values in use, cut out wherever they appear; key ids and
    long mixed-case runs (secret keys, session tokens, "Encoded authorization failure
    message" blobs) are cut even when they are not ours.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _KEY_ID.sub("***", text)
    text = _OPAQUE.sub(_cut_opaque, text)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def backend_error(exc: Exception, where: str = "", *, secrets: Iterable[str] = ()) -> BackendError:
    """The one mapping of botocore's exceptions to the backend error family.

    Args:
        exc: a ``ClientError`` (AWS answered with an error) or a ``BotoCoreError`` (it did not
            answer, or the call could not be made).
        where: what the message starts with, e.g. the region of a multi-region poll.
        secrets: credential values to cut out of the message.
    """
    prefix = f"{where}: " if where else ""
    secrets = tuple(secrets)
    if isinstance(exc, ClientError):
        code = error_code(exc) or "Unknown"
        message = str(exc.response.get("Error", {}).get("Message", "") or "")
        if message.lstrip().startswith("<"):  # an HTML error page from something that is not AWS
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", code)
            message = f"unexpected answer (HTTP {status})"
        text = f"{prefix}{code}: {one_line(message, secrets)}" if message else f"{prefix}{code}"
        if code in THROTTLED_CODES:
            return BackendThrottled(text)
        if code in CAPACITY_CODES or (code == "Unsupported" and "availability zone" in message.lower()):
            return CapacityError(text)
        if code in DENIED_CODES or code.startswith("AccessDenied"):
            return BackendPermissionDenied(text)
        if code in EXPIRED_CODES:
            return BackendUnavailable(text, hint=CREDENTIALS_HINT)
        return BackendError(text)
    detail = one_line(str(exc), secrets)
    if isinstance(exc, (ConnectTimeoutError, ReadTimeoutError)):
        return BackendTimeout(f"{prefix}{detail}")
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return BackendUnavailable(f"{prefix}no usable AWS credentials: {detail}", hint=CREDENTIALS_HINT)
    if isinstance(exc, SSO_ERRORS):
        return BackendUnavailable(f"{prefix}the AWS SSO login has expired or is missing", hint=SSO_HINT)
    if isinstance(exc, NoRegionError):
        return BackendUnavailable("no AWS region configured", hint=REGION_HINT)
    if isinstance(exc, EndpointConnectionError):
        return BackendError(f"{prefix}{detail}")
    return BackendError(f"{prefix}{type(exc).__name__}: {detail}")
