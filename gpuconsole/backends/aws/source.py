"""The real AWS backend: EC2 instances, the catalog, prices and launches through boto3.

:class:`AwsCloud` is both a :class:`~gpuconsole.backends.base.CloudBackend` (the instances pane
polls it) and a :class:`~gpuconsole.backends.base.Provisioner` (the launch wizard asks it what
exists and what it costs, then launches). It is a thin translator: JSON → model lives in
:mod:`gpuconsole.backends.aws.mapping`, the ``RunInstances`` request in
:mod:`gpuconsole.backends.aws.ec2_request`; caching and joins with the catalog live in ``core``.

Credentials, regions and endpoints come the way the AWS CLI finds them (environment, profiles,
SSO, instance role; ``AWS_ENDPOINT_URL*``), so the console works wherever ``aws`` works and the
tests reach a local moto server without any test-only switch in this module.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.credentials import DeferredRefreshableCredentials
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
)

from gpuconsole.backends.aws import billing as aws_billing
from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.ec2_request import run_instances_params
from gpuconsole.backends.aws.mapping import (
    CREDENTIALS_HINT,
    REGION_HINT,
    SSO_ERRORS,
    SSO_HINT,
    error_code,
)
from gpuconsole.backends.base import (
    BackendError,
    BackendThrottled,
    BackendUnavailable,
    Capability,
    CapacityError,
    DryRunFailed,
    NotSupported,
)
from gpuconsole.model import (
    CloudReading,
    CostLine,
    Instance,
    InstanceType,
    KeyPair,
    LaunchSpec,
    MachineImage,
    RegionPrice,
    SecurityGroup,
    SpotPrice,
    Subnet,
    Volume,
    Workload,
)

log = logging.getLogger(__name__)

# The Pricing API answers only from a few regions; us-east-1 serves every commercial region.
PRICING_REGION = "us-east-1"
# Cost Explorer has one endpoint, in us-east-1, for the whole account.
COST_EXPLORER_REGION = "us-east-1"

# Both workloads start from the Base OSS NVIDIA driver DLAMI: driver, CUDA, Docker and the NVIDIA
# container toolkit, with frameworks pulled as containers. AWS keeps the id of the newest build
# of each DLAMI in a public SSM parameter per region.
DLAMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
DLAMI_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)"


_models_lock = threading.Lock()
_models: Any = None  # botocore's data loader, shared by every session this module creates


def _new_session(profile: str | None) -> boto3.session.Session:
    """A boto3 session whose service models are parsed once per process, not once per session.

    botocore caches the JSON models it parses (EC2's is megabytes) in the session's data loader;
    sharing that loader lets a console that rebuilds its backend (a profile or region switch, a
    reconnect) skip a fifth of a second of parsing per client.
    """
    global _models
    core = botocore.session.get_session()
    with _models_lock:
        if _models is None:
            _models = core.get_component("data_loader")
        else:
            core.register_component("data_loader", _models)
        session = boto3.session.Session(botocore_session=core, profile_name=profile)
        paths = _models.search_paths  # boto3 appends its own data folder once per session
        paths[:] = list(dict.fromkeys(paths))
    # A fresh loader reads the profile and would have failed on a missing one; a shared one does
    # not, so check here (``profile_name`` is AWS_PROFILE's value when no profile was passed).
    if session.profile_name != "default" and session.profile_name not in session.available_profiles:
        raise ProfileNotFound(profile=session.profile_name)
    return session


class _RefreshReported(logging.Filter):
    """Drops botocore's traceback of a failed credential refresh when the refresh is ours: the
    error is re-raised to the caller, which reports it in one line (and audits it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], BackendError))


logging.getLogger("botocore.credentials").addFilter(_RefreshReported())

LAUNCH_BACKOFF_S = 0.5  # first wait after a throttled RunInstances; doubles up to 8 s


