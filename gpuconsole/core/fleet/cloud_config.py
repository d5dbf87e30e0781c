"""Each cloud's own table of the configuration file, beyond ``[aws]``: ``[alibaba]`` and ``[azure]``.

::

    [alibaba]
    regions = ["cn-hangzhou", "cn-shanghai"]         # required: the regions to watch
    endpoint = "https://ecs.cn-hangzhou.aliyuncs.com"  # optional: a full URL (a VPC endpoint, a test peer)
    profile = "gpu"                                   # optional: ~/.alibabacloud/credentials profile
    currency = "CNY"                                  # until ECS's DescribePrice names it
    sts_endpoint = "https://sts.aliyuncs.com"         # optional: STS (GetCallerIdentity, AssumeRole)
    session_seconds = 3600                            # optional: how long a role session lasts
    billing_endpoint = "https://business.aliyuncs.com"  # optional: BSS OpenAPI, what instances cost
    trail_endpoint = "https://actiontrail.cn-hangzhou.aliyuncs.com"  # optional: ActionTrail, when they ran
    # (without them: endpoint when it is set, else Alibaba Cloud's own hosts)

    [alibaba.roles]                                   # optional: a RAM role per gpuconsole role
    admin = "acs:ram::1234567890123456:role/gpuconsole-admin"
    developer = "acs:ram::1234567890123456:role/gpuconsole-developer"

    [azure]
    subscription_id = "8f3c2a1e-4b5d-4c6e-9f70-1a2b3c4d5e6f"   # required
    resource_groups = ["gpu-rg"]                     # optional: only these groups (else the subscription)
    regions = ["eastus"]                             # optional: the locations offered for launches
    subnet_id = "/subscriptions/…/virtualNetworks/gpu/subnets/default"  # optional: a launch's subnet
    arm_endpoint = "https://management.usgovcloudapi.net"  # optional: a sovereign cloud, a test peer
    prices_endpoint = "https://prices.azure.com/api/retail/prices"  # optional

Regions of a cloud come from its own table; ``--region`` stays AWS's. Nothing is read from the
network to decide: with ``--cloud auto`` Alibaba Cloud is watched exactly when the table has
regions, Azure exactly when ``[azure]`` names a subscription.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from gpuconsole.backends import registry
from gpuconsole.core.config import ConfigError, config_path
from gpuconsole.core.config_decode import TableError, decode_table

ALIBABA_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+(-\d{1,2})?$")
_Text = Annotated[str, msgspec.Meta(min_length=1)]


class AlibabaTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The ``[alibaba]`` table as written."""

    regions: Annotated[tuple[_Text, ...], msgspec.Meta(min_length=1)]
    endpoint: _Text | None = None
    profile: _Text | None = None
    currency: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}$", description="a currency code such as CNY")] = "CNY"
    sts_endpoint: _Text = "https://sts.aliyuncs.com"
    billing_endpoint: _Text | None = None
    trail_endpoint: _Text | None = None
    roles: dict[str, Any] | None = None  # [alibaba.roles]: checked by core.access.alibaba_roles
    session_seconds: Any = 3600  # likewise


def _table(explicit: Path | str | None, env: Mapping[str, str], name: str, shape: type, region: re.Pattern[str],
           region_word: str, example: str) -> tuple[Path, Any] | None:
    """``(file, the [name] table decoded as shape)``; None without the table or a readable file.

    Raises:
        ConfigError: an unknown key, a bad value, or a region not of ``region``'s form (one line).
    """
    path, _named = config_path(explicit, env)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # the budgets' reading of the same file reports these
    table = data.get(name)
    if table is None:
        return None
    try:
        decoded = decode_table(table, shape)
    except TableError as exc:
        raise ConfigError(f"{path}: [{name}] key {exc.key or name}: {exc.problem}") from None
    for found in decoded.regions:
        if not region.match(found):
            raise ConfigError(f"{path}: [{name}] key regions: not {region_word}: {found!r} (e.g. {example})")
    return path, decoded


def alibaba_settings(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> Any:
    """The ``[alibaba]`` table as the adapter's settings; None without one.

    Raises:
        ConfigError: an unknown key, a bad region or endpoint (one line naming file and key).
    """
    found = _table(explicit, env, "alibaba", AlibabaTable, ALIBABA_REGION, "an Alibaba Cloud region", "cn-hangzhou")
    if found is None:
        return None
    path, decoded = found
    try:
        return registry.alibaba_settings(regions=tuple(dict.fromkeys(decoded.regions)), endpoint=decoded.endpoint,
                                         profile=decoded.profile, currency=decoded.currency,
                                         sts_endpoint=decoded.sts_endpoint, billing_endpoint=decoded.billing_endpoint or "",
                                         trail_endpoint=decoded.trail_endpoint or "")
    except ValueError as exc:
        raise ConfigError(f"{path}: [alibaba] key endpoint: {exc}") from None


AZURE_LOCATION = re.compile(r"^[a-z][a-z0-9]{2,30}$")
_SUBSCRIPTION = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


class AzureTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The ``[azure]`` table as written."""

    subscription_id: Annotated[str, msgspec.Meta(pattern=_SUBSCRIPTION, description="a subscription id (a GUID)")]
    resource_groups: tuple[_Text, ...] = ()
    regions: tuple[_Text, ...] = ()
    subnet_id: _Text | None = None
    admin_username: _Text = "azureuser"
    arm_endpoint: _Text = "https://management.azure.com"
    prices_endpoint: _Text = "https://prices.azure.com/api/retail/prices"
    scheduled_events: _Text | None = None


def azure_settings(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> Any:
    """The ``[azure]`` table as the adapter's settings; None without one.

    Raises:
        ConfigError: an unknown key, a bad subscription id, location or URL (one line naming file and key).
    """
    found = _table(explicit, env, "azure", AzureTable, AZURE_LOCATION, "an Azure location", "eastus")
    if found is None:
        return None
    path, decoded = found
    try:
        return registry.azure_settings(
            subscription_id=decoded.subscription_id, resource_groups=tuple(dict.fromkeys(decoded.resource_groups)),
            regions=tuple(dict.fromkeys(decoded.regions)), subnet_id=decoded.subnet_id or "",
            admin_username=decoded.admin_username, arm_endpoint=decoded.arm_endpoint,
            prices_endpoint=decoded.prices_endpoint, scheduled_events=decoded.scheduled_events or "")
    except ValueError as exc:
        raise ConfigError(f"{path}: [azure] key {exc}") from None
