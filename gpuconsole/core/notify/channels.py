"""What each channel sends, in its own protocol's shape, and the one way it is sent.

A queued message's body is ``{"status", "alert", "starts_at", "ends_at"}``; each ``*_body``
function turns it into what its channel expects, and :func:`deliver` sends a batch. Alertmanager
gets every active alert at each post (its API is level-triggered and it de-duplicates), the
others one request per message. SNS is reached only through the AWS backend, with the console's
own AWS access (:func:`use_console_aws`) unless the channel names a profile. Every failure is a
:class:`BackendError` whose line names the channel and its host, never a URL path, a key or a
token.
"""

from __future__ import annotations

import datetime as dt
import json
import hashlib
import re
import socket
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.base import BackendError, BackendPermissionDenied, one_line
from gpuconsole.core.config import ConfigError
from gpuconsole.core.notify.alerts import KINDS
from gpuconsole.core.notify.config import Channel, read_secret

ALERTMANAGER_HOLD_S = 300.0  # endsAt of a firing alert: resolved by Alertmanager itself when we stop posting
PAGERDUTY_SEVERITY = {"info": "info", "warning": "warning", "critical": "critical"}
SNS_SUBJECT_MAX = 100
SNS_ID = re.compile(r"^[!-~]{1,128}$")  # a FIFO group or de-duplication id: printable ASCII, 128 at most
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _labels(alert: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in alert.get("labels", ())}


def _details(alert: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in alert.get("details", ())}


def _description(alert: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in alert.get("details", ()))


def alertmanager_alert(body: dict[str, Any], now: float) -> dict[str, Any]:
    """One alert of ``POST /api/v2/alerts``."""
    alert = body["alert"]
    kind = KINDS.get(alert["kind"])
    labels = {"alertname": kind.alertname if kind else "GpuconsoleAlert", "severity": alert["severity"],
              "gpuconsole_kind": alert["kind"], "gpuconsole_id": alert["identity"], **_labels(alert)}
    ends = body["ends_at"] if body["status"] == "resolved" else now + ALERTMANAGER_HOLD_S
    host = urllib.parse.quote(socket.gethostname(), safe="")
    return {"labels": labels,
            "annotations": {"summary": alert["summary"], "description": _description(alert) or alert["summary"]},
            "startsAt": iso(body["starts_at"]), "endsAt": iso(ends),
            "generatorURL": f"http://{host}/gpuconsole/alerts/{urllib.parse.quote(alert['identity'], safe='')}"}


def webhook_body(body: dict[str, Any]) -> dict[str, Any]:
    alert = body["alert"]
    return {"id": alert["identity"], "status": body["status"], "severity": alert["severity"],
            "kind": alert["kind"], "summary": alert["summary"], "details": _details(alert),
            "labels": _labels(alert), "starts_at": iso(body["starts_at"]), "ends_at": iso(body["ends_at"])}


def slack_body(body: dict[str, Any]) -> dict[str, Any]:
    alert = body["alert"]
    mark = {"critical": ":red_circle:", "warning": ":warning:"}.get(alert["severity"], ":information_source:")
    if body["status"] == "resolved":
        text = f":white_check_mark: *resolved* {alert['summary']}"
    else:
        description = _description(alert)
        text = f"{mark} *{alert['severity']}* {alert['summary']}" + (f"\n{description}" if description else "")
    return {"text": text}


def pagerduty_body(body: dict[str, Any], routing_key: str) -> dict[str, Any]:
    alert = body["alert"]
    event: dict[str, Any] = {"routing_key": routing_key, "dedup_key": alert["identity"],
                             "event_action": "resolve" if body["status"] == "resolved" else "trigger"}
    if body["status"] != "resolved":
        event["payload"] = {"summary": alert["summary"][:1024], "source": socket.gethostname(),
                            "severity": PAGERDUTY_SEVERITY[alert["severity"]], "timestamp": iso(body["starts_at"]),
                            "component": alert["kind"], "custom_details": {**_details(alert), **_labels(alert)}}
    return event


def command_environment(body: dict[str, Any]) -> dict[str, str]:
    alert = body["alert"]
    return {"GPUCONSOLE_ALERT_ID": alert["identity"], "GPUCONSOLE_ALERT_STATUS": body["status"],
            "GPUCONSOLE_ALERT_SEVERITY": alert["severity"], "GPUCONSOLE_ALERT_KIND": alert["kind"],
            "GPUCONSOLE_MESSAGE": ("resolved: " if body["status"] == "resolved" else "") + alert["summary"],
            "GPUCONSOLE_ALERT_JSON": json.dumps(webhook_body(body))}


