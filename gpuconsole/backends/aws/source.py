"""The real AWS backend: EC2 instances, their history and billing, and launches through boto3.

:class:`AwsCloud` is both a :class:`~gpuconsole.backends.base.CloudBackend` (the instances pane
polls it) and a :class:`~gpuconsole.backends.base.Provisioner` (the launch wizard asks its
catalog, :mod:`catalog`, then launches). A thin translator: JSON → model is :mod:`mapping`, the
``RunInstances`` request :mod:`ec2_request`, sessions and clients :mod:`session`.
"""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gpuconsole.backends.aws import billing as aws_billing
from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.catalog import (
    COST_EXPLORER_REGION,
    DLAMI_NAME,
    DLAMI_PARAMETER,
    PRICING_REGION,
    AwsCatalog,
)
from gpuconsole.backends.aws.ec2_request import run_instances_params
from gpuconsole.backends.aws.mapping import error_code
from gpuconsole.backends.aws.session import new_session
from gpuconsole.backends.base import (
    BackendThrottled,
    Capability,
    CapacityError,
    DryRunFailed,
)
from gpuconsole.model import CloudReading, Instance, LaunchSpec, Volume

__all__ = ["COST_EXPLORER_REGION", "DLAMI_NAME", "DLAMI_PARAMETER", "LAUNCH_BACKOFF_S", "PRICING_REGION", "AwsCloud"]

log = logging.getLogger(__name__)

LAUNCH_BACKOFF_S = 0.5  # first wait after a throttled RunInstances; doubles up to 8 s


class AwsCloud(AwsCatalog):
    """EC2 in one or more regions, behind the console's cloud and provisioning interfaces.

    The constructor only stores settings (see :class:`~gpuconsole.backends.aws.session.AwsSession`);
    the session and clients are made on first use, from a worker thread.
    """

    name = "aws"
    # EC2's API is rate-limited per account and shared with every other tool: the Hub polls it
    # no faster than this, and gives a multi-region poll (with retries) this long to answer.
    min_interval = 15.0
    poll_timeout = 45.0
    capabilities = frozenset({
        Capability.LAUNCH, Capability.STOP, Capability.TERMINATE, Capability.SPOT, Capability.PRICES,
    })

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
            session = new_session(self._profile)
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
