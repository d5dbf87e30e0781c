"""CloudWatch Logs as the remote copy of the audit log: a store the login cannot rewrite.

A log group only takes new events (``PutLogEvents``); nobody holding only the put and read
permissions can edit or delete one, so the copy there anchors the local hash chain. This
module is the thin translator: messages in, messages out, botocore's errors as
:class:`~gpuconsole.backends.base.BackendError`. What to send, when, and the queue of what
could not be sent live in :mod:`gpuconsole.core.access.audit_sink`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.session import new_session
from gpuconsole.backends.base import BackendError, BackendUnavailable

# PutLogEvents takes at most 10,000 events and 1,048,576 bytes a call, counting 26 bytes of
# overhead per event; batches stay well inside both.
MAX_BATCH_EVENTS = 1_000
MAX_BATCH_BYTES = 900_000
EVENT_OVERHEAD = 26
CREDENTIALS_HINT = "configure AWS credentials (aws configure, AWS_PROFILE) for the audit sink"


def batches(messages: Sequence[str]) -> Iterator[Sequence[str]]:
    """``messages`` cut into runs that one PutLogEvents call accepts, in order."""
    start, size = 0, 0
    for index, message in enumerate(messages):
        cost = len(message.encode("utf-8")) + EVENT_OVERHEAD
        if index > start and (index - start >= MAX_BATCH_EVENTS or size + cost > MAX_BATCH_BYTES):
            yield messages[start:index]
            start, size = index, 0
        size += cost
    if start < len(messages):
        yield messages[start:]


def default_endpoint(service: str, region: str) -> str:
    """AWS's own endpoint of ``service`` in ``region`` (the China regions' domain differs)."""
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://{service}.{region}.{domain}"


class CloudWatchAuditStore:
    """One CloudWatch Logs group, written one stream per host and login, and read back whole.

    Args:
        group: the log group (created on first use when the credentials may).
        region: its region.
        profile: a named AWS profile; None uses the default credential chain.
        connect_timeout: seconds to open a connection.
        read_timeout: seconds to wait for an answer.
        max_attempts: tries per call in botocore's standard retry mode (5xx, throttling and
            connection errors are retried with backoff).
    """

    def __init__(self, group: str, region: str, *, profile: str | None = None, endpoint_url: str | None = None,
                 connect_timeout: float = 3, read_timeout: float = 10, max_attempts: int = 3) -> None:
        self.group = group
        self.region = region
        # Pinned: given to the client itself, so AWS_ENDPOINT_URL(_CLOUDWATCH_LOGS) and a profile's
        # endpoint_url (which a login may set) cannot send the copy, or its reading, elsewhere.
        self.endpoint = endpoint_url or default_endpoint("logs", region)
        self._sts_endpoint = endpoint_url or default_endpoint("sts", region)
        self._profile = profile
        self._config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts},
                              connect_timeout=connect_timeout, read_timeout=read_timeout,
                              user_agent_extra="gpuconsole")
        self._lock = threading.Lock()
        self._client: Any = None
        self._secrets: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"CloudWatch Logs {self.group} ({self.region}, {self.endpoint})"

    def account(self) -> str:
        """The AWS account these credentials are in (STS GetCallerIdentity at the pinned endpoint).

        Raises:
            BackendError: it cannot be asked.
        """
        return self._identity()["Account"]

    def caller(self) -> str:
        """The ARN of the identity these credentials are (STS GetCallerIdentity at the pinned endpoint).

        Raises:
            BackendError: it cannot be asked.
        """
        return self._identity()["Arn"]

    def _identity(self) -> dict[str, str]:
        self._logs()
        try:
            client = new_session(self._profile).client("sts", region_name=self.region, config=self._config,
                                                       endpoint_url=self._sts_endpoint)
            answer = client.get_caller_identity()
            return {"Account": str(answer["Account"]), "Arn": str(answer["Arn"])}
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc) from exc

    def _logs(self) -> Any:
        """The client, made once; no call goes out without credentials."""
        with self._lock:
            if self._client is None:
                try:
                    session = new_session(self._profile)
                    credentials = session.get_credentials()
                    frozen = credentials.get_frozen_credentials() if credentials is not None else None
                    if frozen is None or not frozen.access_key:
                        raise BackendUnavailable(f"{self.where}: no AWS credentials found", hint=CREDENTIALS_HINT)
                    self._secrets = tuple(v for v in (frozen.access_key, frozen.secret_key, frozen.token) if v)
                    self._client = session.client("logs", region_name=self.region, config=self._config,
                                                  endpoint_url=self.endpoint)
                except BotoCoreError as exc:
                    raise aws_mapping.backend_error(exc, self.where) from exc
            return self._client

    def _error(self, exc: Exception) -> BackendError:
        return aws_mapping.backend_error(exc, self.where, secrets=self._secrets)

    def put(self, stream: str, messages: Sequence[str]) -> None:
        """Append ``messages`` to ``stream`` in order, in as few calls as the limits allow.

        Raises:
            BackendError: nothing or only a first part was stored (the caller keeps the rest).
        """
        logs = self._logs()
        for batch in batches(messages):
            now = int(time.time() * 1000)
            events = [{"timestamp": now, "message": m} for m in batch]
            try:
                answer = self._put(logs, stream, events)
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc) from exc
            rejected = answer.get("rejectedLogEventsInfo") or {}
            if rejected:
                raise BackendError(f"{self.where}: events rejected: {rejected}")

    def _put(self, logs: Any, stream: str, events: list[dict[str, Any]]) -> dict[str, Any]:
        """One PutLogEvents; when the group or the stream does not exist yet, they are created
        and the call is made again (so the usual case is one call, and a login whose role may not
        create groups still writes to one made for it)."""
        try:
            return logs.put_log_events(logGroupName=self.group, logStreamName=stream, logEvents=events)
        except ClientError as exc:
            if aws_mapping.error_code(exc) != "ResourceNotFoundException":
                raise
        self._create(logs, stream)
        return logs.put_log_events(logGroupName=self.group, logStreamName=stream, logEvents=events)

    def _create(self, logs: Any, stream: str) -> None:
        for call, kwargs in ((logs.create_log_group, {}), (logs.create_log_stream, {"logStreamName": stream})):
            try:
                call(logGroupName=self.group, **kwargs)
            except ClientError as exc:
                if aws_mapping.error_code(exc) != "ResourceAlreadyExistsException":
                    raise

    def read(self, stream: str | None = None) -> list[tuple[str, str]]:
        """Every message of ``stream`` (None: of every stream of the group), oldest first, each
        with the stream it is in (what the IAM policy bound to one identity).

        A group or stream that does not exist yet reads as empty: nothing was ever sent.

        Raises:
            BackendError: the copy could not be read.
        """
        logs = self._logs()
        kwargs: dict[str, Any] = {"logGroupName": self.group}
        if stream is not None:
            kwargs["logStreamNames"] = [stream]
        out: list[tuple[str, str]] = []
        try:
            for page in logs.get_paginator("filter_log_events").paginate(**kwargs):
                out.extend((str(event.get("logStreamName", "")), str(event.get("message", "")))
                           for event in page.get("events", ()))
        except ClientError as exc:
            if aws_mapping.error_code(exc) == "ResourceNotFoundException":
                return []
            raise self._error(exc) from exc
        except BotoCoreError as exc:
            raise self._error(exc) from exc
        return out