class _Environment:
    """What :func:`run_notify_command` asks of a budget crossing: its environment."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env

    def environment(self) -> dict[str, str]:
        return self._env


def deliver(channel: Channel, bodies: Sequence[dict[str, Any]], active: Sequence[dict[str, Any]], now: float) -> None:
    """Send ``bodies`` (queued messages) through ``channel``; Alertmanager also gets ``active``.

    Raises:
        BackendError: one line naming the channel and its host.
    """
    try:
        if channel.kind == "alertmanager":
            resolved = [b for b in bodies if b["status"] == "resolved"]
            alerts = [alertmanager_alert(b, now) for b in [*active, *resolved]]
            if alerts:
                post_json(channel, channel.target_url().rstrip("/") + "/api/v2/alerts", alerts)
            return
        for body in bodies:
            _deliver_one(channel, body)
    except ConfigError as exc:
        raise BackendError(str(exc)) from None


def _deliver_one(channel: Channel, body: dict[str, Any]) -> None:
    if channel.kind == "webhook":
        token = read_secret(channel, "token")
        post_json(channel, channel.target_url(), webhook_body(body),
                  {"Authorization": f"Bearer {token}"} if token else None)
    elif channel.kind == "slack":
        post_json(channel, channel.target_url(), slack_body(body))
    elif channel.kind == "pagerduty":
        post_json(channel, channel.target_url(), pagerduty_body(body, read_secret(channel, "routing_key")))
    elif channel.kind == "email":
        send_email(channel, body)
    elif channel.kind == "sns":
        publish_sns(channel, body)
    elif channel.kind == "command":
        from gpuconsole.core.ops.budget_notify import run_notify_command

        try:
            run_notify_command(channel.command, _Environment(command_environment(body)), channel.timeout_s)  # type: ignore[arg-type]
        except BackendError as exc:
            raise BackendError(f"channel {channel.name}: {one_line(exc)}") from None
    else:
        raise BackendError(f"channel {channel.name}: kind {channel.kind} cannot send")


def post_json(channel: Channel, url: str, payload: Any, headers: dict[str, str] | None = None) -> int:
    """POST ``payload`` as JSON (TLS verified, redirects refused). Returns the HTTP status.

    Raises:
        BackendError: no 2xx answer within the channel's timeout; names the host only.
    """
    import urllib.error
    import urllib.request

    from gpuconsole.backends.tls import client_context
    from gpuconsole.core.ops.budget_notify import opener_without_redirects

    host = urllib.parse.urlsplit(url).hostname or channel.kind
    where = f"channel {channel.name} ({host})"
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "gpuconsole",
                                              **(headers or {})})
    try:
        with opener_without_redirects(client_context(where, channel.ca_file or None)).open(request, timeout=channel.timeout_s) as answer:
            answer.read(65536)
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        redirect = ": redirects are not followed" if 300 <= exc.code < 400 else ""
        raise BackendError(f"{where} answered HTTP {exc.code}{redirect}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        text = one_line(reason) if isinstance(reason, BaseException) else str(reason)
        raise BackendError(f"{where} failed: {text}") from None


def email_message(channel: Channel, body: dict[str, Any]) -> Any:
    from email.message import EmailMessage

    alert = body["alert"]
    resolved = body["status"] == "resolved"
    msg = EmailMessage()
    msg["Subject"] = ("[resolved] " if resolved else f"[{alert['severity']}] ") + alert["summary"]
    msg["From"] = channel.sender
    msg["To"] = ", ".join(channel.to)
    lines = [alert["summary"], "", f"status: {body['status']}", f"alert: {alert['identity']}",
             f"started: {iso(body['starts_at'])}"] + ([f"ended: {iso(body['ends_at'])}"] if resolved else [])
    lines += [f"{k}: {v}" for k, v in alert.get("details", ())] + [f"{k}: {v}" for k, v in alert.get("labels", ())]
    msg.set_content("\n".join(lines) + "\n")
    return msg


def send_email(channel: Channel, body: dict[str, Any]) -> None:
    """One message over SMTP, always through STARTTLS (certificates verified), logged in when a
    username is set. Raises BackendError naming the server only."""
    import smtplib

    from gpuconsole.backends.tls import client_context

    where = f"channel {channel.name} ({channel.smtp_host})"
    password = read_secret(channel, "password") if channel.username else ""
    try:
        with smtplib.SMTP(channel.smtp_host, channel.smtp_port, timeout=channel.timeout_s) as smtp:
            smtp.starttls(context=client_context(where, channel.ca_file or None))
            if channel.username:
                smtp.login(channel.username, password)
            smtp.send_message(email_message(channel, body))
    except smtplib.SMTPResponseException as exc:
        raise BackendError(f"{where} answered {exc.smtp_code}") from None
    except (smtplib.SMTPException, OSError) as exc:
        raise BackendError(f"{where} failed: {type(exc).__name__}: {one_line(exc)}"[:300]) from None


# ---------------------------------------------------------------------- SNS
@dataclass(frozen=True, slots=True)
class ConsoleAws:
    """The AWS access of the console the sender runs in, used by sns channels without a profile.

    Attributes:
        profile: the console's named profile (None: the default chain, ``AWS_PROFILE``).
        credentials: its ``[aws.roles]`` role session in botocore's refresh shape
            (``AwsRoleSessions.refresh``); None: the profile's own chain.
    """

    profile: str | None = None
    credentials: Callable[[], dict[str, str]] | None = None


_aws_lock = threading.Lock()
_console_aws = ConsoleAws()
_publishers: dict[tuple[str, str | None, bool, float], Any] = {}


def use_console_aws(profile: str | None, credentials: Callable[[], dict[str, str]] | None = None) -> None:
    """Publish as the console does: call it once the console is built (``notify run``), with its
    profile and, where ``[aws.roles]`` is set, its role session's ``refresh``."""
    global _console_aws
    with _aws_lock:
        _console_aws = ConsoleAws(profile, credentials)
        old = list(_publishers.values())
        _publishers.clear()
    for publisher in old:
        publisher.close()


