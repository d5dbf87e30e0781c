"""A local Azure peer over HTTPS: Azure Resource Manager's REST shapes for virtual machines, resource
SKUs, compute usages, generic resources (disks, network interfaces), role assignments and role
definitions, and the public Retail Prices API, for the official SDKs to talk to.

The shapes follow the Azure REST API specifications' example responses (Microsoft.Compute
``virtualMachines`` list / get with ``$expand=instanceView`` / createOrUpdate / start /
deallocate / powerOff / restart / delete, ``skus``, ``locations/{l}/usages``;
Microsoft.Authorization ``roleAssignments`` and ``roleDefinitions``) and the Retail Prices API's
documented answer (``Items``, ``NextPageLink``, ``$filter`` on ``armSkuName``, ``armRegionName``,
``priceType``). Long-running operations answer 201/202 with an ``Azure-AsyncOperation`` header
that is polled until ``Succeeded``. Certificates come from a throwaway ``trustme`` CA; clients
trust it through ``REQUESTS_CA_BUNDLE`` / ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import base64
import os
import json
import re
import ssl
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from urllib.parse import parse_qs, quote, urlencode, urlsplit

SUBSCRIPTION = "8f3c2a1e-4b5d-4c6e-9f70-1a2b3c4d5e6f"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
PRINCIPAL_OID = "5e6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
# Size: (GPUs, vCPUs, memory GB, family as resource SKUs and usages name it)
SIZES = {
    "Standard_NC4as_T4_v3": (1, 4, 28, "standardNCASv3_T4Family"),
    "Standard_NC24ads_A100_v4": (1, 24, 220, "StandardNCADSA100v4Family"),
    "Standard_ND96isr_H100_v5": (8, 96, 1900, "standardNDSH100v5Family"),
    "Standard_D4s_v5": (0, 4, 16, "standardDSv5Family"),
}
# Retail prices per hour in USD: (Linux, Windows, Spot Linux, Spot Windows, Low Priority Linux)
PRICES = {
    "Standard_NC4as_T4_v3": (0.526, 0.71, 0.0789, 0.2633, 0.1052),
    "Standard_NC24ads_A100_v4": (3.673, 4.777, 0.551, 1.655, 0.7346),
    "Standard_ND96isr_H100_v5": (98.32, 102.74, 14.748, 19.168, 19.664),
    "Standard_D4s_v5": (0.192, 0.376, 0.0288, 0.2128, 0.0384),
}
API_RE = re.compile(r"^/subscriptions/(?P<sub>[^/]+)(?:/resourceGroups/(?P<rg>[^/]+))?/providers/(?P<rest>.+)$", re.I)


def fake_jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWT carrying ``claims`` (what ``az account get-access-token`` hands out looks so)."""
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.sig"


TOKEN_CLAIMS = {"oid": PRINCIPAL_OID, "tid": TENANT, "upn": "ana@contoso.example", "name": "Ana",
                "aud": "https://management.azure.com"}


