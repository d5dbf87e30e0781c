"""SNS as a notification channel: one ``Publish`` per message, to one topic.

This module is the thin translator: a subject, a message, its attributes (and, for a FIFO
topic, its group and de-duplication ids) in, the message id out, botocore's errors as
:class:`~gpuconsole.backends.base.BackendError`. What to send and when, and the queue of what
could not be sent, live in :mod:`gpuconsole.core.notify`.

The credentials are those of every other AWS call, through the same :class:`AwsSession`: the
profile's chain (``None``: the default chain, ``AWS_PROFILE``), or the role session of
``[aws.roles]`` when one is handed over (a botocore refresh callable, renewed before it
expires). No client is made without credentials, and TLS is botocore's own, always verified.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuconsole.backends.aws.session import AwsSession
from gpuconsole.backends.base import BackendError, BackendUnavailable

Refresh = Callable[[], dict[str, str]]


class SnsPublisher(AwsSession):
    """Publishes to SNS topics of one region, on the AWS backend's own session logic.

    Args:
        region: the topics' region (taken from their ARN).
        profile: a named AWS profile; None uses the default credential chain.
        credentials: a role session in botocore's refresh shape (``access_key``, ``secret_key``,
            ``token``, ``expiry_time``), used instead of the profile's own credentials.
        connect_timeout / read_timeout: seconds to open a connection / to wait for an answer.
        max_attempts: tries per call in botocore's standard retry mode.
    """

    def __init__(self, region: str, profile: str | None = None, *, credentials: Refresh | None = None,
                 connect_timeout: float = 5, read_timeout: float = 10, max_attempts: int = 3) -> None:
        super().__init__((region,), profile, connect_timeout=connect_timeout, read_timeout=read_timeout,
                         max_attempts=max_attempts)
        self.region = region
        if credentials is not None:
            self.use_credentials(credentials)

    def publish(self, topic_arn: str, *, subject: str, message: str, attributes: Mapping[str, str],
                group_id: str = "", dedup_id: str = "", where: str = "") -> str:
        """One ``sns:Publish``; returns SNS's message id.

        Args:
            attributes: string message attributes (name → value), for subscription filters.
            group_id / dedup_id: a FIFO topic's ``MessageGroupId`` and ``MessageDeduplicationId``.
            where: what an error line starts with (default: the topic's name and region).

        Raises:
            BackendError: SNS did not take the message (one line, no credential in it).
        """
        where = where or f"SNS {topic_arn.rsplit(':', 1)[-1]} ({self.region})"
        params: dict[str, Any] = {
            "TopicArn": topic_arn, "Subject": subject, "Message": message,
            "MessageAttributes": {k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
        }
        if group_id:
            params["MessageGroupId"] = group_id
        if dedup_id:
            params["MessageDeduplicationId"] = dedup_id
        try:
            sns = self._client("sns", self.region)  # no client without credentials
        except BackendUnavailable as exc:
            raise BackendUnavailable(f"{where}: {exc}", hint=exc.hint) from None
        except BackendError as exc:
            raise type(exc)(f"{where}: {exc}") from None
        with self._errors(where):
            answer = sns.publish(**params)
        return str(answer.get("MessageId", ""))
