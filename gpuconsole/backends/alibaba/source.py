"""The Alibaba Cloud backend: ECS GPU instances, their prices and stock, launches and controls.

:class:`AlibabaCloud` is a :class:`~gpuconsole.backends.base.CloudBackend` and a
:class:`~gpuconsole.backends.base.Provisioner`, like the AWS one. Requests are built from the
documented parameter names (``Request().from_map``) and answers read as the documented JSON
(``body.to_map()``), so :mod:`mapping` speaks ECS's own words. Clients are made per region on first
use, from a worker thread; credentials come from the standard chain (environment,
``~/.alibabacloud/credentials``, the instance's RAM role), or a named profile.
"""

from __future__ import annotations

import json
import threading
import time
from functools import cache
from importlib import resources
import uuid
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from gpuconsole.backends.alibaba.billing import bill_rows, trail_events
from gpuconsole.backends.alibaba.mapping import (
    _items,
    backend_error,
    dry_run_error,
    ecs_time,
    instance_from,
    security_group,
    vswitch,
)
from gpuconsole.backends.base import BackendError, Capability, NotSupported
from gpuconsole.backends.clouds import per_instance
from gpuconsole.model import (
    AlibabaLaunchOptions,
    CloudReading,
    CostLine,
    Instance,
    InstanceState,
    InstanceType,
    KeyPair,
    LaunchSpec,
    MachineImage,
    Market,
    RegionPrice,
    SecurityGroup,
    SpotPrice,
    Subnet,
    Workload,
)

TIMEOUT_MS = 10_000
GPU_FAMILIES = ("ecs.gn", "ecs.ebmgn", "ecs.sgn", "ecs.vgn")


@dataclass(frozen=True, slots=True)
class AlibabaSettings:
    """The ``[alibaba]`` table: regions watched, an optional endpoint URL (a test peer, a VPC
    endpoint), a credentials profile, and the account's currency until ECS names it."""

    regions: tuple[str, ...] = ()
    endpoint: str | None = None
    profile: str | None = None
    currency: str = "CNY"
    sts_endpoint: str = "https://sts.aliyuncs.com"
    # BSS OpenAPI and ActionTrail; "": ``endpoint`` when one is given (a peer answers all),
    # else Alibaba Cloud's own (business.aliyuncs.com; actiontrail.<region>.aliyuncs.com)
    billing_endpoint: str = ""
    trail_endpoint: str = ""