def write_az(bin_dir: Path, claims: dict[str, Any] | None = None) -> Path:
    """A stand-in ``az`` on PATH answering ``az account get-access-token --output json …`` as the
    Azure CLI does (``accessToken``, ``expiresOn``, ``expires_on``, ``subscription``, ``tenant``)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    token = fake_jwt(claims or TOKEN_CLAIMS)
    answer = {"accessToken": token, "expiresOn": "2099-01-01 00:00:00.000000", "expires_on": 4070908800,
              "subscription": SUBSCRIPTION, "tenant": TENANT, "tokenType": "Bearer"}
    script = bin_dir / "az"
    script.write_text("#!/bin/sh\n"
                      'case "$*" in *"account get-access-token"*) ;; *) echo "unsupported: $*" >&2; exit 2;; esac\n'
                      f"cat <<'EOF'\n{json.dumps(answer)}\nEOF\n", encoding="utf-8")
    script.chmod(0o755)
    return script


@dataclass
class AzureWorld:
    """What the peer holds: VMs by lower-cased id, and the switches tests turn."""

    subscription: str = SUBSCRIPTION
    vms: dict[str, dict[str, Any]] = field(default_factory=dict)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # disks and NICs by lower-cased id
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # (method, path, query)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # PUT bodies, in order
    operations: dict[str, int] = field(default_factory=dict)  # async operation id -> polls left
    denied: set[str] = field(default_factory=set)  # actions answered 403 AuthorizationFailed ("deallocate", …)
    restricted: dict[str, tuple[str, ...]] = field(default_factory=dict)  # size -> zones not offered
    location_restricted: set[str] = field(default_factory=set)  # sizes not offered in the location at all
    quota: dict[str, tuple[int, int]] = field(default_factory=dict)  # usages family -> (current, limit)
    page_size: int = 50
    price_page: int = 3  # the Retail Prices API's page size (100 in Azure; small to make pages)
    assignments: list[dict[str, Any]] = field(default_factory=list)
    tokens_seen: set[str] = field(default_factory=set)
    failing_zones: set[str] = field(default_factory=set)  # a create there fails in its operation (ZonalAllocationFailed)
    failed_operations: dict[str, str] = field(default_factory=dict)  # operation id -> the VM id it removes
    prices_down: bool = False  # the Retail Prices API answers 503
    events: list[dict[str, Any]] = field(default_factory=list)  # Scheduled Events (EventType Preempt, …)
    # Cost Management: (resource id, "2026-12-01", cost, currency) the bill holds, any resource type
    bill: list[tuple[str, str, float, str]] = field(default_factory=list)
    bill_page: int = 2  # rows a query answer holds before its nextLink
    queries: list[dict[str, Any]] = field(default_factory=list)  # QueryDefinition bodies, in order
    activity: list[dict[str, Any]] = field(default_factory=list)  # Activity Log events (see log_event)
    activity_page: int = 2

    def log_event(self, vm_id: str, verb: str, at: str, status: str = "Succeeded", sub_status: str = "OK") -> None:
        """An Activity Log event of an operation on the VM, as Azure Monitor records it."""
        self.activity.append({
            "authorization": {"action": f"Microsoft.Compute/virtualMachines/{verb}", "scope": vm_id},
            "caller": "ana@contoso.example", "correlationId": str(uuid.uuid4()), "eventDataId": str(uuid.uuid4()),
            "eventName": {"value": "EndRequest" if status != "Started" else "BeginRequest"},
            "id": f"{vm_id}/events/{uuid.uuid4()}/ticks/1", "level": "Informational",
            "operationName": {"value": f"Microsoft.Compute/virtualMachines/{verb}",
                              "localizedValue": f"Microsoft.Compute/virtualMachines/{verb}"},
            "resourceId": vm_id, "status": {"value": status, "localizedValue": status},
            "subStatus": {"value": sub_status, "localizedValue": sub_status},
            "eventTimestamp": at, "submissionTimestamp": at, "subscriptionId": self.subscription})

    def preempt(self, name: str) -> None:
        """A Spot eviction notice for the VM ``name``, as Scheduled Events documents it."""
        self.events.append({"EventId": str(uuid.uuid4()), "EventStatus": "Scheduled", "EventType": "Preempt",
                            "ResourceType": "VirtualMachine", "Resources": [name], "NotBefore": "Fri, 04 Dec 2026 08:20:30 GMT",
                            "Description": "", "EventSource": "Platform", "DurationInSeconds": -1})

    def add(self, size: str, *, name: str = "", group: str = "gpu-rg", location: str = "eastus", zone: str = "1",
            power: str = "running", spot: bool = False, eviction: str = "Deallocate", max_price: float = -1,
            tags: dict[str, str] | None = None, windows: bool = False, managed: bool = False) -> str:
        """A VM in ``power`` state (starting, running, stopping, stopped, deallocating, deallocated)."""
        name = name or f"vm-{len(self.vms) + 1}"
        vm_id = f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{name}"
        disk = f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/Microsoft.Compute/disks/{name}_OsDisk_1"
        nic = f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/Microsoft.Network/networkInterfaces/{name}-nic"
        mine = {"ManagedBy": "gpuconsole"} if managed else {}
        for rid in (disk, nic):
            self.resources[rid.lower()] = {"id": rid, "name": rid.rsplit("/", 1)[1], "location": location, "tags": dict(mine)}
        props: dict[str, Any] = {
            "vmId": str(uuid.uuid4()), "hardwareProfile": {"vmSize": size}, "provisioningState": "Succeeded",
            "timeCreated": "2026-12-01T08:00:00+00:00",
            "storageProfile": {"imageReference": {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204",
                                                  "version": "latest"},
                               "osDisk": {"osType": "Windows" if windows else "Linux", "name": f"{name}_OsDisk_1",
                                          "createOption": "FromImage", "deleteOption": "Detach",
                                          "managedDisk": {"id": disk, "storageAccountType": "Premium_LRS"}},
                               "dataDisks": []},
            "networkProfile": {"networkInterfaces": [{"id": nic, "properties": {"primary": True, "deleteOption": "Detach"}}]},
        }
        if spot:
            props.update(priority="Spot", evictionPolicy=eviction, billingProfile={"maxPrice": max_price})
        self.vms[vm_id.lower()] = {"id": vm_id, "name": name, "type": "Microsoft.Compute/virtualMachines",
                                   "location": location, "zones": [zone] if zone else [], "tags": dict(tags or {}),
                                   "properties": props, "_power": power}
        return vm_id

    def network(self, group: str = "net-rg", location: str = "eastus") -> tuple[str, str]:
        """A virtual network with two subnets and a network security group: ``(subnet id, NSG id)``."""
        base = f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/Microsoft.Network"
        vnet = f"{base}/virtualNetworks/gpu"
        subnets = [{"id": f"{vnet}/subnets/{name}", "name": name, "type": "Microsoft.Network/virtualNetworks/subnets",
                    "properties": {"addressPrefix": prefix, "provisioningState": "Succeeded"}}
                   for name, prefix in (("train", "10.0.0.0/24"), ("serve", "10.0.1.0/24"))]
        nsg = f"{base}/networkSecurityGroups/train"
        self.resources[vnet.lower()] = {"id": vnet, "name": "gpu", "type": "Microsoft.Network/virtualNetworks",
                                        "location": location, "tags": {},
                                        "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}, "subnets": subnets}}
        self.resources[nsg.lower()] = {"id": nsg, "name": "train", "type": "Microsoft.Network/networkSecurityGroups",
                                       "location": location, "tags": {}, "properties": {"securityRules": []}}
        return subnets[0]["id"], nsg

    def power(self, vm_id: str) -> str:
        return str(self.vms[vm_id.lower()]["_power"])


def instance_view(vm: dict[str, Any]) -> dict[str, Any]:
    power = vm["_power"]
    display = {"running": "VM running", "stopped": "VM stopped", "deallocated": "VM deallocated",
               "starting": "VM starting", "stopping": "VM stopping", "deallocating": "VM deallocating"}
    statuses = [{"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded",
                 "time": "2026-12-01T08:01:00+00:00"},
                {"code": f"PowerState/{power}", "level": "Info", "displayStatus": display.get(power, power)}]
    return {"computerName": vm["name"], "osName": "ubuntu", "statuses": statuses}


def public(vm: dict[str, Any], expand: bool) -> dict[str, Any]:
    out = {k: v for k, v in vm.items() if not k.startswith("_")}
    out["properties"] = dict(vm["properties"])
    if expand:
        out["properties"]["instanceView"] = instance_view(vm)
    return out


def sku_rows(world: AzureWorld, location: str) -> list[dict[str, Any]]:
    rows = []
    for size, (gpus, vcpus, memory, family) in SIZES.items():
        caps = [{"name": "vCPUs", "value": str(vcpus)}, {"name": "MemoryGB", "value": str(memory)},
                {"name": "LowPriorityCapable", "value": "True"}]
        if gpus:
            caps.append({"name": "GPUs", "value": str(gpus)})
        restrictions = []
        if size in world.location_restricted:
            restrictions.append({"type": "Location", "values": [location], "reasonCode": "NotAvailableForSubscription",
                                 "restrictionInfo": {"locations": [location]}})
        if world.restricted.get(size):
            restrictions.append({"type": "Zone", "values": [location], "reasonCode": "NotAvailableForSubscription",
                                 "restrictionInfo": {"locations": [location], "zones": list(world.restricted[size])}})
        rows.append({"resourceType": "virtualMachines", "name": size, "tier": "Standard", "size": size.split("_", 1)[1],
                     "family": family, "locations": [location],
                     "locationInfo": [{"location": location, "zones": ["1", "2", "3"]}],
                     "capabilities": caps, "restrictions": restrictions})
    rows.append({"resourceType": "disks", "name": "Premium_LRS", "tier": "Premium", "locations": [location],
                 "capabilities": [], "restrictions": []})
    return rows


def price_items(filters: dict[str, str]) -> list[dict[str, Any]]:
    """Retail price rows as the API answers them: Linux and Windows, Spot and Low Priority meters."""
    items = []
    for size, (linux, windows, spot, spot_win, low) in PRICES.items():
        short = size.removeprefix("Standard_").replace("_", " ")
        series = f"Virtual Machines {short.split(' ', 1)[-1].replace(' ', '_')} Series"
        for sku_name, product, price in ((short, series, linux), (short, f"{series} Windows", windows),
                                         (f"{short} Spot", series, spot), (f"{short} Spot", f"{series} Windows", spot_win),
                                         (f"{short} Low Priority", series, low)):
            for region in ("eastus", "westeurope"):
                items.append({"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
                              "armRegionName": region, "location": "US East" if region == "eastus" else "EU West",
                              "effectiveStartDate": "2024-03-01T00:00:00Z", "meterId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{size}{sku_name}{product}{region}")),
                              "meterName": sku_name, "productId": "DZH318Z0BQ4L", "skuId": "DZH318Z0BQ4L/00TG",
                              "productName": product, "skuName": sku_name, "serviceName": "Virtual Machines",
                              "serviceId": "DZH313Z7MMC8", "serviceFamily": "Compute", "unitOfMeasure": "1 Hour",
                              "type": "Consumption", "isPrimaryMeterRegion": True, "armSkuName": size})
        items.append({**items[-1], "type": "Reservation", "reservationTerm": "1 Year", "retailPrice": linux * 5000,
                      "meterName": short, "skuName": short, "productName": series})
    def keep(item: dict[str, Any]) -> bool:
        return all(str(item.get("type" if k == "priceType" else k, "")).lower() == v.lower() for k, v in filters.items())
    return [i for i in items if keep(i)]


class AzurePeer:
    """The peer on ``https://127.0.0.1:PORT``; ``ca_file`` is the CA clients must trust."""

    def __init__(self, tmp: Path) -> None:
        import trustme

        self.world = AzureWorld()
        ca = trustme.CA()
        self.ca_file = tmp / "azure-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def do_GET(self) -> None:
                peer.handle(self, "GET")

            def do_PUT(self) -> None:
                peer.handle(self, "PUT")

            def do_POST(self) -> None:
                peer.handle(self, "POST")

            def do_DELETE(self) -> None:
                peer.handle(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> AzurePeer:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def actions(self) -> list[str]:
        """``METHOD last-path-segment`` of each ARM call, in order."""
        return [f"{m} {p.rstrip('/').rsplit('/', 1)[-1]}" for m, p, _q in self.world.calls]

    # ------------------------------------------------------------------ dispatch
    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(h.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length) or b"{}") if length else {}
        if parts.path.startswith("/api/retail/prices"):
            return self.prices(h, query)
        if parts.path == "/metadata/scheduledevents":  # Scheduled Events, as a VM's metadata service answers
            if h.headers.get("Metadata") != "true":
                return self.send(h, 400, {"error": "Bad request. Required metadata header not specified"})
            return self.send(h, 200, {"DocumentIncarnation": len(self.world.events), "Events": self.world.events})
        auth = h.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return self.send(h, 401, {"error": {"code": "AuthenticationFailed", "message": "Authentication failed."}})
        self.world.tokens_seen.add(auth[7:])
        self.world.calls.append((method, parts.path, query))
        if parts.path == f"/subscriptions/{self.world.subscription}/resources":  # generic resources, by type
            wanted = re.search(r"resourceType eq '([^']+)'", query.get("$filter", ""))
            rows = [{k: r[k] for k in ("id", "name", "type", "location")} for r in self.world.resources.values()
                    if "type" in r and (wanted is None or r["type"].lower() == wanted[1].lower())]
            return self.send(h, 200, {"value": rows})
        match = API_RE.match(parts.path)
        if not match or match["sub"] != self.world.subscription:
            return self.send(h, 404, {"error": {"code": "SubscriptionNotFound", "message": f"{parts.path} not found"}})
        rest, group = match["rest"], match["rg"]
        if rest.startswith("Microsoft.Compute/locations/") and "/operations/" in rest:
            return self.operation(h, rest.rsplit("/", 1)[1])
        if rest.startswith("Microsoft.Compute/locations/") and rest.endswith("/usages"):
            return self.usages(h, rest.split("/")[2])
        if rest == "Microsoft.Compute/skus":
            location = re.search(r"location eq '([^']+)'", query.get("$filter", ""))
            return self.send(h, 200, {"value": sku_rows(self.world, location[1] if location else "eastus")})
        if rest.startswith("Microsoft.Authorization/"):
            return self.authorization(h, rest, query)
        if rest.lower() == "microsoft.costmanagement/query" and method == "POST":
            return self.cost_query(h, body, query)
        if rest.lower() == "microsoft.insights/eventtypes/management/values" and method == "GET":
            return self.activity_log(h, query)
        if rest.startswith("Microsoft.Compute/sshPublicKeys"):
            return self.ssh_keys(h, rest, group)
        if rest.startswith("Microsoft.Compute/virtualMachines"):
            return self.vm(h, method, parts.path, group, rest, query, body)
        return self.generic(h, method, parts.path)

    def send(self, h: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("x-ms-request-id", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def lro(self, h: BaseHTTPRequestHandler, status: int, location: str, body: Any = None, *, fails: str = "") -> None:
        op = str(uuid.uuid4())
        if fails:
            self.world.failed_operations[op] = fails
        self.world.operations[op] = 1  # InProgress once, then Succeeded
        url = f"{self.url}/subscriptions/{self.world.subscription}/providers/Microsoft.Compute/locations/{location}/operations/{op}?api-version=2024-07-01"
        self.send(h, status, body, {"Azure-AsyncOperation": url, **({"Location": url} if status == 202 else {})})

    def operation(self, h: BaseHTTPRequestHandler, op: str) -> None:
        left = self.world.operations.get(op)
        if left is None:
            return self.send(h, 404, {"error": {"code": "NotFound", "message": "no such operation"}})
        self.world.operations[op] = left - 1
        if left <= 0 and op in self.world.failed_operations:  # the allocation failed after the create was accepted
            self.world.vms.pop(self.world.failed_operations[op].lower(), None)
            return self.send(h, 200, {"name": op, "status": "Failed", "startTime": "2026-12-01T08:00:00+00:00", "error": {
                "code": "ZonalAllocationFailed", "message": "Allocation failed. We do not have sufficient capacity for the "
                "requested VM size in this zone."}})
        status = "InProgress" if left > 0 else "Succeeded"
        self.send(h, 200, {"name": op, "status": status, "startTime": "2026-12-01T08:00:00+00:00",
                           **({"endTime": "2026-12-01T08:00:05+00:00"} if status == "Succeeded" else {})})

    def denied(self, h: BaseHTTPRequestHandler, action: str, scope: str) -> None:
        self.send(h, 403, {"error": {"code": "AuthorizationFailed", "message": (
            f"The client 'ana@contoso.example' with object id '{PRINCIPAL_OID}' does not have authorization to "
            f"perform action '{action}' over scope '{scope}' or the scope is invalid. If access was recently "
            "granted, please refresh your credentials.")}})

    # ------------------------------------------------------------------ virtual machines
    def vm(self, h: BaseHTTPRequestHandler, method: str, path: str, group: str | None, rest: str,
           query: dict[str, str], body: dict[str, Any]) -> None:
        segments = rest.split("/")[2:]  # after Microsoft.Compute/virtualMachines
        if not segments:
            return self.vm_list(h, path, group, query)
        vm_id = path.split("/virtualMachines/")[0] + "/virtualMachines/" + segments[0]
        vm = self.world.vms.get(vm_id.lower())
        verb = segments[1] if len(segments) > 1 else ""
        action = f"Microsoft.Compute/virtualMachines/{verb + '/action' if verb else ('write' if method == 'PUT' else 'delete' if method == 'DELETE' else 'read')}"
        if (verb or method.lower()) in self.world.denied:
            return self.denied(h, action, vm_id)
        if method == "PUT":
            return self.create(h, vm_id, segments[0], group or "", body)
        if vm is None:
            return self.send(h, 404, {"error": {"code": "ResourceNotFound", "message": (
                f"The Resource 'Microsoft.Compute/virtualMachines/{segments[0]}' under resource group '{group}' was not found.")}})
        if method == "GET" and verb == "instanceView":
            return self.send(h, 200, instance_view(vm))
        if method == "GET":
            return self.send(h, 200, public(vm, query.get("$expand") == "instanceView"))
        if method == "DELETE":
            del self.world.vms[vm_id.lower()]
            return self.lro(h, 202, vm["location"])
        after = {"start": "running", "deallocate": "deallocated", "powerOff": "stopped", "restart": "running"}.get(verb)
        if method != "POST" or after is None:
            return self.send(h, 400, {"error": {"code": "InvalidRequest", "message": f"{method} {verb}"}})
        if verb == "restart" and vm["_power"] != "running":
            return self.send(h, 409, {"error": {"code": "OperationNotAllowed", "message": "Cannot restart a VM that is not running."}})
        vm["_power"] = after
        self.lro(h, 202, vm["location"])

    def vm_list(self, h: BaseHTTPRequestHandler, path: str, group: str | None, query: dict[str, str]) -> None:
        if "list" in self.world.denied:
            return self.denied(h, "Microsoft.Compute/virtualMachines/read", path.split("/providers/")[0])
        rows = [vm for vm in self.world.vms.values()
                if group is None or vm["id"].split("/")[4].lower() == group.lower()]
        expand = query.get("$expand") == "instanceView" or query.get("statusOnly") == "true"
        start = int(query.get("$skiptoken") or 0)
        page = rows[start:start + self.world.page_size]
        answer: dict[str, Any] = {"value": [public(vm, expand) for vm in page]}
        if start + self.world.page_size < len(rows):
            more = {k: v for k, v in query.items() if k != "$skiptoken"}
            answer["nextLink"] = f"{self.url}{path}?{urlencode({**more, '$skiptoken': start + self.world.page_size})}"
        self.send(h, 200, answer)

    def create(self, h: BaseHTTPRequestHandler, vm_id: str, name: str, group: str, body: dict[str, Any]) -> None:
        self.world.bodies.append(body)
        props = body.get("properties") or {}
        size = (props.get("hardwareProfile") or {}).get("vmSize", "")
        if size not in SIZES:
            return self.send(h, 400, {"error": {"code": "InvalidParameter", "target": "vmSize",
                                                "message": f"The value {size} provided for the VM size is not valid."}})
        stored = {"id": vm_id, "name": name, "type": "Microsoft.Compute/virtualMachines", "location": body.get("location", ""),
                  "zones": body.get("zones") or [], "tags": body.get("tags") or {}, "_power": "running",
                  "properties": {**props, "provisioningState": "Creating", "vmId": str(uuid.uuid4()),
                                 "timeCreated": "2026-12-01T09:00:00+00:00"}}
        self.world.vms[vm_id.lower()] = stored
        fails = vm_id if set(stored["zones"]) & self.world.failing_zones else ""
        self.lro(h, 201, stored["location"], public(stored, False), fails=fails)
        stored["properties"]["provisioningState"] = "Succeeded"

    def ssh_keys(self, h: BaseHTTPRequestHandler, rest: str, group: str | None) -> None:
        keys = [{"id": f"/subscriptions/{self.world.subscription}/resourceGroups/gpu-rg/providers/Microsoft.Compute/"
                       f"sshPublicKeys/{name}", "name": name, "location": "eastus", "type": "Microsoft.Compute/sshPublicKeys",
                 "properties": {"publicKey": f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{name} {name}"}}
                for name in ("platform-ops", "ci-runner")]
        name = rest.split("/")[2] if rest.count("/") >= 2 else ""
        if not name:
            return self.send(h, 200, {"value": keys})
        found = [k for k in keys if k["name"] == name and group == "gpu-rg"]
        if not found:
            return self.send(h, 404, {"error": {"code": "ResourceNotFound", "message": f"sshPublicKeys/{name} not found"}})
        self.send(h, 200, found[0])

    def usages(self, h: BaseHTTPRequestHandler, location: str) -> None:
        rows = [{"unit": "Count", "currentValue": cur, "limit": limit,
                 "name": {"value": family, "localizedValue": f"Standard {family} vCPUs"}}
                for family, (cur, limit) in self.world.quota.items()]
        rows.append({"unit": "Count", "currentValue": 10, "limit": 350,
                     "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"}})
        self.send(h, 200, {"value": rows})

    def generic(self, h: BaseHTTPRequestHandler, method: str, path: str) -> None:
        found = self.world.resources.get(path.lower())
        if found is None:
            return self.send(h, 404, {"error": {"code": "ResourceNotFound", "message": f"{path} not found"}})
        if method == "GET":
            return self.send(h, 200, found)
        if method == "DELETE":
            del self.world.resources[path.lower()]
            return self.lro(h, 202, str(found.get("location", "eastus")))
        self.send(h, 405, {"error": {"code": "MethodNotAllowed", "message": method}})

    # ------------------------------------------------------------------ role assignments
    def authorization(self, h: BaseHTTPRequestHandler, rest: str, query: dict[str, str]) -> None:
        scope = f"/subscriptions/{self.world.subscription}"
        if rest == "Microsoft.Authorization/roleAssignments":
            rows = self.world.assignments or [
                {"role": "Virtual Machine Contributor", "guid": "9980e02c-c2be-4d73-94e8-173b1dc7cf3c"},
                {"role": "Reader", "guid": "acdd72a7-3385-48ef-bd42-f606fba81ae7"}]
            wanted = re.search(r"assignedTo\('([^']+)'\)", query.get("$filter", ""))
            value = [{"id": f"{scope}/providers/Microsoft.Authorization/roleAssignments/{uuid.uuid5(uuid.NAMESPACE_URL, r['guid'])}",
                      "name": str(uuid.uuid5(uuid.NAMESPACE_URL, r["guid"])), "type": "Microsoft.Authorization/roleAssignments",
                      "properties": {"roleDefinitionId": f"{scope}/providers/Microsoft.Authorization/roleDefinitions/{r['guid']}",
                                     "principalId": PRINCIPAL_OID, "principalType": "User", "scope": r.get("scope", scope)}}
                     for r in rows if wanted is None or wanted[1] == PRINCIPAL_OID]
            return self.send(h, 200, {"value": value})
        guid = rest.rsplit("/", 1)[1]
        names = {r["guid"]: r["role"] for r in (self.world.assignments or [])} | {
            "9980e02c-c2be-4d73-94e8-173b1dc7cf3c": "Virtual Machine Contributor",
            "acdd72a7-3385-48ef-bd42-f606fba81ae7": "Reader"}
        if guid not in names:
            return self.send(h, 404, {"error": {"code": "RoleDefinitionDoesNotExist", "message": guid}})
        self.send(h, 200, {"id": f"{scope}/providers/Microsoft.Authorization/roleDefinitions/{guid}", "name": guid,
                           "type": "Microsoft.Authorization/roleDefinitions",
                           "properties": {"roleName": names[guid], "type": "BuiltInRole", "description": "",
                                          "assignableScopes": ["/"], "permissions": []}})

    # ------------------------------------------------------------------ cost management
    def cost_query(self, h: BaseHTTPRequestHandler, body: dict[str, Any], query: dict[str, str]) -> None:
        """``Query_Usage``: the bill's rows in the period, per day and resource as the dataset
        asks, resource ids lower-cased, paged by ``nextLink`` (a ``$skiptoken``)."""
        if "costmanagement" in self.world.denied:
            return self.denied(h, "Microsoft.CostManagement/query/action", f"/subscriptions/{self.world.subscription}")
        self.world.queries.append(body)
        period = body.get("timePeriod") or {}
        start, end = str(period.get("from", ""))[:10], str(period.get("to", "9999"))[:10]
        wanted = {v.lower() for v in ((body.get("dataset") or {}).get("filter") or {}).get("dimensions", {}).get("values", [])}
        rows = [[cost, int(day.replace("-", "")), rid.lower(), currency] for rid, day, cost, currency in self.world.bill
                if start <= day <= end and (not wanted or rid.lower().split("/providers/", 1)[1].rsplit("/", 1)[0] in wanted)]
        skip = int(query.get("$skiptoken", "0") or 0)
        page = rows[skip:skip + self.world.bill_page]
        more = skip + self.world.bill_page < len(rows)
        scope = f"/subscriptions/{self.world.subscription}"
        link = (f"{self.url}{scope}/providers/Microsoft.CostManagement/query?api-version=2023-11-01"
                f"&$skiptoken={skip + self.world.bill_page}") if more else None
        self.send(h, 200, {"id": f"{scope}/providers/Microsoft.CostManagement/query/{uuid.uuid4()}",
                           "name": str(uuid.uuid4()), "type": "Microsoft.CostManagement/query",
                           "properties": {"nextLink": link, "columns": [
                               {"name": "Cost", "type": "Number"}, {"name": "UsageDate", "type": "Number"},
                               {"name": "ResourceId", "type": "String"}, {"name": "Currency", "type": "String"}],
                               "rows": page}})

    def activity_log(self, h: BaseHTTPRequestHandler, query: dict[str, str]) -> None:
        """``ActivityLogs_List``: the events whose time and resource the ``$filter`` names, newest
        first, paged by ``nextLink``."""
        if "activitylog" in self.world.denied:
            return self.denied(h, "Microsoft.Insights/eventtypes/values/read", f"/subscriptions/{self.world.subscription}")
        flt = query.get("$filter", "")
        since = re.search(r"eventTimestamp ge '([^']+)'", flt)
        until = re.search(r"eventTimestamp le '([^']+)'", flt)
        resource = re.search(r"resourceUri eq '([^']+)'", flt)
        if since is None or until is None:
            return self.send(h, 400, {"error": {"code": "BadRequest", "message": "The $filter must name eventTimestamp ge and le."}})
        events = sorted((e for e in self.world.activity if since[1] <= e["eventTimestamp"] <= until[1]
                         and (resource is None or e["resourceId"].lower() == resource[1].lower())),
                        key=lambda e: e["eventTimestamp"], reverse=True)
        skip = int(query.get("$skiptoken", "0") or 0)
        page = events[skip:skip + self.world.activity_page]
        link = None
        if skip + self.world.activity_page < len(events):
            link = (f"{self.url}/subscriptions/{self.world.subscription}/providers/microsoft.insights/eventtypes/management/"
                    f"values?api-version=2015-04-01&$filter={quote(flt)}&$skiptoken={skip + self.world.activity_page}")
        self.send(h, 200, {"value": page, "nextLink": link})

    # ------------------------------------------------------------------ retail prices
    def prices(self, h: BaseHTTPRequestHandler, query: dict[str, str]) -> None:
        self.world.calls.append(("GET", "/api/retail/prices", query))
        if self.world.prices_down:
            return self.send(h, 503, {"Message": "The service is unavailable."})
        filters = dict(re.findall(r"(\w+) eq '([^']*)'", query.get("$filter", "")))
        rows = price_items(filters)
        skip = int(query.get("$skip") or 0)
        page = rows[skip:skip + self.world.price_page]
        more = skip + self.world.price_page < len(rows)
        link = f"{self.url}/api/retail/prices?{urlencode({**query, '$skip': skip + self.world.price_page})}" if more else None
        self.send(h, 200, {"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
                           "Items": page, "NextPageLink": link, "Count": len(page)})


# ---------------------------------------------------------------------- fixtures
@pytest.fixture
def azure_env(tmp_path, monkeypatch):
    """The Azure CLI credential only (no managed-identity probe), a stand-in az, the peer's CA."""
    write_az(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("AZURE_TOKEN_CREDENTIALS", "AzureCliCredential")
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def azure(azure_env, monkeypatch):
    with AzurePeer(azure_env) as peer:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(peer.ca_file))
        monkeypatch.setenv("SSL_CERT_FILE", str(peer.ca_file))
        yield peer
