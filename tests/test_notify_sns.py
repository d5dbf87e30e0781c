"""The ``sns`` channel of ``notify``, against moto's server: a topic, an SQS queue subscribed to it.

The sender runs in-process on hand-built snapshots with a clock the test moves; boto3 reaches
moto through the fault proxy of tests/aws_peer.py (``AWS_ENDPOINT_URL``), as it would reach AWS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuconsole.core.config import ConfigError
from gpuconsole.core.notify import channels as notify_channels
from gpuconsole.core.notify.channels import sns_subject, use_console_aws
from gpuconsole.core.notify.config import channels_from_data
from gpuconsole.core.notify.outbox import Outbox
from gpuconsole.core.notify.sender import NotifySender
from tests.aws_peer import TEST_SECRET_ACCESS_KEY, AwsPeer
from tests.notify_peer import fleet

T0 = 1_764_480_000.0
ACCOUNT = "123456789012"  # moto's default account
BUDGET = "budget:team-a:80"


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(autouse=True)
def _console_default_aws() -> Iterator[None]:
    """Every test starts and ends on the default chain, with no publisher kept from another."""
    use_console_aws(None)
    yield
    use_console_aws(None)


def arn(name: str) -> str:
    return f"arn:aws:sns:us-east-1:{ACCOUNT}:{name}"


def topic_with_queues(peer: AwsPeer, name: str) -> tuple[str, str, str]:
    """Topic ``name`` and two queues subscribed to it: raw delivery (the message as published)
    and SNS's envelope (which carries the subject). FIFO topics get FIFO queues."""
    sns, sqs = peer.client("sns"), peer.client("sqs")
    fifo = name.endswith(".fifo")
    topic = sns.create_topic(Name=name, Attributes={"FifoTopic": "true"} if fifo else {})["TopicArn"]
    urls = []
    for raw in (True, False):
        queue = f"{name.removesuffix('.fifo')}-{'raw' if raw else 'envelope'}" + (".fifo" if fifo else "")
        url = sqs.create_queue(QueueName=queue, Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn,
                      Attributes={"RawMessageDelivery": "true" if raw else "false"})
        urls.append(url)
    return topic, urls[0], urls[1]


def drain(peer: AwsPeer, url: str) -> list[dict[str, Any]]:
    sqs = peer.client("sqs")
    got: list[dict[str, Any]] = []
    while True:
        answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                     MessageAttributeNames=["All"], AttributeNames=["All"])
        messages = answer.get("Messages", [])
        if not messages:
            return got
        for m in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        got += messages


def attributes(message: dict[str, Any]) -> dict[str, str]:
    return {k: v["StringValue"] for k, v in message.get("MessageAttributes", {}).items()}


def sender(tmp: Path, table: dict[str, Any], clock: Clock, data: dict[str, Any] | None = None) -> NotifySender:
    return NotifySender(channels_from_data({**(data or {}), "notify": [table]}), Outbox(tmp / "notify.db"), clock)


def budget_only(now: float, *, crossed: bool = True) -> Any:
    return fleet(now, T0, budget=crossed, idle=False, autopilot=False)


# ---------------------------------------------------------------------- configuration
def test_the_table_names_a_topic_and_its_region_comes_from_the_arn() -> None:
    (c,) = channels_from_data({"notify": [{"name": "ops", "kind": "sns", "topic_arn": arn("gpu-alerts")}]})
    assert (c.region, c.topic, c.fifo, c.profile, c.aws_roles) == ("us-east-1", "gpu-alerts", False, "", False)
    assert c.describe() == "ops (sns, gpu-alerts in us-east-1)"
    (c,) = channels_from_data({"notify": [{"kind": "sns", "profile": "alerts",
                                           "topic_arn": "arn:aws-us-gov:sns:us-gov-west-1:111122223333:a.fifo"}]})
    assert (c.name, c.region, c.fifo, c.profile) == ("sns", "us-gov-west-1", True, "alerts")
    roles = {"aws": {"roles": {"admin": f"arn:aws:iam::{ACCOUNT}:role/gpuconsole-admin"}}}
    (c,) = channels_from_data({**roles, "notify": [{"kind": "sns", "topic_arn": arn("t")}]})
    assert c.aws_roles


