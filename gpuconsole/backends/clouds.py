"""Several clouds at once behind the one cloud interface, and what tells the providers apart.

:data:`PROVIDERS` declares each provider in a few lines (the name the command line and JSON use,
its instance-id form, the prefix of its instance-type names, its title); :class:`CloudSet` polls
every provider a session watches and sends each action to the provider that owns the instance,
the region or the type. Adding a provider is a new adapter folder and one
:func:`register_provider` call; nothing here names a cloud's API.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.base import BackendError, Capability, NotSupported
from gpuconsole.model import AlibabaLaunchOptions, AzureLaunchOptions, CloudReading, CostLine, Instance, LaunchSpec
from gpuconsole.model.cloud import AZURE_VM_ID, EC2_INSTANCE_ID, ECS_INSTANCE_ID


@dataclass(frozen=True, slots=True)
class IdChecks:
    """A provider's own forms of the ids a launch names, each with the line said when it is wrong."""

    region: tuple[re.Pattern[str], str]
    image_id: tuple[re.Pattern[str], str]
    subnet_id: tuple[re.Pattern[str], str]
    security_group: tuple[re.Pattern[str], str]
    kms_key_id: tuple[re.Pattern[str], str]
    image_word: str = "an image"
    reserved_tag_prefixes: tuple[str, ...] = ()


