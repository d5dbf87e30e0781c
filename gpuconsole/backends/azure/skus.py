"""Reading Azure's resource SKUs (``Microsoft.Compute/skus``): a size's capabilities (``GPUs``,
``vCPUs``, ``MemoryGB``) and the zones its restrictions leave this subscription in a location.
"""

from __future__ import annotations

from typing import Any


def capability_text(sku: dict[str, Any], name: str) -> str:
    for cap in sku.get("capabilities") or ():
        if cap.get("name") == name:
            return str(cap.get("value") or "")
    return ""


def capability(sku: dict[str, Any], name: str) -> int:
    try:
        return int(float(capability_text(sku, name) or 0))
    except ValueError:
        return 0


def restricted_zones(sku: dict[str, Any], region: str) -> tuple[str, ...] | None:
    """The zones of ``region`` the subscription may use for ``sku``; None when the whole location
    is restricted; ``()`` for a location without zones."""
    zones: list[str] = []
    for info in sku.get("locationInfo") or ():
        if str(info.get("location") or "").lower() == region.lower():
            zones.extend(str(z) for z in info.get("zones") or ())
    for restriction in sku.get("restrictions") or ():
        info = restriction.get("restrictionInfo") or {}
        if restriction.get("type") == "Location" and region.lower() in [str(x).lower() for x in restriction.get("values") or ()]:
            return None
        if restriction.get("type") == "Zone":
            banned = {str(z) for z in info.get("zones") or ()}
            zones = [z for z in zones if z not in banned]
    return tuple(sorted(zones))
