"""ECS JSON (the documented response shapes, as ``to_map()`` gives them) → the neutral model, and
the SDK's errors → the backend error family, as EC2's are mapped.

Billing rules, as Alibaba Cloud publishes them:

- Pay-as-you-go instances are billed by the second for as long as they hold resources
  (https://www.alibabacloud.com/help/en/ecs/user-guide/pay-as-you-go-1).
- A pay-as-you-go instance in a VPC stopped in *economical mode* (``StoppedMode=StopCharging``)
  stops billing its vCPUs, memory and GPUs; its disks, and a subscription instance, keep billing.
  Stopped in standard mode (``KeepCharging``) it bills on, holding its resources
  (StopInstance, https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-stopinstance).
- A preemptible (spot) instance is reclaimed when the market price rises above its limit or stock
  runs out; DescribeInstances then shows ``OperationLocks.LockReason = "Recycling"`` about five
  minutes before it is released (https://www.alibabacloud.com/help/en/ecs/user-guide/preemptible-instances).
"""

from __future__ import annotations

import calendar
import re
import time
from typing import Any

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendThrottled,
    BackendTimeout,
    BackendUnavailable,
    CapacityError,
    DryRunFailed,
)
from gpuconsole.model import Instance, InstanceState, Market, SecurityGroup, Subnet

STATES = {
    "Pending": InstanceState.PENDING,
    "Starting": InstanceState.PENDING,
    "Running": InstanceState.RUNNING,
    "Stopping": InstanceState.STOPPING,
    "Stopped": InstanceState.STOPPED,
}
THROTTLED_CODES = frozenset({"Throttling", "Throttling.User", "Throttling.Api", "ServiceUnavailable"})
CAPACITY_CODES = frozenset({"OperationDenied.NoStock", "Zone.NotOnSale", "InvalidResourceType.NotSupported"})
DENIED_CODES = frozenset({"Forbidden.RAM", "Forbidden", "NoPermission", "InvalidAccessKeyId.NotFound",
                          "IncompleteSignature", "SignatureDoesNotMatch"})
CREDENTIALS_HINT = ("set ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, or a profile in "
                    "~/.alibabacloud/credentials ([alibaba] profile)")
RECLAIM = "Recycling"  # OperationLocks.LockReason of a preemptible instance being reclaimed
_MAX_MESSAGE = 240


def _items(parent: Any, outer: str, inner: str) -> list[dict[str, Any]]:
    """``{"Outer": {"Inner": [...]}}`` as a list (ECS wraps every array this way)."""
    box = (parent or {}).get(outer) or {}
    found = box.get(inner) if isinstance(box, dict) else box
    return [x for x in (found or []) if isinstance(x, dict)]