_HEX_ID = r"(?:[0-9a-f]{8}|[0-9a-f]{17})"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_KEY_ID = rf"(?:{_UUID}|mrk-[0-9a-f]{{32}})"
_ALIAS = r"alias/[A-Za-z0-9/_-]{1,250}"
AWS_CHECKS = IdChecks(
    region=(re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$"), "is not a region name like us-east-1"),
    image_id=(re.compile(rf"^ami-{_HEX_ID}$"), "an AMI id is ami- followed by 8 or 17 hex digits"),
    subnet_id=(re.compile(rf"^subnet-{_HEX_ID}$"), "a subnet id is subnet- followed by 8 or 17 hex digits"),
    security_group=(re.compile(rf"^sg-{_HEX_ID}$"), "is not a security group id (sg-…)"),
    kms_key_id=(re.compile(rf"^(?:{_KEY_ID}|{_ALIAS}|arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{{12}}:(?:key/{_KEY_ID}|{_ALIAS}))$"),
                "use a key id, a key ARN or alias/NAME"),
    image_word="an image (AMI)",
    reserved_tag_prefixes=("aws:",),
)
# Alibaba Cloud's forms: regions such as cn-hangzhou or ap-southeast-1, public images by name
# (ubuntu_22_04_x64_20G_alibase_….vhd) or custom ones (m-…), VSwitches vsw-…, groups sg-…, KMS
# keys by id (key-…) or alias; tag keys may not start with aliyun or acs: (TagResources).
ALIBABA_CHECKS = IdChecks(
    region=(re.compile(r"^[a-z]{2}(-[a-z]+)+(-\d{1,2})?$"), "is not a region name like cn-hangzhou"),
    image_id=(re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,127}$"), "an image id is m-… or a public image name"),
    subnet_id=(re.compile(r"^vsw-[0-9a-z]{8,30}$"), "a VSwitch id is vsw- followed by letters and digits"),
    security_group=(re.compile(r"^sg-[0-9a-z]{8,30}$"), "is not a security group id (sg-…)"),
    kms_key_id=(re.compile(r"^(?:key-[0-9a-zA-Z-]{4,64}|[0-9a-f-]{36}|alias/[A-Za-z0-9/_-]{1,250})$"),
                "use a KMS key id (key-…) or alias/NAME"),
    reserved_tag_prefixes=("aliyun", "acs:"),
)

# Azure's forms: locations such as eastus or westeurope; images as a Marketplace URN
# (publisher:offer:sku:version) or an image / gallery resource id; subnets, network security
# groups and disk encryption sets by resource id; tag names may not start with azure, microsoft
# or windows (resource tags' reserved prefixes).
_ARM = r"/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w.()]{1,90}/providers/"
AZURE_CHECKS = IdChecks(
    region=(re.compile(r"^[a-z][a-z0-9]{2,30}$"), "is not an Azure location like eastus"),
    image_id=(re.compile(r"^(?:[\w.-]+:[\w.-]+:[\w.-]+:[\w.-]+|/subscriptions/\S+)$"),
              "an image is a URN publisher:offer:sku:version or an image resource id"),
    subnet_id=(re.compile(rf"^{_ARM}Microsoft\.Network/virtualNetworks/[\w.-]+/subnets/[\w.-]+$", re.I),
               "a subnet is its resource id (/subscriptions/…/virtualNetworks/NET/subnets/NAME)"),
    security_group=(re.compile(rf"^{_ARM}Microsoft\.Network/networkSecurityGroups/[\w.-]+$", re.I),
                    "is not a network security group's resource id"),
    kms_key_id=(re.compile(rf"^{_ARM}Microsoft\.Compute/diskEncryptionSets/[\w.-]+$", re.I),
                "use a disk encryption set's resource id"),
    image_word="an image (URN or resource id)",
    reserved_tag_prefixes=("azure", "microsoft", "windows"),
)


@dataclass(frozen=True, slots=True)
class Provider:
    """One cloud as the rest of the console sees it.

    Attributes:
        name: what ``--cloud``, JSON's ``cloud`` and the CLOUD column say.
        title: how a person names it.
        instance_id: the form of its instance ids (its own check before any call).
        type_prefix: how its instance-type names start ("" matches any: the fallback).
        stop_note: what stopping does to its bill, for screens and the README.
        launch_fields: the launch wizard's details step, as ``(LaunchSpec field, label)``: the
            wizard shows each field under the label its provider gives it, and leaves out a field
            the provider does not declare.
        checks: its own id forms, checked before a launch reaches it.
        options: its own launch-option Struct (:mod:`gpuconsole.model.launch_options`), whose
            fields the wizard shows after the neutral ones; None when it has none.
    """

    name: str
    title: str
    instance_id: re.Pattern[str]
    type_prefix: str = ""
    stop_note: str = ""
    launch_fields: tuple[tuple[str, str], ...] = ()
    checks: IdChecks = AWS_CHECKS
    options: type | None = None


PROVIDERS: dict[str, Provider] = {}


def register_provider(provider: Provider) -> Provider:
    PROVIDERS[provider.name] = provider
    return provider


register_provider(Provider(
    "aws", "AWS", EC2_INSTANCE_ID, "",
    "a stopped EC2 instance bills no compute; its EBS volumes bill on",
    (("count", "Count"), ("image_id", "AMI"), ("key_name", "Key pair"), ("subnet_id", "Subnet"),
     ("root_volume_gib", "Root GiB"), ("encrypted", "Encryption"), ("kms_key_id", "KMS key"),
     ("imdsv2_required", "Metadata"), ("security_group_ids", "Security groups (space picks)")), AWS_CHECKS))
register_provider(Provider(
    "alibaba", "Alibaba Cloud", ECS_INSTANCE_ID, "ecs.",
    "a pay-as-you-go instance stopped in economical mode bills no compute; a subscription one, or one "
    "stopped in standard mode (KeepCharging), bills on; disks bill on",
    (("count", "Count"), ("image_id", "Image"), ("key_name", "Key pair"), ("subnet_id", "VSwitch"),
     ("root_volume_gib", "System GiB"), ("encrypted", "Encryption"), ("kms_key_id", "KMS key"),
     ("imdsv2_required", "Metadata"), ("security_group_ids", "Security groups (space picks)")), ALIBABA_CHECKS,
    AlibabaLaunchOptions))
register_provider(Provider(
    "azure", "Azure", AZURE_VM_ID, "Standard_",
    "a deallocated VM bills no compute; one only powered off (stopped, still allocated) bills on; disks bill on",
    (("count", "Count"), ("image_id", "Image"), ("key_name", "SSH key"), ("subnet_id", "Subnet"),
     ("root_volume_gib", "OS disk GiB"), ("encrypted", "Encryption"), ("kms_key_id", "Disk encryption set"),
     ("security_group_ids", "Network security group")), AZURE_CHECKS, AzureLaunchOptions))


def published_types(cloud: str) -> dict[str, Any]:
    """A cloud's GPU types as it publishes them, bundled (no credentials needed); ``{}`` for a
    cloud whose types come from the shared catalog (its adapter package is imported, no SDK)."""
    if cloud not in ("alibaba", "azure"):
        return {}
    import importlib

    return dict(importlib.import_module(f"gpuconsole.backends.{cloud}").published_types())


def launch_fields(instance_type: str) -> tuple[tuple[str, str], ...]:
    """The details a launch of ``instance_type`` asks for, as its provider declares them."""
    return provider_for_type(instance_type).launch_fields


def provider_of_id(instance_id: str) -> Provider | None:
    for provider in PROVIDERS.values():
        if provider.instance_id.fullmatch(instance_id):
            return provider
    return None


def provider_for_type(instance_type: str) -> Provider:
    """The registered provider whose type names start like ``instance_type`` (AWS for the rest)."""
    return PROVIDERS[provider_of_type(instance_type, tuple(PROVIDERS))]


def provider_of_type(instance_type: str, among: Sequence[str]) -> str:
    """The provider in ``among`` whose type names start like ``instance_type`` (the longest
    prefix wins; a provider with no prefix takes the rest)."""
    best = ""
    length = -1
    for name in among:
        prefix = PROVIDERS[name].type_prefix if name in PROVIDERS else ""
        if instance_type.startswith(prefix) and len(prefix) > length:
            best, length = name, len(prefix)
    if not best:
        raise BackendError(f"no watched cloud offers {instance_type!r}")
    return best


class CloudSet:
    """The clouds of one session as one :class:`CloudBackend` and :class:`Provisioner`."""

    def __init__(self, members: Sequence[Any]) -> None:
        self.members = {m.name: m for m in members}
        self.name = ",".join(self.members)
        self.capabilities = frozenset[Capability]().union(*(m.capabilities for m in members))
        self.regions = tuple(dict.fromkeys(r for m in members for r in getattr(m, "regions", ())))
        self.min_interval = max((getattr(m, "min_interval", 0.0) for m in members), default=0.0)
        self.poll_timeout = max((getattr(m, "poll_timeout", 10.0) for m in members), default=10.0)
        self._owner: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        """A capability only some members have (billing reports, run history, volumes, roles,
        keys): the set has it when a member has it, and calls go to that member; a call about a
        region another member watches, or an instance another member owns, answers nothing."""
        members = self.__dict__.get("members") or {}
        owners = [m for m in members.values() if not name.startswith("_") and hasattr(m, name)]
        if not owners:
            raise AttributeError(name)
        owner = owners[0]
        found = getattr(owner, name)
        if name == "volumes":
            return lambda region: () if self._watched_elsewhere(owner, region) else found(region)
        if name == "instance_history":  # the owning member's own trail (CloudTrail, ActionTrail)
            def history(region: str, instance_id: str, since: float, until: float) -> tuple:
                provider = provider_of_id(instance_id)
                member = self.members.get(self._owner.get(instance_id) or (provider.name if provider else owner.name))
                return member.instance_history(region, instance_id, since, until) if member in owners else ()
            return history
        return found  # billing reports stay one cloud's: a bill in one currency is never added to another

    def _watched_elsewhere(self, owner: Any, region: str) -> bool:
        return any(region in getattr(m, "regions", ()) for m in self.members.values() if m is not owner)

    def poll_instances(self) -> CloudReading:
        """Every member's instances; a failing member fails the poll, its message naming it
        (spend never looks smaller because one cloud did not answer)."""
        instances: list[Instance] = []
        for name, member in self.members.items():
            try:
                reading = member.poll_instances()
            except BackendError as exc:
                raise type(exc)(f"{name}: {exc}") from None
            instances.extend(reading.instances)
        self._owner = {i.instance_id: i.cloud for i in instances}
        return CloudReading(tuple(instances), taken_at=time.time())

    def close(self) -> None:
        for member in self.members.values():
            member.close()

    # ----------------------------------------------------------------- routing

    def _by_region(self, region: str) -> Any:
        for member in self.members.values():
            if region in getattr(member, "regions", ()):
                return member
        return next(iter(self.members.values()))

    def _by_instance(self, instance_id: str) -> Any:
        name = self._owner.get(instance_id)
        if name is None:
            provider = provider_of_id(instance_id)
            name = provider.name if provider else ""
        if name not in self.members:
            raise BackendError(f"{instance_id}: no watched cloud owns this instance")
        return self.members[name]

    def instance_types(self, region: str) -> tuple:
        return self._by_region(region).instance_types(region)

    def on_demand_prices(self, regions: tuple[str, ...]) -> tuple:
        return tuple(p for m in self.members.values()
                     for p in m.on_demand_prices(tuple(r for r in regions if r in getattr(m, "regions", ()))))

    def spot_prices(self, region: str, instance_types: tuple[str, ...], since: float) -> tuple:
        return self._by_region(region).spot_prices(region, instance_types, since)

    def offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        return self._by_region(region).offerings(region, instance_types)

    def subnets(self, region: str) -> tuple:
        return self._by_region(region).subnets(region)

    def security_groups(self, region: str) -> tuple:
        return self._by_region(region).security_groups(region)

    def key_pairs(self, region: str) -> tuple:
        return self._by_region(region).key_pairs(region)

    def default_image(self, region: str, workload: Any) -> Any:
        return self._by_region(region).default_image(region, workload)

    def launch(self, spec: LaunchSpec, *, dry_run: bool = False) -> tuple[Instance, ...]:
        member = self.members[provider_of_type(spec.instance_type, tuple(self.members))]
        return member.launch(spec, dry_run=dry_run)

    def start(self, region: str, instance_id: str) -> None:
        self._by_instance(instance_id).start(region, instance_id)

    def stop(self, region: str, instance_id: str) -> None:
        self._by_instance(instance_id).stop(region, instance_id)

    def reboot(self, region: str, instance_id: str) -> None:
        self._by_instance(instance_id).reboot(region, instance_id)

    def power_off(self, region: str, instance_id: str) -> None:
        """Power off only (Azure): the VM stays allocated and still bills; other clouds refuse."""
        member = self._by_instance(instance_id)
        if not hasattr(member, "power_off"):
            raise NotSupported(f"{member.name} has no power-off apart from stop")
        member.power_off(region, instance_id)

    def terminate(self, region: str, instance_id: str) -> None:
        self._by_instance(instance_id).terminate(region, instance_id)


def per_instance(rows: Sequence[tuple[str, str, float]]) -> tuple[CostLine, ...]:
    """A bill's ``(instance id, day, amount)`` rows as one cost line per instance (a cloud whose
    bill is per resource answers ``cost_and_usage`` so: the console groups by tags itself)."""
    totals: dict[str, float] = {}
    for instance_id, _day, amount in rows:
        totals[instance_id] = totals.get(instance_id, 0.0) + amount
    return tuple(CostLine("instance", i, round(a, 6)) for i, a in sorted(totals.items()))