def sns_subject(body: dict[str, Any]) -> str:
    """The summary on one line (``[resolved] `` first on a resolve), 100 characters at most."""
    alert = body["alert"]
    text = ("[resolved] " if body["status"] == "resolved" else "") + str(alert["summary"])
    text = " ".join(_CONTROL.sub(" ", text).split()) or alert["kind"]
    return text if len(text) <= SNS_SUBJECT_MAX else text[:SNS_SUBJECT_MAX - 3].rstrip() + "..."


def sns_attributes(body: dict[str, Any]) -> dict[str, str]:
    """What a subscription's filter policy can select on."""
    alert = body["alert"]
    return {"severity": str(alert["severity"]), "kind": str(alert["kind"]), "status": str(body["status"])}


def sns_message_id(body: dict[str, Any]) -> str:
    """The queued message's id (the sender's ``message_id``): a FIFO topic's de-duplication id."""
    given = body.get("id")
    if given:
        return str(given)
    return f"{body['alert']['identity']}@{float(body['starts_at']):.0f}:{body['status']}:0"


def _fifo_id(text: str) -> str:
    """``text`` when SNS takes it as a FIFO id, else its SHA-256 (64 hex digits)."""
    return text if SNS_ID.match(text) else hashlib.sha256(text.encode()).hexdigest()


def _publisher(channel: Channel, where: str) -> Any:
    from gpuconsole.backends.registry import sns_publisher

    with _aws_lock:
        access = _console_aws
        role = not channel.profile and access.credentials is not None
        if not channel.profile and channel.aws_roles and not role:
            raise BackendPermissionDenied(f"{where}: [aws.roles] is set and no role session was opened: "
                                          "give the channel a profile, or send from notify run")
        profile = channel.profile or access.profile
        key = (channel.region, profile, role, channel.timeout_s)
        if key not in _publishers:
            _publishers[key] = sns_publisher(channel.region, profile, timeout=channel.timeout_s,
                                             credentials=access.credentials if role else None)
        return _publishers[key]


def publish_sns(channel: Channel, body: dict[str, Any]) -> None:
    """One ``sns:Publish``: the webhook's JSON object as the message, the summary as the subject,
    severity, kind and status as attributes; on a FIFO topic, grouped by kind, de-duplicated by
    the message id. Raises BackendError naming the channel and the topic."""
    where = f"channel {channel.name} (SNS {channel.host})"
    fifo: dict[str, str] = {}
    if channel.fifo:
        fifo = {"group_id": _fifo_id(str(body["alert"]["kind"])), "dedup_id": _fifo_id(sns_message_id(body))}
    _publisher(channel, where).publish(channel.topic_arn, subject=sns_subject(body), where=where,
                                       message=json.dumps(webhook_body(body)), attributes=sns_attributes(body), **fifo)
