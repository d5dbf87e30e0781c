"""Launching Azure VMs: the create-or-update body of a launch, the check made before it (the way
EC2's dry run is used), and what the launch wizard lists (images, subnets, SSH keys).

A VM is created with a NIC of its own in an existing subnet and a managed OS disk, both marked
``deleteOption: Delete`` so they go with the VM; the tags carry gpuconsole's ``ManagedBy`` mark.
Managed disks are always encrypted at rest (platform keys); a disk encryption set id given as
the key encrypts them with the customer's key, and ``encryption_at_host`` encrypts the temporary
disk and caches too. Spot VMs carry their eviction policy and maximum price (-1: up to the
pay-as-you-go price, never evicted for price).
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from gpuconsole.backends.azure.mapping import MANAGED_TAG, SIZES, vm_parts
from gpuconsole.backends.azure.skus import capability, restricted_zones
from gpuconsole.backends.base import BackendError, CapacityError, DryRunFailed
from gpuconsole.model import (
    AzureLaunchOptions,
    Instance,
    InstanceState,
    KeyPair,
    LaunchSpec,
    MachineImage,
    Market,
    SecurityGroup,
    Subnet,
    Workload,
)

# The Data Science VM for Linux (Ubuntu 22.04 with the NVIDIA driver, CUDA and NCCL), as a URN.
DEFAULT_IMAGE = "microsoft-dsvm:ubuntu-hpc:2204:latest"
NETWORK_API = "2022-11-01"  # networkInterfaceConfigurations: the NIC Compute creates for the VM
SUBNET_ID = re.compile(r"^/subscriptions/[^/]+/resourceGroups/(?P<group>[^/]+)/providers/Microsoft\.Network/"
                       r"virtualNetworks/[^/]+/subnets/[^/]+$", re.IGNORECASE)
VNET_API = "2024-05-01"


def image_reference(image: str) -> dict[str, Any]:
    """``publisher:offer:sku:version`` (a Marketplace URN) or an image / gallery version resource id."""
    if image.startswith("/"):
        return {"id": image}
    parts = image.split(":")
    if len(parts) != 4 or not all(parts):
        raise DryRunFailed(f"image {image!r}: give a URN publisher:offer:sku:version or an image resource id")
    return dict(zip(("publisher", "offer", "sku", "version"), parts, strict=True))


def vm_body(spec: LaunchSpec, name: str, *, ssh_key: str, admin: str, managed_tag: tuple[str, str]) -> dict[str, Any]:
    """The ``virtualMachines`` createOrUpdate body of one VM of ``spec``."""
    opts = spec.options if isinstance(spec.options, AzureLaunchOptions) else AzureLaunchOptions()
    if not spec.subnet_id:
        raise DryRunFailed("no subnet: give the subnet's resource id (or subnet_id in the [azure] table)")
    disk: dict[str, Any] = {"storageAccountType": opts.os_disk_type}
    if spec.encrypted and spec.kms_key_id:
        disk["diskEncryptionSet"] = {"id": spec.kms_key_id}
    nic: dict[str, Any] = {"primary": True, "deleteOption": "Delete",
                           "ipConfigurations": [{"name": "ipconfig1",
                                                 "properties": {"primary": True, "subnet": {"id": spec.subnet_id}}}]}
    if spec.security_group_ids:
        nic["networkSecurityGroup"] = {"id": spec.security_group_ids[0]}
    linux: dict[str, Any] = {"disablePasswordAuthentication": True}
    if ssh_key:
        linux["ssh"] = {"publicKeys": [{"path": f"/home/{admin}/.ssh/authorized_keys", "keyData": ssh_key}]}
    props: dict[str, Any] = {
        "hardwareProfile": {"vmSize": spec.instance_type},
        "storageProfile": {"imageReference": image_reference(spec.image_id),
                           "osDisk": {"createOption": "FromImage", "diskSizeGB": spec.root_volume_gib,
                                      "deleteOption": "Delete", "managedDisk": disk}},
        "osProfile": {"computerName": name[:64], "adminUsername": admin, "linuxConfiguration": linux},
        "networkProfile": {"networkApiVersion": NETWORK_API, "networkInterfaceConfigurations": [
            {"name": f"{name}-nic", "properties": nic}]},
        "securityProfile": {"encryptionAtHost": opts.encryption_at_host},
    }
    if spec.market is Market.SPOT:
        props.update(priority="Spot", evictionPolicy=opts.eviction_policy,
                     billingProfile={"maxPrice": spec.max_spot_price if spec.max_spot_price is not None else -1})
    body: dict[str, Any] = {"location": spec.region, "tags": {**dict(spec.tags), managed_tag[0]: managed_tag[1]},
                            "properties": props}
    zone = spec.availability_zone.removeprefix(f"{spec.region}-") if spec.availability_zone else ""
    if zone:
        body["zones"] = [zone]
    return body


def vm_names(spec: LaunchSpec) -> list[str]:
    """The names of the ``count`` VMs: the Name tag (numbered when several), else ``gpu-<random>``."""
    base = re.sub(r"[^A-Za-z0-9-]", "-", spec.tag("Name") or f"gpu-{uuid.uuid4().hex[:8]}")[:58].strip("-") or "gpu"
    return [base] if spec.count == 1 else [f"{base}-{n + 1}" for n in range(spec.count)]


class LaunchCalls:
    """The :class:`~gpuconsole.backends.base.Provisioner` calls of :class:`AzureCloud` that
    launch, and those the launch wizard lists with (mixed in: they use its clients)."""

    settings: Any
    subscription: str
    currency: str

    def client(self, kind: str) -> Any: ...
    def call(self, where: str, fn: Any) -> Any: ...
    def _sku_rows(self, region: str) -> list[dict[str, Any]]: ...

    def default_image(self, region: str, workload: Workload) -> MachineImage:
        return MachineImage(DEFAULT_IMAGE, "Data Science VM (Ubuntu 22.04, NVIDIA driver and CUDA)", "Azure Marketplace")

    def _group(self, spec: LaunchSpec) -> str:
        if self.settings.resource_groups:
            return str(self.settings.resource_groups[0])
        match = SUBNET_ID.match(spec.subnet_id or self.settings.subnet_id)
        if match:
            return match["group"]
        raise DryRunFailed("no resource group: list one in resource_groups of the [azure] table")

    def _filled(self, spec: LaunchSpec) -> LaunchSpec:
        from msgspec.structs import replace

        return replace(spec, subnet_id=spec.subnet_id or self.settings.subnet_id)

    def validate_create(self, spec: LaunchSpec) -> None:
        """What Azure would refuse, asked before the create: the size offered in the location and
        zone to this subscription (resource SKUs' restrictions), and the family's vCPU quota
        (compute usages; Spot VMs count against the regional Spot quota)."""
        sku = next((s for s in self._sku_rows(spec.region) if s.get("name") == spec.instance_type), None)
        if sku is None:
            raise DryRunFailed(f"SkuNotAvailable: {spec.instance_type} is not offered in {spec.region}")
        zones = restricted_zones(sku, spec.region)
        zone = spec.availability_zone.removeprefix(f"{spec.region}-") if spec.availability_zone else ""
        if zones is None or (zone and zone not in zones):
            where = f"zone {zone} of {spec.region}" if zones is not None else spec.region
            raise CapacityError(f"SkuNotAvailable: {spec.instance_type} is restricted for this subscription in {where}")
        vcpus = (capability(sku, "vCPUs") or (SIZES[spec.instance_type][2] if spec.instance_type in SIZES else 0)) * spec.count
        family = "lowPriorityCores" if spec.market is Market.SPOT else str(sku.get("family") or "")
        compute = self.client("compute")
        usages = self.call(f"{spec.region} usages", lambda: [u.as_dict() for u in compute.usage.list(spec.region)])
        for usage in usages:
            if (usage.get("name") or {}).get("value") == family:
                current, limit = int(usage.get("currentValue") or 0), int(usage.get("limit") or 0)
                if current + vcpus > limit:
                    raise CapacityError(f"QuotaExceeded: {family} in {spec.region}: {current} of {limit} vCPUs used, "
                                        f"{vcpus} more asked")
        self._group(spec)
        vm_body(spec, vm_names(spec)[0], ssh_key="", admin=self.settings.admin_username, managed_tag=("", ""))

    def launch(self, spec: LaunchSpec, *, dry_run: bool = False) -> tuple[Instance, ...]:
        """Check (:meth:`validate_create`), then create each VM as a long-running operation and wait
        for it: Azure may fail an allocation after the create was accepted."""
        spec = self._filled(spec)
        self.validate_create(spec)
        if dry_run:
            return ()
        group = self._group(spec)
        ssh_key = self._ssh_key(group, spec.key_name) if spec.key_name else ""
        admin = self.settings.admin_username
        compute = self.client("compute")
        made = []
        for name in vm_names(spec):
            body = vm_body(spec, name, ssh_key=ssh_key, admin=admin, managed_tag=MANAGED_TAG)
            poller = self.call(name, lambda n=name, b=body: compute.virtual_machines.begin_create_or_update(
                group, n, b, polling_interval=self.settings.lro_poll_s))
            result = self.call(name, lambda p=poller: p.result(timeout=self.settings.launch_wait_s))
            own = f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{name}"
            vm_id = str((result.as_dict() if result is not None else {}).get("id") or own)
            vm_parts(vm_id)
            made.append(Instance(instance_id=vm_id, instance_type=spec.instance_type, region=spec.region,
                                 availability_zone=spec.availability_zone, market=spec.market, state=InstanceState.PENDING,
                                 launch_time=time.time(), price_per_hour=0.0, name=name,
                                 tags=(*spec.tags, MANAGED_TAG), cloud="azure", currency=self.currency))
        return tuple(made)

    def _ssh_key(self, group: str, name: str) -> str:
        """The public key of an SSH key resource (``Microsoft.Compute/sshPublicKeys``), or the key
        itself when ``name`` is one (``ssh-ed25519 AAAA…``)."""
        if name.startswith(("ssh-", "ecdsa-")):
            return name
        compute = self.client("compute")
        found = self.call(name, lambda: compute.ssh_public_keys.get(group, name).as_dict())
        key = str((found.get("properties") or {}).get("publicKey") or "")
        if not key:
            raise BackendError(f"SSH key {name} in {group} has no public key")
        return key

    def key_pairs(self, region: str) -> tuple[KeyPair, ...]:
        """The subscription's SSH public key resources in ``region``."""
        compute = self.client("compute")
        rows = self.call("SSH keys", lambda: [k.as_dict() for k in compute.ssh_public_keys.list_by_subscription()])
        return tuple(KeyPair(str(r.get("name") or "")) for r in rows if str(r.get("location") or "").lower() == region.lower())

    def subnets(self, region: str) -> tuple[Subnet, ...]:
        """The subnets of the virtual networks in ``region`` (read as generic resources)."""
        resources = self.client("resource").resources
        nets = self.call("virtual networks", lambda: [r.as_dict() for r in resources.list(
            filter="resourceType eq 'Microsoft.Network/virtualNetworks'")])
        out = []
        for net in nets:
            if str(net.get("location") or "").lower() != region.lower():
                continue
            full = self.call(str(net.get("name")), lambda n=net: resources.get_by_id(n["id"], api_version=VNET_API).as_dict())
            for sub in (full.get("properties") or {}).get("subnets") or ():
                props = sub.get("properties") or {}
                out.append(Subnet(subnet_id=str(sub.get("id") or ""), vpc_id=str(net.get("id") or ""), availability_zone="",
                                  cidr=str(props.get("addressPrefix") or ""), name=str(sub.get("name") or "")))
        return tuple(out)

    def security_groups(self, region: str) -> tuple[SecurityGroup, ...]:
        """The network security groups in ``region`` (generic resources)."""
        resources = self.client("resource").resources
        rows = self.call("network security groups", lambda: [r.as_dict() for r in resources.list(
            filter="resourceType eq 'Microsoft.Network/networkSecurityGroups'")])
        return tuple(SecurityGroup(group_id=str(r.get("id") or ""), name=str(r.get("name") or ""), vpc_id="")
                     for r in rows if str(r.get("location") or "").lower() == region.lower())
