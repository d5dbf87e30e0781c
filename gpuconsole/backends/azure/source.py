"""The Azure backend: GPU virtual machines of one subscription, their prices and sizes, and the
actions on them, through the official SDKs (``azure-mgmt-compute``, ``azure-mgmt-resource``).

:class:`AzureCloud` is a :class:`~gpuconsole.backends.base.CloudBackend` and a
:class:`~gpuconsole.backends.base.Provisioner`, like the AWS and Alibaba Cloud ones. Answers are
read as ARM's own JSON (``as_dict()``), so :mod:`mapping` speaks ARM's words. Credentials come from
``DefaultAzureCredential`` (environment service principal, workload or managed identity, Azure
CLI login; ``AZURE_TOKEN_CREDENTIALS`` narrows it), and Azure RBAC decides every call with the
login's own credential. Clients are made on first use, from a worker thread.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gpuconsole.backends.azure.billing import vm_costs, vm_runs
from gpuconsole.backends.azure.launch import LaunchCalls
from gpuconsole.backends.azure.mapping import (
    MANAGED_TAG,
    SIZES,
    backend_error,
    gpu_model,
    instance_from,
    is_gpu_size,
    is_windows,
    vm_parts,
)
from gpuconsole.backends.azure.principal import assignments, principal
from gpuconsole.backends.azure.prices import PUBLIC_ENDPOINT, RetailPrices, pick
from gpuconsole.backends.azure.skus import capability, capability_text, restricted_zones
from gpuconsole.backends.azure.spot_events import preempted
from gpuconsole.backends.base import BackendError, Capability
from gpuconsole.backends.clouds import per_instance
from gpuconsole.model import CloudReading, CostLine, Instance, InstanceType, RegionPrice, SpotPrice

PUBLIC_ARM = "https://management.azure.com"
TIMEOUT_S = 30
RETRIES = 3
SKUS_CACHE_S = 3600.0  # resource SKUs and their restrictions change rarely
RETRY_FAILED_S = 300.0
DISK_API = "2024-03-02"  # Microsoft.Compute/disks
NIC_API = "2024-05-01"  # Microsoft.Network/networkInterfaces


def check_url(url: str, key: str, *, metadata: bool = False) -> str:
    """``url`` when it is a full https URL (http only for this machine, and with ``metadata`` for
    the VM's own metadata address); ValueError, one line, else."""
    parts = urlsplit(url)
    loopback = parts.hostname in ("localhost", "127.0.0.1", "::1") or (metadata and parts.hostname == "169.254.169.254")
    if parts.scheme not in ("https", "http") or not parts.netloc or (parts.scheme == "http" and not loopback):
        raise ValueError(f"{key}: not a full https URL: {url!r} (e.g. https://management.azure.com)")
    return url.rstrip("/")


@dataclass(frozen=True, slots=True)
class AzureSettings:
    """The ``[azure]`` table: the subscription, the resource groups watched (all when empty), the
    locations offered for launches, and the endpoints (a sovereign cloud, a test peer)."""

    subscription_id: str = ""
    resource_groups: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    arm_endpoint: str = PUBLIC_ARM
    prices_endpoint: str = PUBLIC_ENDPOINT
    subnet_id: str = ""  # the subnet a launch uses when it names none (a full resource id)
    admin_username: str = "azureuser"
    scheduled_events: str = ""  # the Scheduled Events URL, read when gpuconsole runs on an Azure VM
    lro_poll_s: float = 10.0  # how often a create's long-running operation is asked about
    launch_wait_s: float = 600.0  # how long a create is waited for (its allocation may fail late)
    credential: Any = None  # a TokenCredential given by code; None: DefaultAzureCredential

    def __post_init__(self) -> None:
        check_url(self.arm_endpoint, "arm_endpoint")
        check_url(self.prices_endpoint, "prices_endpoint")
        if self.scheduled_events:
            check_url(self.scheduled_events, "scheduled_events", metadata=True)


class AzureCloud(LaunchCalls):
    """One subscription's GPU VMs behind the console's cloud and provisioning interfaces."""

    name = "azure"
    min_interval = 15.0
    poll_timeout = 60.0
    capabilities = frozenset({
        Capability.LAUNCH, Capability.STOP, Capability.TERMINATE, Capability.SPOT, Capability.PRICES,
    })

    def __init__(self, settings: AzureSettings) -> None:
        self.settings = settings
        self.subscription = settings.subscription_id
        self.currency = "USD"
        self.prices = RetailPrices(settings.prices_endpoint)
        self._clients: dict[str, Any] = {}
        self._cred: Any = None
        self._lock = threading.Lock()
        self._seen_regions: tuple[str, ...] = ()
        self._seen_ids: dict[str, str] = {}  # lower-cased VM id → the id as ARM names it
        self._skus: dict[str, tuple[float, list[dict[str, Any]]]] = {}

    @property
    def regions(self) -> tuple[str, ...]:
        """The locations configured, else those the last poll found VMs in."""
        return self.settings.regions or self._seen_regions

    # ----------------------------------------------------------------- SDK
    def credential(self) -> Any:
        with self._lock:
            if self._cred is None:
                if self.settings.credential is not None:
                    self._cred = self.settings.credential
                else:
                    from azure.identity import DefaultAzureCredential

                    self._cred = DefaultAzureCredential()
            return self._cred

    def client(self, kind: str) -> Any:
        """The SDK client ``kind`` (compute, resource, authorization) for the subscription."""
        if not self.subscription:
            raise BackendError("no Azure subscription configured: set subscription_id in the [azure] table")
        credential = self.credential()
        with self._lock:
            found = self._clients.get(kind)
            if found is not None:
                return found
            base = self.settings.arm_endpoint
            parts = urlsplit(base)
            options = {"base_url": base, "credential_scopes": [f"{parts.scheme}://{parts.netloc}/.default"],
                       "retry_total": RETRIES, "connection_timeout": 10, "read_timeout": TIMEOUT_S}
            if kind == "compute":
                from azure.mgmt.compute import ComputeManagementClient as Client
            elif kind == "resource":
                from azure.mgmt.resource.resources import ResourceManagementClient as Client
            else:
                from azure.mgmt.authorization import AuthorizationManagementClient as Client
            found = self._clients[kind] = Client(credential, self.subscription, **options)
            return found

    def call(self, where: str, fn: Any) -> Any:
        """``fn()`` with the SDK's errors mapped (:func:`mapping.backend_error`), the message
        starting with ``where``."""
        try:
            return fn()
        except BackendError:
            raise
        except Exception as exc:  # azure-core raises its own families and plain ones; all are mapped
            raise backend_error(exc, where) from None

    # ----------------------------------------------------------------- CloudBackend
    def poll_instances(self) -> CloudReading:
        raws = self.call("Azure virtual machines", self._list_vms)
        notices = preempted(self.settings.scheduled_events) if self.settings.scheduled_events else {}
        instances = [self._instance(raw, notices.get(str(raw.get("name") or ""), "")) for raw in raws]
        self._seen_regions = tuple(dict.fromkeys(i.region for i in instances if i.region))
        self._seen_ids.update((i.instance_id.lower(), i.instance_id) for i in instances)
        return CloudReading(tuple(instances), taken_at=time.time())

    # ----------------------------------------------------------------- billed spend
    def resource_costs(self, start: float, end: float) -> tuple[tuple[str, str, float], ...]:
        """``(VM id, UTC day, US dollars)`` as the bill says (Cost Management's query); a VM the
        console has seen keeps the id as ARM names it (the bill lower-cases ids)."""
        rows = self.call("Azure Cost Management", lambda: vm_costs(lambda url, body: self._arm("POST", url, body),
                                                                   self.settings.arm_endpoint, self.subscription,
                                                                   start, end, self.currency))
        return tuple((self._seen_ids.get(rid.lower(), rid), day, amount) for rid, day, amount in rows)

    def instance_history(self, region: str, instance_id: str, since: float, until: float) -> tuple[tuple[float, bool], ...]:
        """When the VM's compute billed within ``[since, until]``, from the Activity Log (creates,
        starts, deallocations and deletes; a power-off bills on)."""
        return self.call("Azure Activity Log", lambda: vm_runs(lambda url: self._arm("GET", url), self.settings.arm_endpoint,
                                                               self.subscription, instance_id, since, until))

    def _arm(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        """One ARM request through the SDK's pipeline (its credential, retries and TLS); an error
        answer raised as the SDK raises its own."""
        from azure.core.exceptions import HttpResponseError
        from azure.core.rest import HttpRequest
        from azure.mgmt.core.exceptions import ARMErrorFormat

        response = self.client("compute").send_request(HttpRequest(method, url, json=body))
        if response.status_code >= 400:
            raise HttpResponseError(response=response, error_format=ARMErrorFormat)
        return response.json()

    def cost_and_usage(self, start: float, end: float, group_by_tag: str | None = None) -> tuple[CostLine, ...]:
        """What the bill says each VM cost between ``start`` and ``end`` (per VM; a tag grouping
        is the console's, from the VMs' tags)."""
        return per_instance(self.resource_costs(start, end))

    def _list_vms(self) -> list[dict[str, Any]]:
        """Every GPU VM with its instance view: subscription-wide, or in each group listed."""
        vms = self.client("compute").virtual_machines
        if self.settings.resource_groups:
            pages = [vms.list(group, expand="instanceView") for group in self.settings.resource_groups]
        else:
            pages = [vms.list_all(expand="instanceView")]
        out = []
        for page in pages:
            for vm in page:
                raw = vm.as_dict()
                if is_gpu_size(str(((raw.get("properties") or {}).get("hardwareProfile") or {}).get("vmSize") or "")):
                    out.append(raw)
        return out

    def _instance(self, raw: dict[str, Any], notice: str) -> Instance:
        props = raw.get("properties") or {}
        size = str((props.get("hardwareProfile") or {}).get("vmSize") or "")
        region = str(raw.get("location") or "")
        spot = props.get("priority") == "Spot"
        try:
            found = self.prices.price(region, size, spot=spot, windows=is_windows(raw))
        except BackendError:
            found = None  # unknown price: 0, and the catalog fills it where it can
        price, currency = found if found else (0.0, self.currency)
        inst = instance_from(raw, price, self._gpu_count(region, size), currency)
        if notice:
            from msgspec.structs import replace

            inst = replace(inst, state_reason=notice, spot_status="marked-for-termination")
        return inst

    def _gpu_count(self, region: str, size: str) -> int:
        try:
            for sku in self._sku_rows(region):
                if sku.get("name") == size:
                    return capability(sku, "GPUs")
        except BackendError:
            pass  # the published table below
        return SIZES[size][0] if size in SIZES else 0

    def _sku_rows(self, region: str) -> list[dict[str, Any]]:
        """The location's virtual-machine resource SKUs (cached an hour: they rarely change)."""
        found = self._skus.get(region)
        if found is not None and time.time() - found[0] < SKUS_CACHE_S:
            return found[1]
        try:
            rows = self.call(f"{region} resource SKUs", lambda: [
                s.as_dict() for s in self.client("compute").resource_skus.list(filter=f"location eq '{region}'")])
        except BackendError:
            self._skus[region] = (time.time() - SKUS_CACHE_S + RETRY_FAILED_S, [])  # not asked again for a while
            raise
        rows = [r for r in rows if r.get("resourceType") == "virtualMachines"]
        self._skus[region] = (time.time(), rows)
        return rows

    def caller_identity(self) -> dict[str, str]:
        """Whom the calls run as (the access token's claims; nothing is sent for it)."""
        return principal(self.credential(), self.settings.arm_endpoint)

    def role_assignments(self) -> tuple[dict[str, str], ...]:
        """The login's role assignments at the subscription (and above or below it)."""
        oid = self.caller_identity().get("object_id", "")
        return self.call("Azure role assignments", lambda: assignments(self.client("authorization"), self.subscription, oid))

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
        self.prices.close()

    # ----------------------------------------------------------------- the catalog
    def instance_types(self, region: str) -> tuple[InstanceType, ...]:
        """The location's GPU sizes (resource SKUs) with the published figures they leave out."""
        out = []
        for sku in self._sku_rows(region):
            size = str(sku.get("name") or "")
            if not is_gpu_size(size) or restricted_zones(sku, region) is None:
                continue
            known = SIZES.get(size)
            out.append(InstanceType(
                name=size, gpu_model=gpu_model(size), gpu_count=capability(sku, "GPUs") or (known[0] if known else 0),
                gpu_memory_gib=known[1] if known else 0, vcpus=capability(sku, "vCPUs"),
                memory_gib=int(float(capability_text(sku, "MemoryGB") or 0)), on_demand_price=0.0,
                cloud="azure", currency=self.currency))
        return tuple(out)

    def on_demand_prices(self, regions: tuple[str, ...]) -> tuple[RegionPrice, ...]:
        """Linux pay-as-you-go prices of the GPU sizes (Retail Prices API, one walk per region)."""
        out = []
        for region in regions:
            rows = self.call(f"{region} retail prices", lambda r=region: self.prices.region_items(r))
            by_size: dict[str, list[dict[str, Any]]] = {}
            for row in rows:
                by_size.setdefault(str(row.get("armSkuName") or ""), []).append(row)
            for size, items in sorted(by_size.items()):
                found = pick(items, spot=False, windows=False) if is_gpu_size(size) else None
                if found:
                    out.append(RegionPrice(size, region, found[0]))
        return tuple(out)

    def spot_prices(self, region: str, instance_types: tuple[str, ...], since: float) -> tuple[SpotPrice, ...]:
        """Azure publishes one current Spot price per size and region (no history): one point each,
        for every zone the size is offered in."""
        now = time.time()
        zones = self.offerings(region, instance_types)
        out = []
        for size in instance_types:
            found = self.call(f"{region} retail prices", lambda s=size: self.prices.price(region, s, spot=True))
            if found:
                out.extend(SpotPrice(size, zone, found[0], now) for zone in zones.get(size, ()) or ("",))
        return tuple(out)

    def offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Zones each size may be created in: the SKU's zones less those its restrictions name."""
        rows = {str(s.get("name")): s for s in self._sku_rows(region)}
        out: dict[str, tuple[str, ...]] = {}
        for size in instance_types:
            sku = rows.get(size)
            allowed = restricted_zones(sku, region) if sku is not None else None
            out[size] = tuple(f"{region}-{z}" for z in allowed) if allowed is not None else ()
        return out

    # ----------------------------------------------------------------- actions
    def start(self, region: str, instance_id: str) -> None:
        self._vm_action("start", instance_id)

    def stop(self, region: str, instance_id: str) -> None:
        """Deallocate: the only stop that ends the compute bill (a powered-off VM bills on). A VM
        already powered off but still allocated is deallocated too."""
        self._vm_action("deallocate", instance_id)

    def power_off(self, region: str, instance_id: str) -> None:
        """Power off only: the VM keeps its hardware and **still bills** its compute."""
        self._vm_action("power_off", instance_id)

    def reboot(self, region: str, instance_id: str) -> None:
        self._vm_action("restart", instance_id)

    def _vm_action(self, verb: str, instance_id: str) -> None:
        """Send one VM action (a long-running operation); the next poll shows its effect."""
        group, name = vm_parts(instance_id)
        vms = self.client("compute").virtual_machines
        self.call(name, lambda: getattr(vms, f"begin_{verb}")(group, name, polling=False))

    def terminate(self, region: str, instance_id: str) -> None:
        """Delete the VM; its OS disk, data disks and NICs go with it when gpuconsole made them:
        those launched with ``deleteOption: Delete`` Azure removes itself; others that carry
        gpuconsole's tag are deleted once the VM is gone."""
        group, name = vm_parts(instance_id)
        compute = self.client("compute")
        raw = self.call(name, lambda: compute.virtual_machines.get(group, name, expand="instanceView").as_dict())
        ours = [(rid, api) for rid, api, option in attached(raw) if option != "Delete" and self._is_ours(rid, api)]
        poller = self.call(name, lambda: compute.virtual_machines.begin_delete(
            group, name, polling_interval=self.settings.lro_poll_s, **({} if ours else {"polling": False})))
        if not ours:
            return
        self.call(name, lambda: poller.result(timeout=self.settings.launch_wait_s))
        resources = self.client("resource").resources
        for rid, api in ours:
            self.call(rid.rsplit("/", 1)[-1], lambda r=rid, a=api: resources.begin_delete_by_id(r, api_version=a, polling=False))

    def _is_ours(self, resource_id: str, api: str) -> bool:
        resources = self.client("resource").resources
        found = self.call(resource_id.rsplit("/", 1)[-1], lambda: resources.get_by_id(resource_id, api_version=api).as_dict())
        return (found.get("tags") or {}).get(MANAGED_TAG[0]) == MANAGED_TAG[1]


def attached(raw: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(resource id, its API version, deleteOption)`` of a VM's managed disks and NICs."""
    props = raw.get("properties") or {}
    storage = props.get("storageProfile") or {}
    out = []
    for disk in [storage.get("osDisk") or {}, *(storage.get("dataDisks") or [])]:
        disk_id = (disk.get("managedDisk") or {}).get("id")
        if disk_id:
            out.append((str(disk_id), DISK_API, str(disk.get("deleteOption") or "Detach")))
    for nic in (props.get("networkProfile") or {}).get("networkInterfaces") or ():
        if nic.get("id"):
            out.append((str(nic["id"]), NIC_API, str((nic.get("properties") or {}).get("deleteOption") or "Detach")))
    return out