class AwsCloud:
    """EC2 in one or more regions, behind the console's cloud and provisioning interfaces.

    The constructor only stores settings: the UI builds this object on its own thread, and
    resolving credentials can mean reading SSO caches or calling STS. The boto3 session and one
    client per (service, region) are created on first use, from a worker thread.
    """

    name = "aws"
    # EC2's API is rate-limited per account and shared with every other tool: the Hub polls it
    # no faster than this, and gives a multi-region poll (with retries) this long to answer.
    min_interval = 15.0
    poll_timeout = 45.0
    capabilities = frozenset({
        Capability.LAUNCH, Capability.STOP, Capability.TERMINATE, Capability.SPOT, Capability.PRICES,
    })

    def __init__(
        self,
        regions: tuple[str, ...] = (),
        profile: str | None = None,
        *,
        all_types: bool = False,
        connect_timeout: float = 5,
        read_timeout: float = 20,
        max_attempts: int = 5,
    ) -> None:
        """Store settings; nothing here touches the network or the credential chain.

        Args:
            regions: regions to watch; empty means the profile's / environment's region.
            profile: a named profile of ``~/.aws/config``; ``None`` uses the default chain.
            all_types: list every instance in polls, not only NVIDIA GPU families.
            connect_timeout: seconds to open a connection to an endpoint.
            read_timeout: seconds to wait for an answer once connected.
            max_attempts: tries per call, the first included, in botocore's "standard" retry
                mode (throttling, 5xx and connection errors are retried with backoff).
        """
        self._explicit_regions = tuple(regions)
        self._profile = profile
        self._all_types = all_types
        self._config = Config(
            # total_max_attempts counts the first try; botocore's max_attempts would not.
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            user_agent_extra="gpuconsole",
        )
        self._max_attempts = max_attempts
        # RunInstances is retried by launch() itself: botocore would retry a capacity error
        # (a 5xx) max_attempts times before the launcher could move on to the next zone.
        self._launch_config = self._config.merge(Config(retries={"mode": "standard", "total_max_attempts": 1}))
        self._lock = threading.RLock()  # boto3 session and client creation are not thread-safe
        self._session: boto3.session.Session | None = None
        self._clients: dict[tuple[str, str, str], Any] = {}
        self._secrets: tuple[str, ...] = ()  # credential values, cut out of any message
        self._credentials_checked = False
        self._refresh: Callable[[], dict[str, str]] | None = None

    # ----------------------------------------------------------------- session and clients

    def use_credentials(self, refresh: Callable[[], dict[str, str]] | None) -> None:
        """Make every later call with the credentials ``refresh`` gives instead of the login's own.

        ``refresh`` has botocore's refresh shape (``access_key``, ``secret_key``, ``token``,
        ``expiry_time``): botocore calls it on first use and again shortly before they expire.
        It is how a role session of ``[aws.roles]`` reaches every client; ``None`` goes back to
        the login's credential chain.
        """
        self.close()
        with self._lock:
            self._refresh = refresh
            self._session = None
            self._credentials_checked = False

    @property
    def profile(self) -> str | None:
        """The named profile in use (``None``: the default chain)."""
        return self._profile

    @property
    def regions(self) -> tuple[str, ...]:
        """The regions watched: the explicit ones, else the session's; ``()`` when unknown."""
        try:
            return self._configured_regions()
        except BackendError:
            return ()

    def _boto_session(self) -> boto3.session.Session:
        with self._lock:
            if self._session is None:
                try:
                    session = _new_session(self._profile)
                except ProfileNotFound as exc:
                    raise BackendUnavailable(f"AWS profile {exc.kwargs.get('profile')!r} not found",
                                             hint="`aws configure list-profiles` shows the profiles there are") from exc
                if self._refresh is not None:
                    # boto3 has no public setter for refreshable credentials: this is what its
                    # own assume-role provider leaves on the botocore session.
                    session._session._credentials = DeferredRefreshableCredentials(self._refresh, "assume-role")
                self._session = session
            return self._session

    def _configured_regions(self) -> tuple[str, ...]:
        if self._explicit_regions:
            return self._explicit_regions
        try:
            region = self._boto_session().region_name
        except BotoCoreError as exc:  # a config file that cannot be read
            raise BackendUnavailable(f"AWS configuration unreadable: {aws_mapping.one_line(str(exc))}",
                                     hint=REGION_HINT) from exc
        if not region:
            raise BackendUnavailable("no AWS region configured", hint=REGION_HINT)
        return (region,)

    def _check_credentials(self) -> None:
        """Resolve the credential chain once, so a missing login reads as one clear message."""
        with self._lock:
            if self._credentials_checked:
                return
            session = self._boto_session()
            try:
                credentials = session.get_credentials()
                frozen = credentials.get_frozen_credentials() if credentials is not None else None
            except SSO_ERRORS as exc:
                raise BackendUnavailable("the AWS SSO login has expired or is missing", hint=SSO_HINT) from exc
            except (NoCredentialsError, PartialCredentialsError) as exc:
                raise BackendUnavailable(f"no usable AWS credentials: {aws_mapping.one_line(str(exc))}", hint=CREDENTIALS_HINT) from exc
            except BotoCoreError as exc:
                raise BackendUnavailable(f"AWS credentials could not be loaded: {aws_mapping.one_line(str(exc))}",
                                         hint=CREDENTIALS_HINT) from exc
            if frozen is None or not frozen.access_key:
                raise BackendUnavailable("no AWS credentials found", hint=CREDENTIALS_HINT)
            self._secrets = tuple(v for v in (frozen.access_key, frozen.secret_key, frozen.token) if v)
            self._credentials_checked = True

    def _client(self, service: str, region: str, *, purpose: str = "") -> Any:
        """The one client for ``(service, region)`` (and ``purpose``: "launch" retries nothing
        by itself); created under the lock on first use."""
        self._check_credentials()
        with self._lock:
            client = self._clients.get((service, region, purpose))
            if client is None:
                config = self._launch_config if purpose == "launch" else self._config
                with self._errors(region):
                    client = self._boto_session().client(service, region_name=region, config=config)
                self._clients[(service, region, purpose)] = client
            return client

    def close(self) -> None:
        """Drop the clients (and their connection pools); the next call makes new ones."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a pool must never fail an exit
                log.debug("closing an AWS client failed", exc_info=True)

    # ----------------------------------------------------------------- errors

    def _translate(self, exc: Exception, where: str = "") -> BackendError:
        return aws_mapping.backend_error(exc, where, secrets=self._secrets)

    @contextmanager
    def _errors(self, where: str = "") -> Iterator[None]:
        """Run AWS calls and their mapping; only :class:`BackendError` subclasses come out.

        botocore's exceptions go through :func:`aws_mapping.backend_error`; a ``KeyError`` or
        ``ValueError`` while mapping means an answer of a shape we do not know (a new instance
        state, a field missing), which is the cloud's answer failing, not the console.
        """
        try:
            yield
        except BackendError:
            raise
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, where) from exc
        except (KeyError, ValueError, TypeError) as exc:
            prefix = f"{where}: " if where else ""
            raise BackendError(f"{prefix}unexpected answer from AWS ({type(exc).__name__}: {exc})") from exc

    @staticmethod
    def _items(client: Any, operation: str, key: str, **kwargs: Any) -> list[Any]:
        """Every ``key`` item of every page of ``operation``."""
        return [item for page in client.get_paginator(operation).paginate(**kwargs) for item in page.get(key, ())]

    # ----------------------------------------------------------------- CloudBackend

    def poll_instances(self) -> CloudReading:
        """Instances of every watched region, fetched side by side; one failing region fails it.

        Raises:
            BackendError: the first failing region's error, its message starting with the region.
        """
        regions = self._configured_regions()
        if len(regions) == 1:
            instances = self._instances_in(regions[0])
        else:
            with ThreadPoolExecutor(max_workers=min(8, len(regions)), thread_name_prefix="aws-poll") as pool:
                futures = [pool.submit(self._instances_in, region) for region in regions]
                instances = [i for future in futures for i in future.result()]
        return CloudReading(tuple(instances), taken_at=time.time())

    def _instances_in(self, region: str) -> list[Instance]:
        """One region's instances; GPU families are picked here, not with a server-side filter.

        EC2 accepts ``instance-type`` filters with wildcards (``p4d.*``), but emulators such as
        moto match filter values literally, and a page holds up to 1000 instances anyway.
        """
        ec2 = self._client("ec2", region)
        with self._errors(region):
            raws = [i for r in self._items(ec2, "describe_instances", "Reservations") for i in r.get("Instances", ())]
            if not self._all_types:
                raws = [r for r in raws if aws_mapping.is_nvidia_gpu_type(r.get("InstanceType", ""))]
            requests = self._spot_requests(ec2, region, sorted({r["SpotInstanceRequestId"] for r in raws
                                                                if r.get("SpotInstanceRequestId")}))
            return [aws_mapping.instance(r, region, requests.get(r.get("SpotInstanceRequestId", ""))) for r in raws]

    def _spot_requests(self, ec2: Any, region: str, request_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The spot requests behind spot instances, by id: their status code (why a spot instance
        stopped), type and interruption behaviour (whether a budget may stop it). Optional, so
        failures pass: the instances then carry no spot kind, and nothing acts on them."""
        if not request_ids:
            return {}
        try:
            answer = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=request_ids)
            return {r["SpotInstanceRequestId"]: r for r in answer.get("SpotInstanceRequests", ())}
        except (ClientError, BotoCoreError, KeyError) as exc:
            log.info("spot requests unavailable in %s: %s", region, exc)
            return {}

    # ----------------------------------------------------------------- Provisioner: catalog

    def instance_types(self, region: str) -> tuple[InstanceType, ...]:
        """The NVIDIA GPU types of the region, as ``DescribeInstanceTypes`` describes them.

        Asked for by family (``p4d.*`` …, see :data:`~gpuconsole.backends.aws.mapping.NVIDIA_GPU_FAMILIES`)
        so the catalog offers exactly the types the instances pane lists, in two pages instead
        of ten; ``GpuInfo`` then decides the GPU model, count and memory.
        """
        ec2 = self._client("ec2", region)
        with self._errors(region):
            raws = self._items(
                ec2, "describe_instance_types", "InstanceTypes",
                Filters=[{"Name": "instance-type", "Values": aws_mapping.family_patterns()}],
            )
            types = [t for t in map(aws_mapping.instance_type, raws) if t is not None]
        return tuple(sorted(types, key=lambda t: t.name))

    def on_demand_prices(self, regions: tuple[str, ...]) -> tuple[RegionPrice, ...]:
        """Linux, shared-tenancy, on-demand prices of GPU instances from the Pricing API.

        One filtered ``GetProducts`` listing per region (``instanceFamily`` "GPU instance"),
        rather than one call per type and region.

        Raises:
            NotSupported: the endpoint answers but not as the Pricing API does (a local emulator
                without it, a partition without it); callers fall back to bundled prices.
        """
        pricing = self._client("pricing", PRICING_REGION)
        prices: dict[tuple[str, str], RegionPrice] = {}
        for region in regions:
            filters = [
                {"Type": "TERM_MATCH", "Field": name, "Value": value}
                for name, value in (
                    ("regionCode", region), ("operatingSystem", "Linux"), ("tenancy", "Shared"),
                    ("preInstalledSw", "NA"), ("capacitystatus", "Used"), ("instanceFamily", "GPU instance"),
                )
            ]
            try:
                with self._errors("Pricing API"):
                    entries = self._items(pricing, "get_products", "PriceList", ServiceCode="AmazonEC2", Filters=filters)
                    found = [p for p in (aws_mapping.on_demand_price(e, region) for e in entries) if p is not None]
            except BackendError as exc:
                cause = exc.__cause__
                if isinstance(cause, ClientError) and error_code(cause).isdigit():
                    # botocore names an error by its HTTP status when the body is not AWS's
                    raise NotSupported(f"the Pricing API is not available at this endpoint (HTTP {error_code(cause)})") from cause
                raise
            for price in found:  # a type can be listed twice (license variants): keep the lower
                key = (price.instance_type, region)
                if key not in prices or price.price < prices[key].price:
                    prices[key] = price
        return tuple(sorted(prices.values(), key=lambda p: (p.region, p.instance_type)))

    def spot_prices(self, region: str, instance_types: tuple[str, ...], since: float) -> tuple[SpotPrice, ...]:
        """Linux/UNIX spot price history since ``since``, oldest first."""
        if not instance_types:
            return ()
        ec2 = self._client("ec2", region)
        with self._errors(region):
            raws = self._items(
                ec2, "describe_spot_price_history", "SpotPriceHistory",
                InstanceTypes=list(instance_types), ProductDescriptions=["Linux/UNIX"],
                StartTime=datetime.fromtimestamp(since, tz=UTC),
            )
            prices = [aws_mapping.spot_price(r) for r in raws]
        return tuple(sorted(prices, key=lambda p: (p.ts, p.availability_zone)))

    def offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Zones offering each type; a type offered nowhere in the region maps to ``()``."""
        if not instance_types:
            return {}
        ec2 = self._client("ec2", region)
        zones: dict[str, set[str]] = {t: set() for t in instance_types}
        with self._errors(region):
            raws = self._items(
                ec2, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": list(instance_types)}],
            )
            for raw in raws:
                zones.setdefault(raw["InstanceType"], set()).add(raw["Location"])
        return {t: tuple(sorted(z)) for t, z in zones.items()}

    def subnets(self, region: str) -> tuple[Subnet, ...]:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            subnets = [aws_mapping.subnet(r) for r in self._items(ec2, "describe_subnets", "Subnets")]
        return tuple(sorted(subnets, key=lambda s: (s.vpc_id, s.availability_zone, s.subnet_id)))

    def security_groups(self, region: str) -> tuple[SecurityGroup, ...]:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            groups = [aws_mapping.security_group(r) for r in self._items(ec2, "describe_security_groups", "SecurityGroups")]
        return tuple(sorted(groups, key=lambda g: (g.vpc_id, g.name)))

    def key_pairs(self, region: str) -> tuple[KeyPair, ...]:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            keys = [aws_mapping.key_pair(r) for r in ec2.describe_key_pairs().get("KeyPairs", ())]  # one page
        return tuple(sorted(keys, key=lambda k: k.name))

    def default_image(self, region: str, workload: Workload) -> MachineImage:
        """The newest Base OSS NVIDIA driver DLAMI in ``region`` (the same for both workloads)."""
        ssm = self._client("ssm", region)
        try:
            with self._errors(region):
                image_id = ssm.get_parameter(Name=DLAMI_PARAMETER)["Parameter"]["Value"]
        except BackendError as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and error_code(cause) == "ParameterNotFound":
                raise BackendError(f"no Deep Learning AMI parameter in {region}; enter an AMI id") from cause
            raise
        return MachineImage(image_id=image_id, name=DLAMI_NAME, source=DLAMI_PARAMETER)

    def cost_and_usage(self, start: float, end: float, group_by_tag: str | None = None) -> tuple[CostLine, ...]:
        """The account's actual spend (unblended, daily) from Cost Explorer over ``[start, end)``,
        in whole UTC days; per day, or per value of tag ``group_by_tag``.

        Each request costs money (a cent a page): callers bound how often this runs
        (:class:`gpuconsole.core.money.cost_explorer.CostExplorer`). Pages are followed, at most 20.
        """
        ce = self._client("ce", COST_EXPLORER_REGION)
        params: dict[str, Any] = {
            "TimePeriod": aws_mapping.cost_period(start, end),
            "Granularity": "DAILY",
            "Metrics": [aws_mapping.COST_METRIC],
        }
        if group_by_tag:
            params["GroupBy"] = [{"Type": "TAG", "Key": group_by_tag}]
        pages: list[dict[str, Any]] = []
        with self._errors("Cost Explorer"):
            token = None
            for _ in range(20):
                page = ce.get_cost_and_usage(**params, **({"NextPageToken": token} if token else {}))
                pages.append(page)
                token = page.get("NextPageToken")
                if not token:
                    break
            return aws_mapping.cost_lines(pages, group_by_tag)

    # ----------------------------------------------------------------- history and billing

    def volumes(self, region: str) -> tuple[Volume, ...]:
        """Every EBS volume of ``region`` (``DescribeVolumes``), attached or not."""
        ec2 = self._client("ec2", region)
        with self._errors(region):
            return aws_billing.volumes(ec2)

    def instance_history(self, region: str, instance_id: str, since: float, until: float) -> tuple[tuple[float, bool], ...]:
        """When the instance started (True) and stopped (False) within ``[since, until)``, from
        CloudTrail's ``LookupEvents`` (the last 90 days).

        Raises:
            BackendError: CloudTrail refused (no ``cloudtrail:LookupEvents`` permission) or failed.
        """
        trail = self._client("cloudtrail", region)
        with self._errors(f"CloudTrail ({region})"):
            return aws_billing.trail_events(trail, instance_id, since, until)

    def resource_costs(self, start: float, end: float) -> tuple[tuple[str, str, float], ...]:
        """``(resource id, UTC day, dollars)`` of EC2 instances and volumes over ``[start, end)``
        from ``GetCostAndUsageWithResources`` (billed per request: callers bound how often)."""
        ce = self._client("ce", COST_EXPLORER_REGION)
        with self._errors("Cost Explorer"):
            return aws_billing.resource_costs(ce, start, end)

    # ----------------------------------------------------------------- Provisioner: actions

    def launch(self, spec: LaunchSpec, *, dry_run: bool = False) -> tuple[Instance, ...]:
        """Send ``RunInstances`` exactly as :func:`run_instances_params` builds it.

        A dry run that EC2 would accept comes back as the ``DryRunOperation`` error; any other
        refusal of a dry run becomes :class:`DryRunFailed`, except capacity and throttling,
        which keep their types so the caller can try another zone or wait.
        """
        ec2 = self._client("ec2", spec.region, purpose="launch")
        params = run_instances_params(spec, dry_run=dry_run)
        params["ClientToken"] = uuid.uuid4().hex  # a retry of this launch never launches twice
        for attempt in range(1, self._max_attempts + 1):
            try:
                answer = ec2.run_instances(**params)
                break
            except (ClientError, BotoCoreError) as exc:
                if dry_run and isinstance(exc, ClientError) and error_code(exc) == "DryRunOperation":
                    return ()
                error = self._translate(exc)
                if isinstance(error, BackendThrottled) and attempt < self._max_attempts:
                    time.sleep(min(LAUNCH_BACKOFF_S * 2 ** (attempt - 1), 8.0))
                    continue
                if dry_run and isinstance(exc, ClientError) and not isinstance(error, (CapacityError, BackendThrottled)):
                    raise DryRunFailed(str(error)) from exc
                raise error from exc
        with self._errors(f"{spec.region}: launched, but"):
            return tuple(aws_mapping.instance(raw, spec.region) for raw in answer.get("Instances", ()))

    def start(self, region: str, instance_id: str) -> None:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            ec2.start_instances(InstanceIds=[instance_id])

    def stop(self, region: str, instance_id: str) -> None:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            ec2.stop_instances(InstanceIds=[instance_id])

    def reboot(self, region: str, instance_id: str) -> None:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            ec2.reboot_instances(InstanceIds=[instance_id])

    def terminate(self, region: str, instance_id: str) -> None:
        ec2 = self._client("ec2", region)
        with self._errors(region):
            ec2.terminate_instances(InstanceIds=[instance_id])

    def access_keys(self) -> tuple[tuple[str, float, bool, bool], ...]:
        """The IAM access keys of the identity in use: ``(key id, created, active, in use)``.

        For the key-age alert; an identity that is not an IAM user (an SSO role, an instance
        profile) has none, and the answer is empty. Under a role session (``use_credentials``)
        the keys are the login's own, the ones ``keys rotate`` renews.
        """
        if self._refresh is not None:
            return self._login_access_keys()
        self._check_credentials()
        in_use = self._secrets[0] if self._secrets else ""
        if in_use.startswith("ASIA"):
            return ()  # temporary credentials of a role: no long-lived key to age
        region = self.regions[0] if self.regions else "us-east-1"
        return self._list_keys(self._client("iam", region), in_use)

    def _login_access_keys(self) -> tuple[tuple[str, float, bool, bool], ...]:
        with self._errors("IAM"):
            session = _new_session(self._profile)
            credentials = session.get_credentials()
            in_use = credentials.get_frozen_credentials().access_key if credentials is not None else ""
            if not in_use or in_use.startswith("ASIA"):
                return ()
            iam = session.client("iam", region_name=session.region_name or "us-east-1", config=self._config)
        try:
            return self._list_keys(iam, in_use)
        finally:
            iam.close()

    def _list_keys(self, iam: Any, in_use: str) -> tuple[tuple[str, float, bool, bool], ...]:
        with self._errors():
            pages = iam.get_paginator("list_access_keys").paginate()
            keys = [k for page in pages for k in page.get("AccessKeyMetadata", ())]
        return tuple((k["AccessKeyId"], k["CreateDate"].timestamp(), k.get("Status") == "Active",
                      k["AccessKeyId"] == in_use) for k in keys)