def split_endpoint(url: str) -> tuple[str, str]:
    """``https://ecs.cn-hangzhou.aliyuncs.com`` → ``("ecs.cn-hangzhou.aliyuncs.com", "https")``."""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an endpoint URL: {url!r} (e.g. https://ecs.cn-hangzhou.aliyuncs.com)")
    return parts.netloc, parts.scheme


@cache
def published_types() -> dict[str, InstanceType]:
    """Alibaba Cloud's published GPU types, bundled (``gpuconsole/data/alibaba_catalog.json``):
    the figures DescribeInstanceTypes leaves out, and the catalog without credentials."""
    text = resources.files("gpuconsole.data").joinpath("alibaba_catalog.json").read_text(encoding="utf-8")
    return {t["name"]: InstanceType(**t, on_demand_price=0.0, cloud="alibaba", currency="")
            for t in json.loads(text)["types"]}


def is_gpu_type(name: str) -> bool:
    return name.startswith(GPU_FAMILIES)


class AlibabaCloud:
    """ECS in one or more regions, behind the console's cloud and provisioning interfaces."""

    name = "alibaba"
    min_interval = 15.0
    poll_timeout = 45.0
    capabilities = frozenset({
        Capability.LAUNCH, Capability.STOP, Capability.TERMINATE, Capability.SPOT, Capability.PRICES,
    })

    def __init__(self, settings: AlibabaSettings) -> None:
        self.settings = settings
        self.regions = settings.regions
        self.profile = settings.profile
        self.currency = settings.currency
        if settings.endpoint:
            split_endpoint(settings.endpoint)  # a bad URL fails here, before any call
        self._clients: dict[str, Any] = {}
        self._role: Callable[[], dict[str, str]] | None = None  # [alibaba.roles]: the role session
        self._client_key = ""  # the access key the clients were made with
        self._prices: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- SDK

    def _credential(self, *, own: bool = False) -> Any:
        """The role session's credentials when one is in use (never the login's own then), else
        the standard chain's; ``own``: the login's, to assume the role with."""
        from alibabacloud_credentials.client import Client as Credentials

        if self._role is not None and not own:
            from alibabacloud_credentials.models import Config as CredentialConfig

            creds = self._role()
            return Credentials(CredentialConfig(type="sts", access_key_id=creds["access_key_id"],
                                                access_key_secret=creds["access_key_secret"],
                                                security_token=creds["security_token"]))
        if self.profile:
            from alibabacloud_credentials.provider.profile import ProfileCredentialsProvider

            return Credentials(provider=ProfileCredentialsProvider(profile_name=self.profile))
        return Credentials()

    def use_role_credentials(self, refresh: Callable[[], dict[str, str]] | None) -> None:
        """Make every call with the credentials ``refresh`` gives (a RAM role's STS session,
        ``access_key_id``, ``access_key_secret``, ``security_token``); None: the standard chain."""
        with self._lock:
            self._role = refresh
            self._clients.clear()

    def _client(self, region: str) -> Any:
        key = self._role()["access_key_id"] if self._role is not None else ""  # may raise: no session, no call
        with self._lock:
            if key != self._client_key:
                self._clients.clear()
                self._client_key = key
            client = self._clients.get(region)
            if client is None:
                from alibabacloud_ecs20140526.client import Client
                from alibabacloud_tea_openapi import models as openapi

                config = openapi.Config(credential=self._credential(), region_id=region,
                                        read_timeout=TIMEOUT_MS, connect_timeout=TIMEOUT_MS)
                if self.settings.endpoint:
                    config.endpoint, config.protocol = split_endpoint(self.settings.endpoint)
                client = self._clients[region] = Client(config)
            return client

    def call(self, region: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        """One ECS action with documented parameters; its documented JSON answer.

        Raises:
            BackendError: mapped by :func:`mapping.backend_error`, the message starting with the region.
        """
        try:
            return self._invoke(region, action, params)
        except BackendError:
            raise  # no role session: said in core's words
        except Exception as exc:  # the SDK raises its own families and plain ones; all are mapped
            raise backend_error(exc, region) from None

    def _invoke(self, region: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        """:meth:`call` with the SDK's own exceptions."""
        from alibabacloud_ecs20140526 import models
        from darabonba.runtime import RuntimeOptions

        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in action.replace("VSwitch", "Vswitch")).lstrip("_")
        request = getattr(models, f"{action}Request")().from_map({"RegionId": region, **params})
        runtime = RuntimeOptions(read_timeout=TIMEOUT_MS, connect_timeout=TIMEOUT_MS, autoretry=True, max_attempts=3)
        response = getattr(self._client(region), f"{snake}_with_options")(request, runtime)
        return dict(response.body.to_map()) if response.body is not None else {}

    # ----------------------------------------------------------------- CloudBackend

    def poll_instances(self) -> CloudReading:
        instances = [i for region in self._regions() for i in self._instances_in(region)]
        return CloudReading(tuple(instances), taken_at=time.time())

    def _regions(self) -> tuple[str, ...]:
        if not self.regions:
            raise BackendError("no Alibaba Cloud region configured: set regions in the [alibaba] table")
        return self.regions

    def _instances_in(self, region: str) -> list[Instance]:
        found: list[Instance] = []
        token = ""
        while True:
            body = self.call(region, "DescribeInstances", {"MaxResults": 100, **({"NextToken": token} if token else {})})
            for raw in _items(body, "Instances", "Instance"):
                if not (int(raw.get("GPUAmount") or 0) or is_gpu_type(str(raw.get("InstanceType", "")))):
                    continue
                spot = raw.get("SpotStrategy") in ("SpotWithPriceLimit", "SpotAsPriceGo")
                price = self._spot_now(region, raw) if spot else self._price(region, str(raw.get("InstanceType", "")))
                found.append(instance_from(raw, region, price, self.currency))
            token = str(body.get("NextToken") or "")
            if not token:
                return found

    def _price(self, region: str, instance_type: str) -> float:
        """Pay-as-you-go price per hour (DescribePrice); the account's currency is taken from it."""
        key = (region, instance_type)
        if key not in self._prices:
            body = self.call(region, "DescribePrice", {"ResourceType": "instance", "InstanceType": instance_type,
                                                       "PriceUnit": "Hour"})
            price = (body.get("PriceInfo") or {}).get("Price") or {}
            if price.get("Currency"):
                self.currency = str(price["Currency"])
            self._prices[key] = float(price.get("TradePrice") or 0.0)
        return self._prices[key]

    def _spot_now(self, region: str, raw: dict[str, Any]) -> float:
        history = self.spot_prices(region, (str(raw.get("InstanceType", "")),), time.time() - 3 * 3600,
                                   zone=str(raw.get("ZoneId", "")))
        return history[-1].price if history else 0.0

    def close(self) -> None:
        self._clients.clear()

    def caller_identity(self) -> dict[str, str]:
        """Whom the calls run as: STS ``GetCallerIdentity`` (RPC, version 2015-04-01)."""
        body = self._sts("GetCallerIdentity", {})
        return {"account": str(body.get("AccountId", "")), "caller": str(body.get("Arn", "")),
                "identity_type": str(body.get("IdentityType", ""))}

    def assume_role(self, role_arn: str, session_name: str, duration_s: int) -> dict[str, Any]:
        """STS ``AssumeRole`` as the login itself: the role's temporary credentials
        (``access_key_id``, ``access_key_secret``, ``security_token``, ``expires_at``, ``arn``)."""
        body = self._sts("AssumeRole", {"RoleArn": role_arn, "RoleSessionName": session_name,
                                        "DurationSeconds": str(duration_s)}, own=True)
        creds = body.get("Credentials") or {}
        expires = str(creds.get("Expiration") or "").replace("Z", "")
        return {"access_key_id": str(creds.get("AccessKeyId", "")), "access_key_secret": str(creds.get("AccessKeySecret", "")),
                "security_token": str(creds.get("SecurityToken", "")),
                "expires_at": ecs_time(expires[:19] + "Z") if expires else 0.0,
                "arn": str((body.get("AssumedRoleUser") or {}).get("Arn", ""))}

    def _sts(self, action: str, query: dict[str, str], *, own: bool = False) -> dict[str, Any]:
        """One STS call (RPC, version 2015-04-01) at ``[alibaba] sts_endpoint``."""
        return self._rpc(self.settings.sts_endpoint, "2015-04-01", action, query, own=own, where="STS")

    # ----------------------------------------------------------------- billing and run history

    def resource_costs(self, start: float, end: float) -> tuple[tuple[str, str, float], ...]:
        """``(instance id, UTC day, amount)`` in the account's currency (BSS DescribeInstanceBill)."""
        endpoint = self.settings.billing_endpoint or self.settings.endpoint or "https://business.aliyuncs.com"
        return bill_rows(lambda a, q: self._rpc(endpoint, "2017-12-14", a, q, where="BSS"),
                         start, end)

    def cost_and_usage(self, start: float, end: float, group_by_tag: str | None = None) -> tuple[CostLine, ...]:
        """What the bill says each instance cost between ``start`` and ``end`` (per instance;
        a tag grouping is not asked of BSS: the console groups instances by their tags)."""
        return per_instance(self.resource_costs(start, end))

    def instance_history(self, region: str, instance_id: str, since: float, until: float) -> tuple[tuple[float, bool], ...]:
        """When the instance ran (ActionTrail LookupEvents in its region)."""
        endpoint = self.settings.trail_endpoint or self.settings.endpoint or f"https://actiontrail.{region}.aliyuncs.com"
        return trail_events(lambda a, q: self._rpc(endpoint, "2020-07-06", a, q, where="ActionTrail"),
                            instance_id, since, until)

    def _rpc(self, endpoint: str, version: str, action: str, query: dict[str, str], *, own: bool = False,
             where: str = "") -> dict[str, Any]:
        """One RPC-style call of any Alibaba Cloud API at ``endpoint`` (a full URL)."""
        from alibabacloud_tea_openapi import models as openapi
        from alibabacloud_tea_openapi import utils_models
        from alibabacloud_tea_openapi.client import Client
        from darabonba.runtime import RuntimeOptions

        host, protocol = split_endpoint(endpoint)
        try:
            config = openapi.Config(credential=self._credential(own=own), endpoint=host, protocol=protocol,
                                    read_timeout=TIMEOUT_MS, connect_timeout=TIMEOUT_MS)
            params = utils_models.Params(action=action, version=version, protocol=protocol.upper(),
                                         pathname="/", method="POST", auth_type="AK", style="RPC",
                                         req_body_type="formData", body_type="json")
            answer = Client(config).call_api(params, utils_models.OpenApiRequest(query=query),
                                             RuntimeOptions(read_timeout=TIMEOUT_MS, connect_timeout=TIMEOUT_MS))
        except BackendError:
            raise
        except Exception as exc:  # mapped like every other call
            raise backend_error(exc, where) from None
        return dict((answer or {}).get("body") or {})

    # ----------------------------------------------------------------- Provisioner

    def instance_types(self, region: str) -> tuple[InstanceType, ...]:
        body = self.call(region, "DescribeInstanceTypes", {"MaxResults": 1600})
        types = []
        for raw in _items(body, "InstanceTypes", "InstanceType"):
            count = int(raw.get("GPUAmount") or 0)
            if not count:
                continue
            name = str(raw.get("InstanceTypeId", ""))
            known = published_types().get(name)
            memory = float(raw.get("GPUMemorySize") or 0) or (known.gpu_memory_gib if known else 0)
            types.append(InstanceType(
                name=name, gpu_model=str(raw.get("GPUSpec") or (known.gpu_model if known else "")),
                gpu_count=count, gpu_memory_gib=int(memory),
                vcpus=int(raw.get("CpuCoreCount") or 0), memory_gib=int(float(raw.get("MemorySize") or 0)),
                on_demand_price=0.0, network=f"{raw.get('InstanceBandwidthRx', '')}".strip(),
                cloud="alibaba", currency=self.currency))
        return tuple(types)

    def on_demand_prices(self, regions: tuple[str, ...]) -> tuple[RegionPrice, ...]:
        return tuple(RegionPrice(t.name, region, self._price(region, t.name))
                     for region in regions for t in self.instance_types(region))

    def spot_prices(self, region: str, instance_types: tuple[str, ...], since: float, *,
                    zone: str = "") -> tuple[SpotPrice, ...]:
        start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))
        out: list[SpotPrice] = []
        for name in instance_types:
            params = {"InstanceType": name, "NetworkType": "vpc", "StartTime": start, **({"ZoneId": zone} if zone else {})}
            body = self.call(region, "DescribeSpotPriceHistory", params)
            for point in _items(body, "SpotPrices", "SpotPriceType"):
                out.append(SpotPrice(name, str(point.get("ZoneId", "")), float(point.get("SpotPrice") or 0.0),
                                     ecs_time(point.get("Timestamp"))))
        return tuple(sorted(out, key=lambda p: p.ts))

    def offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Zones with stock of each type now (DescribeAvailableResource; ``SoldOut`` is left out)."""
        body = self.call(region, "DescribeAvailableResource", {"DestinationResource": "InstanceType",
                                                               "InstanceChargeType": "PostPaid"})
        zones: dict[str, list[str]] = {name: [] for name in instance_types}
        for zone in _items(body, "AvailableZones", "AvailableZone"):
            for group in _items(zone, "AvailableResources", "AvailableResource"):
                for item in _items(group, "SupportedResources", "SupportedResource"):
                    if item.get("Value") in zones and item.get("Status") == "Available":
                        zones[str(item["Value"])].append(str(zone.get("ZoneId", "")))
        return {name: tuple(z) for name, z in zones.items()}

    def subnets(self, region: str) -> tuple[Subnet, ...]:
        """The region's VSwitches (DescribeVSwitches): a VPC's subnet in one zone, as ECS calls it."""
        return tuple(vswitch(r) for r in self._pages(region, "DescribeVSwitches", "VSwitches", "VSwitch"))

    def security_groups(self, region: str) -> tuple[SecurityGroup, ...]:
        return tuple(security_group(r) for r in self._pages(region, "DescribeSecurityGroups", "SecurityGroups", "SecurityGroup"))

    def key_pairs(self, region: str) -> tuple[KeyPair, ...]:
        """The region's SSH key pairs (DescribeKeyPairs names them; ECS does not say their type)."""
        return tuple(KeyPair(str(r.get("KeyPairName", ""))) for r in self._pages(region, "DescribeKeyPairs", "KeyPairs", "KeyPair"))

    def _pages(self, region: str, action: str, outer: str, inner: str) -> list[dict[str, Any]]:
        """Every row of a list paged by ``PageNumber`` and ``PageSize`` (50 at most), as documented."""
        rows: list[dict[str, Any]] = []
        for number in range(1, 101):
            body = self.call(region, action, {"PageNumber": number, "PageSize": 50})
            page = _items(body, outer, inner)
            rows.extend(page)
            if not page or len(rows) >= int(body.get("TotalCount") or 0):
                break
        return rows

    def default_image(self, region: str, workload: Workload) -> MachineImage:
        raise NotSupported("Alibaba Cloud has no default GPU image here: give an image id (e.g. an Ubuntu image with the GPU driver)")

    def launch(self, spec: LaunchSpec, *, dry_run: bool = False) -> tuple[Instance, ...]:
        """RunInstances (pay-as-you-go, or preemptible with ``SpotStrategy``); idempotent by ``ClientToken``."""
        params = run_instances_params(spec, client_token=str(uuid.uuid4()))
        if dry_run:
            try:
                self._invoke(spec.region, "RunInstances", {**params, "DryRun": True})
            except BackendError:
                raise
            except Exception as exc:  # ECS answers a passing dry run with an error too
                cause = dry_run_error(exc)
                if cause is not None:
                    raise cause from None
            return ()
        body = self.call(spec.region, "RunInstances", params)
        ids = [str(x) for x in ((body.get("InstanceIdSets") or {}).get("InstanceIdSet") or [])]
        return tuple(Instance(instance_id=i, instance_type=spec.instance_type, region=spec.region,
                              availability_zone=spec.availability_zone, market=spec.market,
                              state=InstanceState.PENDING, launch_time=time.time(), price_per_hour=0.0,
                              tags=spec.tags, cloud="alibaba", currency=self.currency) for i in ids)

    def start(self, region: str, instance_id: str) -> None:
        self.call(region, "StartInstance", {"InstanceId": instance_id})

    def stop(self, region: str, instance_id: str) -> None:
        """Stop in economical mode where the instance allows it (ECS stops it in standard mode,
        still billing, where it does not: the next poll shows ``StoppedMode``)."""
        self.call(region, "StopInstance", {"InstanceId": instance_id, "StoppedMode": "StopCharging"})

    def reboot(self, region: str, instance_id: str) -> None:
        self.call(region, "RebootInstance", {"InstanceId": instance_id})

    def terminate(self, region: str, instance_id: str) -> None:
        self.call(region, "DeleteInstance", {"InstanceId": instance_id, "Force": True})


