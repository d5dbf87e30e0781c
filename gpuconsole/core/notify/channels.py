"""What each channel sends, in its own protocol's shape, and the one way it is sent.

A queued message's body is ``{"status", "alert", "starts_at", "ends_at"}``; each ``*_body``
function turns it into what its channel expects, and :func:`deliver` sends a batch. Alertmanager
gets every active alert at each post (its API is level-triggered and it de-duplicates), the
others one request per message. Every failure is a :class:`BackendError` whose line names the
channel and its host, never a URL path, a key or a token.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import urllib.parse
from collections.abc import Sequence
from typing import Any

from gpuconsole.backends.base import BackendError, one_line
from gpuconsole.core.config import ConfigError
from gpuconsole.core.notify.alerts import KINDS
from gpuconsole.core.notify.config import Channel, read_secret

ALERTMANAGER_HOLD_S = 300.0  # endsAt of a firing alert: resolved by Alertmanager itself when we stop posting
PAGERDUTY_SEVERITY = {"info": "info", "warning": "warning", "critical": "critical"}


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
    from gpuconsole.core.ops.budget_notify import _opener_without_redirects

    host = urllib.parse.urlsplit(url).hostname or channel.kind
    where = f"channel {channel.name} ({host})"
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "gpuconsole",
                                              **(headers or {})})
    try:
        with _opener_without_redirects(client_context(where, channel.ca_file or None)).open(request, timeout=channel.timeout_s) as answer:
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
