"""Azure Resource Manager's JSON (the documented wire shapes, as the SDK's ``as_dict()`` gives them)
→ the neutral model, and the SDK's errors → the backend error family, as EC2's are mapped.

Billing rules, as Azure publishes them:

- Virtual machines are billed by the second for the time they hold compute ("pay for compute
  capacity by the second", https://azure.microsoft.com/pricing/details/virtual-machines/linux/);
  the Retail Prices API quotes them per ``1 Hour``.
- A VM that is *stopped* (powered off from inside the guest, or through the PowerOff API) still
  holds its hardware and bills its compute; only a *deallocated* VM stops billing compute. Disks
  and public addresses bill in both states
  (https://learn.microsoft.com/azure/virtual-machines/states-billing).
- A Spot VM can be evicted at any time with at least 30 seconds' notice, by a Scheduled Events
  ``Preempt`` event; its eviction policy then deallocates or deletes it
  (https://learn.microsoft.com/azure/virtual-machines/spot-vms,
  https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendThrottled,
    BackendTimeout,
    BackendUnavailable,
    CapacityError,
)
from gpuconsole.model import Instance, InstanceState, InstanceType, Market

# ``PowerState/<code>`` of the instance view → the neutral state. "stopped" is powered off but
# still allocated (it bills); "deallocated" is not.
STATES = {
    "starting": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPING,
    "deallocating": InstanceState.STOPPING,
    "stopped": InstanceState.STOPPED,
    "deallocated": InstanceState.STOPPED,
}
BILLING_STOPPED = frozenset({"stopped"})
GPU_SIZE = re.compile(r"^(?:Standard|Basic)_N[CDV]", re.IGNORECASE)  # the NC, ND and NV families
VM_ID = re.compile(r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<group>[^/]+)/providers/"
                   r"Microsoft\.Compute/virtualMachines/(?P<name>[^/]+)$", re.IGNORECASE)
# GPU models by the token the size name carries (Azure's size names say the GPU; the SKU list
# gives only the count), and the older families whose names do not.
GPU_TOKENS = (("H200", "NVIDIA H200"), ("H100", "NVIDIA H100"), ("A100", "NVIDIA A100"), ("MI300X", "AMD MI300X"),
              ("A10", "NVIDIA A10"), ("T4", "NVIDIA T4"), ("V710", "AMD V710"), ("V620", "AMD V620"))
OLDER_FAMILIES = ((re.compile(r"^Standard_NC\d+s?_v3$", re.I), "NVIDIA V100"),
                  (re.compile(r"^Standard_ND\d+rs_v2$", re.I), "NVIDIA V100"),
                  (re.compile(r"^Standard_NV\d+s_v3$", re.I), "NVIDIA M60"),
                  (re.compile(r"^Standard_NV\d+as_v4$", re.I), "AMD MI25"))
# Published figures of the common GPU sizes: GPUs, GPU memory GiB each, vCPUs, memory GiB
# (https://learn.microsoft.com/azure/virtual-machines/sizes/overview, GPU accelerated).
SIZES: dict[str, tuple[int, int, int, int]] = {
    "Standard_NC4as_T4_v3": (1, 16, 4, 28), "Standard_NC8as_T4_v3": (1, 16, 8, 56),
    "Standard_NC16as_T4_v3": (1, 16, 16, 110), "Standard_NC64as_T4_v3": (4, 16, 64, 440),
    "Standard_NC24ads_A100_v4": (1, 80, 24, 220), "Standard_NC48ads_A100_v4": (2, 80, 48, 440),
    "Standard_NC96ads_A100_v4": (4, 80, 96, 880), "Standard_ND96asr_v4": (8, 40, 96, 900),
    "Standard_ND96amsr_A100_v4": (8, 80, 96, 1900), "Standard_ND96isr_H100_v5": (8, 80, 96, 1900),
    "Standard_ND96isr_H200_v5": (8, 141, 96, 1850), "Standard_NC40ads_H100_v5": (1, 94, 40, 320),
    "Standard_NC80adis_H100_v5": (2, 94, 80, 640), "Standard_NC6s_v3": (1, 16, 6, 112),
    "Standard_NC24s_v3": (4, 16, 24, 448), "Standard_NV36ads_A10_v5": (1, 24, 36, 440),
}
CREDENTIALS_HINT = ("sign in with `az login`, or set AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET "
                    "(a service principal); AZURE_TOKEN_CREDENTIALS narrows the chain")
THROTTLED_CODES = frozenset({"TooManyRequests", "SubscriptionRequestsThrottled", "ResourceGroupRequestsThrottled"})
CAPACITY_CODES = frozenset({"AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest",
                            "OverconstrainedZonalAllocationRequest", "SkuNotAvailable", "QuotaExceeded",
                            "SkuNotAvailableInZone", "OperationNotAllowed"})
_MAX_MESSAGE = 300
MANAGED_TAG = ("ManagedBy", "gpuconsole")  # on what gpuconsole creates: a delete takes these along


def published_types() -> dict[str, InstanceType]:
    """The common GPU sizes as Azure publishes them (no credentials needed; prices come apart)."""
    return {name: InstanceType(name=name, gpu_model=gpu_model(name), gpu_count=n, gpu_memory_gib=mem, vcpus=cpus,
                               memory_gib=ram, on_demand_price=0.0, cloud="azure", currency="")
            for name, (n, mem, cpus, ram) in SIZES.items()}


def is_gpu_size(size: str) -> bool:
    return bool(GPU_SIZE.match(size))


def gpu_model(size: str) -> str:
    """The GPU a size carries, from its name ("" when the name does not say)."""
    tokens = set(re.split(r"[_\s]", size.upper()))
    for token, model in GPU_TOKENS:
        if token in tokens:
            return model
    for pattern, model in OLDER_FAMILIES:
        if pattern.match(size):
            return model
    return ""


def arm_time(text: Any) -> float:
    """ARM's ISO 8601 times (``2026-12-01T08:00:00.1234567+00:00``) as POSIX seconds; 0 when absent."""
    if not text:
        return 0.0
    value = re.sub(r"(\.\d{6})\d+", r"\1", str(text)).replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return 0.0