@pytest.mark.parametrize(("table", "problem"), [
    ({"kind": "sns"}, "key topic_arn: required"),
    ({"kind": "sns", "topic_arn": "arn:aws:sqs:us-east-1:123456789012:q"}, "key topic_arn: expected an SNS topic ARN"),
    ({"kind": "sns", "topic_arn": "arn:aws:sns:us-east-1:1234:t"}, "key topic_arn: expected an SNS topic ARN"),
    ({"kind": "sns", "topic_arn": arn("t"), "profile": "a b"}, "key profile: expected an AWS profile name"),
    ({"kind": "webhook", "url": "https://example.com/h", "topic_arn": arn("t")},
     "key topic_arn: only for an sns channel"),
])
def test_a_wrong_table_says_which_key(table: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        channels_from_data({"notify": [table]})
    assert problem in str(err.value) and "\n" not in str(err.value)


def test_the_subject_is_one_line_of_100_characters_at_most() -> None:
    def body(summary: str, status: str = "firing") -> dict[str, Any]:
        return {"status": status, "alert": {"summary": summary, "kind": "budget"}}

    assert sns_subject(body("budget a\npassed\x1b[31m 80%")) == "budget a passed [31m 80%"
    assert sns_subject(body("x" * 300, "resolved")) == "[resolved] " + "x" * 86 + "..."
    assert len(sns_subject(body("y" * 300))) == 100


# ---------------------------------------------------------------------- on moto
def test_one_firing_then_one_resolve_with_subject_and_attributes(tmp_path: Path, aws_peer: AwsPeer) -> None:
    topic, raw, envelope = topic_with_queues(aws_peer, "gpu-alerts")
    clock = Clock()
    s = sender(tmp_path, {"name": "ops", "kind": "sns", "topic_arn": topic}, clock)
    for _ in range(3):
        report = s.cycle(budget_only(clock.t))
    assert report.failed == []
    (fired,) = drain(aws_peer, raw)
    body = json.loads(fired["Body"])
    assert (body["id"], body["status"], body["severity"], body["kind"]) == (BUDGET, "firing", "warning", "budget")
    assert body["labels"] == {"budget": "team-a", "threshold": "80"} and body["ends_at"] is None
    assert attributes(fired) == {"severity": "warning", "kind": "budget", "status": "firing"}
    (wrapped,) = drain(aws_peer, envelope)
    assert json.loads(wrapped["Body"])["Subject"] == "budget team-a passed 80%: $850 of $1,000 (85%)"

    clock.t += 30
    s.cycle(budget_only(clock.t, crossed=False))
    s.cycle(budget_only(clock.t, crossed=False))
    (resolved,) = drain(aws_peer, raw)
    assert json.loads(resolved["Body"])["status"] == "resolved"
    assert attributes(resolved)["status"] == "resolved"
    envelope_body = json.loads(drain(aws_peer, envelope)[0]["Body"])
    assert envelope_body["Subject"] == "[resolved] budget team-a passed 80%: $850 of $1,000 (85%)"
    assert [r.action for r in aws_peer.proxy.sent("Publish")] == ["Publish", "Publish"]
    assert s.outbox.health("ops").waiting == 0


def test_a_missing_topic_keeps_the_message_until_the_topic_exists(tmp_path: Path, aws_peer: AwsPeer) -> None:
    clock = Clock()
    s = sender(tmp_path, {"name": "ops", "kind": "sns", "topic_arn": arn("later")}, clock)
    report = s.cycle(budget_only(clock.t))
    health = s.outbox.health("ops")
    assert health.waiting == 1 and health.failing_since == T0
    assert health.last_error.startswith("channel ops (SNS later in us-east-1): NotFound")
    assert "\n" not in health.last_error and TEST_SECRET_ACCESS_KEY not in health.last_error
    assert report.failed == [("ops", health.last_error)]

    _topic, raw, _envelope = topic_with_queues(aws_peer, "later")
    s.cycle(budget_only(clock.t))  # waiting out the backoff (a second): not tried
    assert drain(aws_peer, raw) == [] and len(aws_peer.proxy.sent("Publish")) == 1
    clock.t += 1
    s.cycle(budget_only(clock.t))
    s.cycle(budget_only(clock.t))
    (delivered,) = drain(aws_peer, raw)
    assert json.loads(delivered["Body"])["id"] == BUDGET
    health = s.outbox.health("ops")
    assert (health.waiting, health.failing_since, health.last_error) == (0, None, "")


def test_a_fifo_topic_groups_by_kind_and_deduplicates_by_message_id(tmp_path: Path, aws_peer: AwsPeer) -> None:
    topic, raw, _envelope = topic_with_queues(aws_peer, "gpu-alerts.fifo")
    clock = Clock()
    s = sender(tmp_path, {"kind": "sns", "topic_arn": topic}, clock)
    s.cycle(budget_only(clock.t))
    (fired,) = drain(aws_peer, raw)
    assert fired["Attributes"]["MessageGroupId"] == "budget"
    assert fired["Attributes"]["MessageDeduplicationId"] == f"{BUDGET}@{T0:.0f}:firing:0"
    clock.t += 10
    s.cycle(budget_only(clock.t, crossed=False))
    (resolved,) = drain(aws_peer, raw)
    assert resolved["Attributes"]["MessageDeduplicationId"] == f"{BUDGET}@{T0:.0f}:resolved:0"
    # an id SNS would refuse (over 128 characters, or a space in it) goes as its SHA-256
    assert len(notify_channels._fifo_id("gpu-idle:" + "x" * 200)) == 64
    assert len(notify_channels._fifo_id("job-pending:ml/a b")) == 64


def test_the_consoles_role_session_signs_the_publish(tmp_path: Path, aws_peer: AwsPeer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuconsole.backends.registry import sts_calls
    from gpuconsole.core.access.aws_roles import AwsRoleSessions, AwsRoleSettings
    from gpuconsole.model import Role

    topic, raw, _envelope = topic_with_queues(aws_peer, "gpu-alerts")
    role_arn = f"arn:aws:iam::{ACCOUNT}:role/gpuconsole-developer"
    clock = Clock()
    s = sender(tmp_path, {"name": "ops", "kind": "sns", "topic_arn": topic}, clock,
               {"aws": {"roles": {"developer": role_arn}}})
    s.cycle(budget_only(clock.t))  # [aws.roles] set, no role session handed over: nothing goes out
    assert "[aws.roles] is set and no role session was opened" in s.outbox.health("ops").last_error
    assert aws_peer.proxy.sent("Publish") == []

    # what notify run hands over: the console's role session (as attach_aws_roles builds it)
    sessions = AwsRoleSessions(AwsRoleSettings((("developer", role_arn),)), lambda: Role.DEVELOPER, sts_calls(None),
                               login="ada")
    sessions.credentials()  # the role session opened with the login's keys, which then go away:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")  # only the role's keys can sign what follows
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    use_console_aws(None, sessions.refresh)
    clock.t += 5
    s.cycle(budget_only(clock.t))
    (assumed,) = aws_peer.proxy.sent("AssumeRole")
    assert assumed.params["RoleArn"] == role_arn and assumed.params["SourceIdentity"] == "ada"
    assert len(drain(aws_peer, raw)) == 1 and len(aws_peer.proxy.sent("Publish")) == 1
    assert s.outbox.health("ops").failing_since is None


def test_no_credentials_or_an_unknown_profile_fail_in_one_line(tmp_path: Path, aws_peer: AwsPeer,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    topic, _raw, _envelope = topic_with_queues(aws_peer, "gpu-alerts")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    clock = Clock()
    s = sender(tmp_path, {"name": "ops", "kind": "sns", "topic_arn": topic}, clock)
    s.cycle(budget_only(clock.t))
    assert s.outbox.health("ops").last_error == "channel ops (SNS gpu-alerts in us-east-1): no AWS credentials found"
    s = sender(tmp_path / "b", {"name": "ops", "kind": "sns", "topic_arn": topic, "profile": "nope"}, clock)
    s.cycle(budget_only(clock.t))
    assert s.outbox.health("ops").last_error == ("channel ops (SNS gpu-alerts in us-east-1): "
                                                 "AWS profile 'nope' not found")
    assert aws_peer.proxy.sent("Publish") == []


def test_each_repeat_has_its_own_fifo_deduplication_id() -> None:
    """A repeat of a firing alert is a message of its own: a FIFO topic must not drop it as a
    duplicate of the first firing (SNS de-duplicates by id for five minutes)."""
    from gpuconsole.core.notify.channels import sns_message_id
    from gpuconsole.core.notify.outbox import Episode
    from gpuconsole.core.notify.sender import body

    ep = Episode("budget:team-a:80", 1764480000.0, 1764480000.0, None, {"identity": "budget:team-a:80"})
    first, again = body(ep, "firing", ep.alert), body(ep, "firing", ep.alert, n=1)
    assert sns_message_id(first) == "budget:team-a:80@1764480000:firing:0"
    assert sns_message_id(again) == "budget:team-a:80@1764480000:firing:1"
