"""Key hygiene alerts for the overview, from the security practice of the deployment guide.

- the AWS access key in use is older than 90 days (IAM ``ListAccessKeys``; AWS only);
- the kubeconfig's client certificate or token expires within 7 days (or has expired);
- an instance the console launched has an unencrypted root volume or allows IMDSv1 (from the
  launch records of the audit log, for the instances still there).

:class:`KeyHygiene` runs in the console's own thread, once at start and then hourly: IAM is
rate-limited and the answers change by the day, not by the second; the launches are checked
every minute (a read of the audit log).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from gpuconsole.backends.base import AccessKeys, BackendError, KubeconfigContexts
from gpuconsole.model import Alert, Instance, InstanceState, Severity

log = logging.getLogger(__name__)

KEY_MAX_AGE_DAYS = 90
ROTATE_COMMAND = "gpuconsole keys rotate"  # what the key-age alert offers (core.access.key_rotation)
EXPIRY_WARN_DAYS = 7
CHECK_EVERY_S = 3600.0  # IAM and the kubeconfig
LAUNCH_CHECK_S = 60.0  # the audit log's launches against the instances there are
DAY = 86400.0
INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")


def aws_key_alerts(keys: Iterable[tuple[str, float, bool, bool]], now: float) -> list[Alert]:
    """An alert for each active access key older than 90 days (the one in use first)."""
    alerts = []
    for key_id, created, active, in_use in sorted(keys, key=lambda k: not k[3]):
        age = (now - created) / DAY
        if active and age > KEY_MAX_AGE_DAYS:
            which = "in use" if in_use else "of this IAM user"
            alerts.append(Alert(Severity.WARNING, "security",
                                f"AWS access key {key_id[:4]}…{key_id[-4:]} {which} is {age:.0f} days old "
                                f"(rotate keys every {KEY_MAX_AGE_DAYS} days: {ROTATE_COMMAND})", now))
    return alerts


def expiry_alerts(expiries: Iterable[tuple[str, float]], now: float) -> list[Alert]:
    """An alert for each credential that expires within 7 days or has expired."""
    alerts = []
    for what, expires in expiries:
        left = (expires - now) / DAY
        if left < 0:
            alerts.append(Alert(Severity.CRITICAL, "security", f"the {what} expired {-left:.0f} day(s) ago", now))
        elif left <= EXPIRY_WARN_DAYS:
            alerts.append(Alert(Severity.WARNING, "security", f"the {what} expires in {_days(left)}", now))
    return alerts


def launch_alerts(records: Sequence[Any], instances: Iterable[Instance], now: float) -> list[Alert]:
    """Instances the console launched (audited launches) that are still there and were launched
    with an unencrypted root volume or with IMDSv1 allowed."""
    live = {i.instance_id for i in instances if i.state not in (InstanceState.TERMINATED, InstanceState.SHUTTING_DOWN)}
    alerts = []
    for record in records:
        if record.action != "launch" or record.result != "ok":
            continue
        params = json.loads(record.params)
        problems = []
        if params.get("encrypted") == "no":
            problems.append("an unencrypted root volume")
        if params.get("imds") == "v1-allowed":
            problems.append("IMDSv1 allowed")
        if not problems:
            continue
        for instance_id in INSTANCE_ID.findall(params.get("outcome", "")):
            if instance_id in live:
                alerts.append(Alert(Severity.WARNING, "security",
                                    f"instance {instance_id} (launched by {record.actor}) has {' and '.join(problems)}", now))
    return alerts


def _days(days: float) -> str:
    if days < 1:
        return f"{days * 24:.0f} h"
    return f"{days:.0f} day(s)"


class KeyHygiene:
    """The three checks over the console's sources and audit log.

    Args:
        cloud: the cloud source (AWS has ``access_keys``; others are skipped).
        jobs: the job source (a Kubernetes one has ``kubeconfig`` and ``context``).
        audit: the audit log (launch records), or None.
    """

    def __init__(self, cloud: object | None, jobs: object | None, audit: Any | None) -> None:
        self.cloud = cloud
        self.jobs = jobs
        self.audit = audit
        self._slow: tuple[float, tuple[object, object], list[Alert]] | None = None

    def check(self, instances: Iterable[Instance], now: float) -> tuple[Alert, ...]:
        """Every alert due now (blocking: IAM, files; call from a worker). The credential checks
        run again after :data:`CHECK_EVERY_S` or when a source was replaced."""
        sources = (self.cloud, self.jobs)
        slow = self._slow
        if slow is None or slow[1] != sources or now - slow[0] >= CHECK_EVERY_S or now < slow[0]:
            slow = self._slow = (now, sources, self._credentials(now))
        alerts = list(slow[2])
        if self.audit is not None:
            try:
                records = self.audit.records(action="launch")
            except Exception as exc:  # noqa: BLE001 - the audit log is checked by audit verify
                log.info("launch records not read: %s", exc)
            else:
                alerts += launch_alerts(records, instances, now)
        return tuple(alerts)

    def _credentials(self, now: float) -> list[Alert]:
        alerts: list[Alert] = []
        if isinstance(self.cloud, AccessKeys):
            try:
                alerts += aws_key_alerts(self.cloud.access_keys(), now)
            except BackendError as exc:
                log.info("access key age not checked: %s", exc)
        if isinstance(self.jobs, KubeconfigContexts) and self.jobs.name.startswith("kube"):
            from gpuconsole.backends.registry import credential_expiries

            try:
                alerts += expiry_alerts(credential_expiries(self.jobs.kubeconfig, self.jobs.context), now)
            except BackendError as exc:
                log.info("kubeconfig expiry not checked: %s", exc)
        return alerts
