"""A local ECS peer: the RPC-style API (``POST /?Action=…`` with form or query parameters, JSON
answers) in the documented request and response shapes, for the official SDK to talk to.

It holds instances per region, answers DescribeInstances (GPUAmount, GPUSpec, StoppedMode,
OperationLocks, Tags, NextToken), DescribeInstanceTypes, DescribeAvailableResource,
DescribePrice, DescribeSpotPriceHistory, DescribeVSwitches, DescribeSecurityGroups, DescribeKeyPairs
(paged), RunInstances (DryRun, ClientToken), Start/Stop/Reboot/
DeleteInstance, and the documented errors (``InvalidInstanceType.NotFound``,
``OperationDenied.NoStock``, ``Throttling.User``) when told to.

Fixture (a plugin of tests/conftest.py): ``ecs`` runs one on 127.0.0.1 with the SDK's credentials
set to a test key (and the ECS metadata step of its credential chain off), and stops it after.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

TEST_KEY_ID = "LTAI5tTestKeyId"

TYPES = {  # Alibaba Cloud's published figures: GPU, count, GPU memory GiB each, vCPUs, memory GiB
    "ecs.gn7i-c8g1.2xlarge": ("NVIDIA A10", 1, 24, 8, 30),
    "ecs.gn6i-c4g1.xlarge": ("NVIDIA T4", 1, 16, 4, 15),
    "ecs.gn7e-c16g1.4xlarge": ("NVIDIA A100", 1, 80, 16, 125),
    "ecs.g7.large": ("", 0, 0, 2, 8),
}
PRICES = {"ecs.gn7i-c8g1.2xlarge": 14.9, "ecs.gn6i-c4g1.xlarge": 8.2, "ecs.gn7e-c16g1.4xlarge": 41.6, "ecs.g7.large": 0.6}


@dataclass
class EcsWorld:
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)  # action -> error code to answer once
    sold_out: set[str] = field(default_factory=set)  # types with no stock
    tokens: dict[str, list[str]] = field(default_factory=dict)  # ClientToken -> ids
    currency: str = "CNY"
    counter: int = 0
    assumable: set[str] | None = None  # STS AssumeRole: the RAM roles the login may assume (None: any)
    trusted: dict[str, set[str]] = field(default_factory=dict)  # a role's trust policy: the AccessKeyIds it names
    sessions: dict[str, str] = field(default_factory=dict)  # an issued STS key -> its role's ARN
    expiration: str = "2099-01-01T00:00:00Z"  # of the credentials AssumeRole hands out
    bills: list[dict[str, Any]] = field(default_factory=list)  # DescribeInstanceBill Items (DAILY)
    trail: list[dict[str, Any]] = field(default_factory=list)  # ActionTrail events (resourceName, eventName, …)
    # DescribeVSwitches / DescribeSecurityGroups / DescribeKeyPairs rows, per region, as documented
    vswitches: list[dict[str, Any]] = field(default_factory=lambda: [
        {"VSwitchId": f"vsw-bp1{n:017d}", "VpcId": "vpc-bp1gpu00000000000001", "ZoneId": zone,
         "CidrBlock": f"192.168.{n * 16}.0/20", "VSwitchName": f"gpu-{zone[-1]}", "IsDefault": n == 0,
         "AvailableIpAddressCount": 4090 - n, "Status": "Available", "Description": "", "RegionId": "cn-hangzhou"}
        for n, zone in enumerate(("cn-hangzhou-i", "cn-hangzhou-j", "cn-hangzhou-h"))])
    security_groups: list[dict[str, Any]] = field(default_factory=lambda: [
        {"SecurityGroupId": "sg-bp1default000000001", "SecurityGroupName": "default", "VpcId": "vpc-bp1gpu00000000000001",
         "Description": "System created security group.", "SecurityGroupType": "normal", "RegionId": "cn-hangzhou"},
        {"SecurityGroupId": "sg-bp1training00000002", "SecurityGroupName": "gpu-training", "VpcId": "vpc-bp1gpu00000000000001",
         "Description": "NCCL between training nodes; SSH from the bastion", "SecurityGroupType": "enterprise",
         "RegionId": "cn-hangzhou"}])
    key_pairs: list[dict[str, Any]] = field(default_factory=lambda: [
        {"KeyPairName": name, "KeyPairFingerPrint": f"{n:02x}:" * 15 + "ff", "CreationTime": "2026-11-02T08:00Z",
         "RegionId": "cn-hangzhou"} for n, name in enumerate(("platform-ops", "ci-runner"))])

    def add(self, instance_type: str, *, region: str = "cn-hangzhou", zone: str = "cn-hangzhou-i",
            status: str = "Running", spot: str = "NoSpot", stopped_mode: str = "Not-applicable",
            tags: dict[str, str] | None = None, charge: str = "PostPaid", locks: tuple[str, ...] = ()) -> str:
        self.counter += 1
        iid = f"i-bp{self.counter:018d}"
        gpu, count, *_ = TYPES[instance_type]
        self.instances[iid] = {
            "InstanceId": iid, "InstanceName": f"node-{self.counter}", "InstanceType": instance_type,
            "RegionId": region, "ZoneId": zone, "Status": status, "StoppedMode": stopped_mode,
            "InstanceChargeType": charge, "SpotStrategy": spot, "GPUAmount": count, "GPUSpec": gpu,
            "ImageId": "ubuntu_22_04_x64_20G_alibase_20240101.vhd", "CreationTime": "2026-12-01T08:00Z", "StartTime": "2026-12-01T08:01Z",
            "Tags": {"Tag": [{"TagKey": k, "TagValue": v} for k, v in (tags or {}).items()]},
            "OperationLocks": {"LockReason": [{"LockReason": r} for r in locks]},
        }
        return iid


LISTS = {  # paged by PageNumber and PageSize (at most 50), as documented
    "DescribeVSwitches": lambda w: ("VSwitches", "VSwitch", w.vswitches),
    "DescribeSecurityGroups": lambda w: ("SecurityGroups", "SecurityGroup", w.security_groups),
    "DescribeKeyPairs": lambda w: ("KeyPairs", "KeyPair", w.key_pairs),
}


def _answer(world: EcsWorld, action: str, p: dict[str, str]) -> tuple[int, dict[str, Any]]:
    region = p.get("RegionId", "")
    if action in world.fail:
        code = world.fail.pop(action)
        status = 400 if code.startswith(("Throttling", "Invalid", "OperationDenied")) else 403
        return status, {"Code": code, "Message": f"{code} from the peer", "RequestId": "r-1"}
    if action == "GetCallerIdentity" and p.get("AccessKeyId") in world.sessions:  # a role session's caller
        arn = world.sessions[p["AccessKeyId"]].replace(":role/", ":assumed-role/")
        return 200, {"RequestId": "r", "IdentityType": "AssumedRoleUser", "AccountId": "1234567890123456",
                     "PrincipalId": "3019:x", "Arn": f"{arn}/session"}
    if action == "GetCallerIdentity":  # STS, version 2015-04-01
        return 200, {"RequestId": "r", "IdentityType": "RAMUser", "AccountId": "1234567890123456",
                     "PrincipalId": "2071234567890", "UserId": "2071234567890",
                     "Arn": "acs:ram::1234567890123456:user/gpu-operator"}
    if action == "AssumeRole":  # STS, version 2015-04-01
        arn = p.get("RoleArn", "")
        if (world.assumable is not None and arn not in world.assumable) or (
                arn in world.trusted and p.get("AccessKeyId") not in world.trusted[arn]):
            return 403, {"Code": "NoPermission", "RequestId": "r", "Message": "You are not authorized to do this "
                         "action. You should be authorized by RAM."}
        key = f"STS.NV{len(world.sessions):019d}"
        world.sessions[key] = arn
        name = p.get("RoleSessionName", "")
        return 200, {"RequestId": "r", "Credentials": {
            "AccessKeyId": key, "AccessKeySecret": "role-secret", "SecurityToken": f"token-{len(world.sessions)}",
            "Expiration": world.expiration},
            "AssumedRoleUser": {"Arn": f"{arn.replace(':role/', ':assumed-role/')}/{name}", "AssumedRoleId": "3019:x"}}
    if action == "DescribeInstanceBill":  # BSS OpenAPI 2017-12-14, DAILY granularity, paged by NextToken
        if p.get("Granularity") != "DAILY" or not p.get("BillingDate", "").startswith(p.get("BillingCycle", "?")):
            return 400, {"Code": "InvalidParameter", "Message": "BillingDate must be in BillingCycle", "RequestId": "r"}
        rows = [b for b in world.bills if b["BillingDate"] == p["BillingDate"]]
        start, size = int(p.get("NextToken") or 0), int(p.get("MaxResults") or 20)
        token = str(start + size) if start + size < len(rows) else ""
        return 200, {"Code": "Success", "Message": "Successful!", "RequestId": "r", "Success": True,
                     "Data": {"BillingCycle": p["BillingCycle"], "AccountID": "1234567890123456", "TotalCount": len(rows),
                              "NextToken": token, "MaxResults": size, "Items": rows[start:start + size]}}
    if action == "LookupEvents":  # ActionTrail 2020-07-06
        name = p.get("LookupAttribute.1.Value", "")
        found = [e for e in world.trail if e["resourceName"] == name
                 and p.get("StartTime", "") <= e["eventTime"] < p.get("EndTime", "~")]
        return 200, {"RequestId": "r", "StartTime": p.get("StartTime"), "EndTime": p.get("EndTime"), "Events": found}
    if action == "DescribeInstances":
        rows = [i for i in world.instances.values() if i["RegionId"] == region]
        start = int(p.get("NextToken") or 0)
        size = int(p.get("MaxResults") or 10)
        page = rows[start:start + size]
        token = str(start + size) if start + size < len(rows) else ""
        return 200, {"RequestId": "r", "TotalCount": len(rows), "NextToken": token, "Instances": {"Instance": page}}
    if action in LISTS:
        outer, inner, rows = LISTS[action](world)
        rows = [{k: v for k, v in r.items() if k != "RegionId"} for r in rows if r["RegionId"] == region]
        number, size = int(p.get("PageNumber") or 1), min(int(p.get("PageSize") or 10), 50)
        page = rows[(number - 1) * size:number * size]
        return 200, {"RequestId": "r", "TotalCount": len(rows), "PageNumber": number, "PageSize": size,
                     **({"RegionId": region} if action == "DescribeSecurityGroups" else {}), outer: {inner: page}}
    if action == "DescribeInstanceTypes":
        return 200, {"RequestId": "r", "InstanceTypes": {"InstanceType": [
            {"InstanceTypeId": n, "GPUSpec": g, "GPUAmount": c, "GPUMemorySize": m, "CpuCoreCount": v,
             "MemorySize": mem, "InstanceTypeFamily": n.rsplit(".", 1)[0].split("-")[0]}
            for n, (g, c, m, v, mem) in TYPES.items()]}}
    if action == "DescribeAvailableResource":
        return 200, {"RequestId": "r", "AvailableZones": {"AvailableZone": [
            {"ZoneId": zone, "RegionId": region, "Status": "Available", "AvailableResources": {"AvailableResource": [
                {"Type": "InstanceType", "SupportedResources": {"SupportedResource": [
                    {"Value": n, "Status": "SoldOut" if n in world.sold_out or zone.endswith("j") else "Available",
                     "StatusCategory": "WithStock"} for n in TYPES]}}]}}
            for zone in (f"{region}-i", f"{region}-j")]}}
    if action == "DescribePrice":
        name = p.get("InstanceType", "")
        if name not in PRICES:
            return 404, {"Code": "InvalidInstanceType.NotFound", "Message": "The specified InstanceType does not exist.", "RequestId": "r"}
        price = PRICES[name]
        return 200, {"RequestId": "r", "PriceInfo": {"Price": {"OriginalPrice": price, "DiscountPrice": 0.0,
                                                               "TradePrice": price, "Currency": world.currency},
                                                     "Rules": {"Rule": []}}}
    if action == "DescribeSpotPriceHistory":
        name = p.get("InstanceType", "")
        base = PRICES.get(name, 1.0) * 0.3
        return 200, {"RequestId": "r", "Currency": world.currency, "NextOffset": 0, "SpotPrices": {"SpotPriceType": [
            {"ZoneId": p.get("ZoneId") or f"{region}-i", "InstanceType": name, "IoOptimized": "optimized",
             "NetworkType": "vpc", "SpotPrice": round(base + d * 0.01, 3), "OriginPrice": PRICES.get(name, 1.0),
             "Timestamp": f"2026-12-04T0{d}:00:00Z"} for d in range(3)]}}
    if action == "RunInstances":
        name = p.get("InstanceType", "")
        if name not in TYPES:
            return 404, {"Code": "InvalidInstanceType.NotFound", "Message": "The specified InstanceType does not exist.", "RequestId": "r"}
        if name in world.sold_out:
            return 400, {"Code": "OperationDenied.NoStock", "Message": "The resource is out of stock in the specified zone.", "RequestId": "r"}
        if p.get("DryRun", "").lower() == "true":
            return 400, {"Code": "DryRunOperation", "Message": "Request validation has been passed with DryRun flag set.", "RequestId": "r"}
        token = p.get("ClientToken", "")
        if token in world.tokens:
            ids = world.tokens[token]
        else:
            tags = {p[f"Tag.{n}.Key"]: p.get(f"Tag.{n}.Value", "") for n in range(1, 21) if f"Tag.{n}.Key" in p}
            ids = [world.add(name, region=region, zone=p.get("ZoneId") or f"{region}-i", status="Pending",
                             spot=p.get("SpotStrategy", "NoSpot"), tags=tags) for _ in range(int(p.get("Amount") or 1))]
            for iid in ids:
                world.instances[iid].update(DeletionProtection=p.get("DeletionProtection", "").lower() == "true",
                                            SpotDuration=int(p.get("SpotDuration") or 0),
                                            SpotInterruptionBehavior=p.get("SpotInterruptionBehavior", "Terminate"))
            world.tokens[token] = ids
        return 200, {"RequestId": "r", "OrderId": "o-1", "TradePrice": PRICES[name], "InstanceIdSets": {"InstanceIdSet": ids}}
    if action in ("StartInstance", "StopInstance", "RebootInstance", "DeleteInstance"):
        inst = world.instances.get(p.get("InstanceId", ""))
        if inst is None:
            return 404, {"Code": "InvalidInstanceId.NotFound", "Message": "The specified InstanceId does not exist.", "RequestId": "r"}
        if action == "StartInstance":
            inst.update(Status="Running", StoppedMode="Not-applicable")
        elif action == "StopInstance":
            economical = p.get("StoppedMode") == "StopCharging" and inst["InstanceChargeType"] == "PostPaid"
            inst.update(Status="Stopped", StoppedMode="StopCharging" if economical else "KeepCharging")
        elif action == "DeleteInstance" and inst.get("DeletionProtection"):
            return 403, {"Code": "InvalidOperation.DeletionProtection",
                         "Message": "The instance has deletion protection enabled.", "RequestId": "r"}
        elif action == "DeleteInstance":
            del world.instances[inst["InstanceId"]]
        return 200, {"RequestId": "r"}
    return 400, {"Code": "InvalidAction.NotFound", "Message": f"unknown action {action}", "RequestId": "r"}


class EcsPeer:
    """The peer on 127.0.0.1; ``url`` is what ``[alibaba] endpoint`` takes."""

    def __init__(self) -> None:
        self.world = EcsWorld()
        world = self.world

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self._serve()

            def do_GET(self) -> None:  # noqa: N802
                self._serve()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                params = dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))
                params.update(parse_qsl(body, keep_blank_values=True))
                action = params.get("Action") or self.headers.get("x-acs-action", "")
                # Who signed: RPC's AccessKeyId and SecurityToken parameters, or the V3 signature's
                # Authorization header (ACS3-HMAC-SHA256 Credential=<key>,…) and x-acs-security-token.
                signed = re.search(r"Credential=([^,\s]+)", self.headers.get("Authorization", ""))
                if signed and "AccessKeyId" not in params:
                    params["AccessKeyId"] = signed.group(1)
                if self.headers.get("x-acs-security-token") and "SecurityToken" not in params:
                    params["SecurityToken"] = self.headers["x-acs-security-token"]
                world.calls.append((action, params))
                status, answer = _answer(world, action, params)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> EcsPeer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def actions(self) -> list[str]:
        return [a for a, _ in self.world.calls]


@pytest.fixture
def ecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[EcsPeer]:
    monkeypatch.setenv("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "true")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", TEST_KEY_ID)
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "test-secret")
    with EcsPeer() as peer:
        yield peer