def run_instances_params(spec: LaunchSpec, *, client_token: str) -> dict[str, Any]:
    """The RunInstances parameters of a launch, in the documented names (the provider's own
    options from :class:`~gpuconsole.model.AlibabaLaunchOptions`, its defaults where none)."""
    opts = spec.options if isinstance(spec.options, AlibabaLaunchOptions) else AlibabaLaunchOptions()
    essd = opts.system_disk_category == "cloud_essd"
    params: dict[str, Any] = {
        "InstanceType": spec.instance_type, "ImageId": spec.image_id, "Amount": spec.count,
        "ClientToken": client_token, "InstanceChargeType": "PostPaid",
        "InternetMaxBandwidthOut": opts.public_bandwidth_mbps, "DeletionProtection": opts.deletion_protection,
        "SystemDisk": {"Size": str(spec.root_volume_gib), "Category": opts.system_disk_category,
                       **({"PerformanceLevel": opts.performance_level} if essd else {}),
                       **({"Encrypted": "true"} if spec.encrypted else {}),
                       **({"KMSKeyId": spec.kms_key_id} if spec.encrypted and spec.kms_key_id else {})},
        "Tag": [{"Key": k, "Value": v} for k, v in spec.tags],
    }
    if spec.availability_zone:
        params["ZoneId"] = spec.availability_zone
    if spec.subnet_id:
        params["VSwitchId"] = spec.subnet_id
    if spec.security_group_ids:
        params["SecurityGroupIds"] = list(spec.security_group_ids)
    if spec.key_name:
        params["KeyPairName"] = spec.key_name
    if spec.imdsv2_required:
        params["HttpTokens"] = "required"
    if spec.market is Market.SPOT:
        if spec.max_spot_price is not None:
            params.update(SpotStrategy="SpotWithPriceLimit", SpotPriceLimit=spec.max_spot_price)
        else:
            params["SpotStrategy"] = "SpotAsPriceGo"
        params.update(SpotDuration=opts.spot_duration, SpotInterruptionBehavior=opts.spot_interruption)
    return params