def ecs_time(text: str | None) -> float:
    """ECS's UTC times (``2024-05-01T08:00Z`` or with seconds) as POSIX seconds; 0 when absent."""
    if not text:
        return 0.0
    for form in ("%Y-%m-%dT%H:%MZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return float(calendar.timegm(time.strptime(text, form)))
        except ValueError:
            continue
    return 0.0


def stopped_bills(raw: dict[str, Any]) -> bool:
    """Whether a stopped instance's compute still bills: a subscription one always; a
    pay-as-you-go one unless stopped in economical mode (``StopCharging``)."""
    if raw.get("InstanceChargeType") == "PrePaid":
        return True
    return raw.get("StoppedMode") != "StopCharging"


def instance_from(raw: dict[str, Any], region: str, price: float, currency: str) -> Instance:
    """One DescribeInstances ``Instance`` as the neutral model (``price``: per hour, pay-as-you-go
    or the spot limit; 0 where unknown)."""
    status = str(raw.get("Status") or "")
    locks = [x.get("LockReason", "") for x in _items(raw, "OperationLocks", "LockReason")]
    spot = raw.get("SpotStrategy") in ("SpotWithPriceLimit", "SpotAsPriceGo")
    reason = "preemptible instance is being reclaimed (Recycling)" if RECLAIM in locks else ""
    tags = tuple((str(t.get("TagKey", "")), str(t.get("TagValue", ""))) for t in _items(raw, "Tags", "Tag"))
    return Instance(
        instance_id=str(raw.get("InstanceId", "")),
        instance_type=str(raw.get("InstanceType", "")),
        region=str(raw.get("RegionId") or region),
        availability_zone=str(raw.get("ZoneId", "")),
        market=Market.SPOT if spot else Market.ON_DEMAND,
        state=STATES.get(status, InstanceState.PENDING),
        launch_time=ecs_time(raw.get("StartTime") or raw.get("CreationTime")),
        price_per_hour=price,
        gpus=int(raw.get("GPUAmount") or 0),
        gpu_model=str(raw.get("GPUSpec") or ""),
        name=str(raw.get("InstanceName") or ""),
        tags=tags,
        state_reason=reason,
        spot_status="marked-for-termination" if reason else "",  # the neutral word spot-recover reads
        spot_stoppable=spot,  # a preemptible instance stops like any pay-as-you-go one
        image_id=str(raw.get("ImageId") or ""),
        cloud="alibaba",
        currency=currency,
        stopped_bills=status == "Stopped" and stopped_bills(raw),
    )


def vswitch(raw: dict[str, Any]) -> Subnet:
    """One DescribeVSwitches ``VSwitch`` as the neutral subnet (a VSwitch lives in one zone)."""
    return Subnet(subnet_id=str(raw.get("VSwitchId", "")), vpc_id=str(raw.get("VpcId", "")),
                  availability_zone=str(raw.get("ZoneId", "")), cidr=str(raw.get("CidrBlock", "")),
                  name=str(raw.get("VSwitchName") or ""), default_for_az=bool(raw.get("IsDefault")),
                  available_ips=int(raw.get("AvailableIpAddressCount") or 0))


def security_group(raw: dict[str, Any]) -> SecurityGroup:
    """One DescribeSecurityGroups ``SecurityGroup``."""
    return SecurityGroup(group_id=str(raw.get("SecurityGroupId", "")), name=str(raw.get("SecurityGroupName") or ""),
                         vpc_id=str(raw.get("VpcId", "")), description=str(raw.get("Description") or ""))


def _cut(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "…")
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def backend_error(exc: Exception, where: str = "", *, secrets: tuple[str, ...] = ()) -> BackendError:
    """The SDK's exceptions as the backend error family: the same classes EC2's codes map to."""
    prefix = f"{where}: " if where else ""
    code = str(getattr(exc, "code", "") or "")
    if code:
        message = _cut(str(getattr(exc, "message", "") or ""), secrets)
        text = f"{prefix}{code}: {message}" if message else f"{prefix}{code}"
        if code in THROTTLED_CODES or code.startswith("Throttling"):
            return BackendThrottled(text)
        if code in CAPACITY_CODES or code.endswith(".NoStock"):
            return CapacityError(text)
        if code in DENIED_CODES or code.startswith("Forbidden"):
            return BackendPermissionDenied(text)
        if code.startswith("InvalidAccessKey") or code == "InvalidSecurityToken.Expired":
            return BackendUnavailable(text, hint=CREDENTIALS_HINT)
        return BackendError(text)
    detail = _cut(str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__, secrets)
    if re.search(r"timed? ?out", detail, re.IGNORECASE):
        return BackendTimeout(f"{prefix}{detail}")
    if "credential" in detail.lower():
        return BackendUnavailable(f"{prefix}no usable Alibaba Cloud credentials: {detail}", hint=CREDENTIALS_HINT)
    return BackendError(f"{prefix}{type(exc).__name__}: {detail}")


def dry_run_error(exc: Exception) -> BackendError | None:
    """None when a DryRun request passed (ECS answers ``DryRunOperation``), else why it failed."""
    if str(getattr(exc, "code", "")) == "DryRunOperation":
        return None
    err = backend_error(exc)
    return err if isinstance(err, (BackendThrottled, CapacityError, BackendTimeout)) else DryRunFailed(str(err))
