"""What a launch asks of one cloud only: each provider's own option Struct, beside the neutral
:class:`~gpuconsole.model.cloud.LaunchSpec`.

A provider declares its Struct with the provider (``backends/clouds.py``); its adapter reads it
and the launch wizard derives its fields from it: a ``Literal`` becomes a choice, a ``bool`` a
tick box, an ``int`` a number with the ``Meta`` bounds, each under the ``Meta`` title. Defaults
are what the cloud does when the option is left out, so a launch without options asks the same.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from gpuconsole.model.value import Value


class AlibabaLaunchOptions(Value, tag="alibaba", forbid_unknown_fields=True):
    """RunInstances parameters only Alibaba Cloud ECS has (documented names in the comments)."""

    # SystemDisk.Category and SystemDisk.PerformanceLevel (the level applies to ESSD only)
    system_disk_category: Annotated[
        Literal["cloud_essd", "cloud_auto", "cloud_essd_entry", "cloud_ssd", "cloud_efficiency"],
        msgspec.Meta(title="Disk category")] = "cloud_essd"
    performance_level: Annotated[Literal["PL0", "PL1", "PL2", "PL3"], msgspec.Meta(title="ESSD level")] = "PL1"
    # SpotDuration: hours a preemptible instance is kept from reclaim (0: none, cheaper)
    spot_duration: Annotated[Literal[1, 0], msgspec.Meta(title="Spot hold (h)")] = 1
    # SpotInterruptionBehavior: what a reclaim does to a preemptible instance
    spot_interruption: Annotated[Literal["Terminate", "Stop"], msgspec.Meta(title="On reclaim")] = "Terminate"
    # InternetMaxBandwidthOut, Mbit/s: 0 gives no public address
    public_bandwidth_mbps: Annotated[int, msgspec.Meta(ge=0, le=100, title="Public Mbit/s")] = 0
    # DeletionProtection: DeleteInstance is refused until it is turned off
    deletion_protection: Annotated[bool, msgspec.Meta(title="Delete guard")] = False


class AzureLaunchOptions(Value, tag="azure", forbid_unknown_fields=True):
    """virtualMachines createOrUpdate properties only Azure has (documented names in the comments)."""

    # evictionPolicy of a Spot VM: Deallocate keeps its disks (they bill on), Delete removes it
    eviction_policy: Annotated[Literal["Deallocate", "Delete"], msgspec.Meta(title="On eviction")] = "Deallocate"
    # storageProfile.osDisk.managedDisk.storageAccountType
    os_disk_type: Annotated[Literal["Premium_LRS", "StandardSSD_LRS", "Standard_LRS"],
                            msgspec.Meta(title="OS disk")] = "Premium_LRS"
    # securityProfile.encryptionAtHost: the temporary disk and disk caches encrypted too
    encryption_at_host: Annotated[bool, msgspec.Meta(title="Host encryption")] = False


# Every provider's options, as a launch may carry them (a tagged union: each names its cloud).
LaunchOptions = AlibabaLaunchOptions | AzureLaunchOptions