def power_state(raw: dict[str, Any]) -> str:
    """``running``, ``stopped``, ``deallocated``… from the instance view's ``PowerState/…``
    status ("" when the view is absent or says nothing)."""
    view = (raw.get("properties") or {}).get("instanceView") or {}
    for status in view.get("statuses") or ():
        code = str(status.get("code") or "")
        if code.startswith("PowerState/"):
            return code.split("/", 1)[1].lower()
    return ""


def is_windows(raw: dict[str, Any]) -> bool:
    os_disk = ((raw.get("properties") or {}).get("storageProfile") or {}).get("osDisk") or {}
    return str(os_disk.get("osType") or "").lower() == "windows"


def vm_parts(vm_id: str) -> tuple[str, str]:
    """``(resource group, VM name)`` of an ARM VM id; BackendError for anything else."""
    match = VM_ID.match(vm_id)
    if not match:
        raise BackendError(f"not an Azure VM id: {vm_id!r} (/subscriptions/…/virtualMachines/NAME)")
    return match["group"], match["name"]


def instance_from(raw: dict[str, Any], price: float, gpus: int, currency: str = "USD") -> Instance:
    """One VM (with its instance view) as the neutral model (``price`` per hour, 0 when unknown)."""
    props = raw.get("properties") or {}
    size = str((props.get("hardwareProfile") or {}).get("vmSize") or "")
    power = power_state(raw)
    spot = str(props.get("priority") or "") == "Spot"
    image = (props.get("storageProfile") or {}).get("imageReference") or {}
    urn = ":".join(str(image.get(k) or "") for k in ("publisher", "offer", "sku", "version")).strip(":")
    image_id = str(image.get("id") or urn)
    zones = raw.get("zones") or ()
    location = str(raw.get("location") or "")
    eviction = str(props.get("evictionPolicy") or "")
    max_price = (props.get("billingProfile") or {}).get("maxPrice")
    state = STATES.get(power, InstanceState.PENDING)  # no power state yet: being created
    if str(props.get("provisioningState") or "") == "Deleting":
        state = InstanceState.SHUTTING_DOWN
    return Instance(
        instance_id=str(raw.get("id") or ""),
        instance_type=size,
        region=location,
        availability_zone=f"{location}-{zones[0]}" if zones else "",
        market=Market.SPOT if spot else Market.ON_DEMAND,
        state=state,
        launch_time=arm_time(props.get("timeCreated")),
        price_per_hour=price,
        gpus=gpus,
        gpu_model=gpu_model(size),
        name=str(raw.get("name") or ""),
        tags=tuple((str(k), str(v)) for k, v in sorted((raw.get("tags") or {}).items())),
        # Any Spot VM can be deallocated and started again (EC2's "persistent" in the neutral words);
        # its eviction policy is what an eviction does to it.
        spot_type="persistent" if spot else "",
        spot_interruption=("stop" if eviction == "Deallocate" else "terminate") if spot else "",
        spot_stoppable=spot,  # a Spot VM is deallocated and started like any other
        image_id=image_id,
        cloud="azure",
        currency=currency,
        stopped_bills=power in BILLING_STOPPED,
        spot_max_price=max_price if spot and max_price is not None and max_price > 0 else None,  # -1: up to pay-as-you-go
    )


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def rbac_line(message: str) -> str:
    """ARM's AuthorizationFailed message cut to what it denied: the action and the scope."""
    found = re.search(r"perform action '([^']+)' over scope '([^']+)'", message)
    return f"Azure RBAC denied {found[1]} on {found[2]}" if found else _cut(message)


def backend_error(exc: Exception, where: str = "") -> BackendError:
    """The SDK's exceptions (azure.core's) as the backend error family: the same classes EC2's
    codes map to; a 403 from Azure RBAC is one line naming the action and the scope."""
    prefix = f"{where}: " if where else ""
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    error = getattr(exc, "error", None)
    code = str(getattr(error, "code", "") or "")
    message = str(getattr(error, "message", "") or getattr(exc, "message", "") or str(exc)).splitlines()[0] if str(exc) else name
    if name in ("CredentialUnavailableError", "ClientAuthenticationError") and status is None:
        return BackendUnavailable(f"{prefix}no usable Azure credentials: {_cut(message)}", hint=CREDENTIALS_HINT)
    if status == 403 or code == "AuthorizationFailed":
        return BackendPermissionDenied(f"{prefix}{rbac_line(message)}")
    if status == 401:
        return BackendUnavailable(f"{prefix}{code or 'Unauthorized'}: {_cut(message)}", hint=CREDENTIALS_HINT)
    text = f"{prefix}{code}: {_cut(message)}" if code else f"{prefix}{_cut(message)}"
    if status == 429 or code in THROTTLED_CODES:
        return BackendThrottled(text)
    if code in CAPACITY_CODES:
        return CapacityError(text)
    if status is not None:
        return BackendError(text)
    if name in ("ServiceResponseTimeoutError", "ServiceRequestTimeoutError") or re.search(r"timed? ?out", message, re.I):
        return BackendTimeout(f"{prefix}{_cut(message)}")
    if name in ("ServiceRequestError", "ServiceResponseError"):
        return BackendUnavailable(f"{prefix}cannot reach Azure: {_cut(message)}")
    return BackendError(f"{prefix}{name}: {_cut(message)}")
