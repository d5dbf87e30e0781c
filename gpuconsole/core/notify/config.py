"""The notification channels: ``[[notify]]`` tables of the configuration file.

Each table is one channel::

    [[notify]]
    kind = "alertmanager"                     # alertmanager, webhook, slack, pagerduty, email, sns, command
    url = "https://alertmanager.example:9093"
    min_severity = "warning"                  # info (default), warning or critical
    kinds = ["budget", "gpu-idle"]            # default: every kind
    repeat = "4h"                             # while an alert lasts (not for alertmanager)

    [[notify]]
    name = "oncall"
    kind = "pagerduty"
    routing_key_file = "/etc/gpuconsole/pagerduty.key"

    [[notify]]
    kind = "email"                            # SMTP with STARTTLS (always; certificates verified)
    smtp_host = "smtp.example.com"            # smtp_port = 587
    username = "gpuconsole"
    password_file = "/etc/gpuconsole/smtp.password"
    from = "gpuconsole@example.com"
    to = ["oncall@example.com"]

    [[notify]]
    kind = "sns"                              # the region is the ARN's; a .fifo topic is grouped by kind
    topic_arn = "arn:aws:sns:us-east-1:123456789012:gpu-alerts"
    # profile = "alerts"                      # default: the console's AWS access, [aws.roles] role included

Secrets (a Slack webhook URL, a PagerDuty routing key, an SMTP password, a bearer token) come only from a file
(``*_file``) or the environment (``*_env``, the variable's name), never from the table itself,
and no message, log line or listing names them: a channel is named by its name and host only.
URLs are https, or plain http to a loopback address.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from gpuconsole.backends.tls import is_loopback
from gpuconsole.core.config import ConfigError, parse_toml, read_config_text
from gpuconsole.core.config_decode import TableError, decode_table
from gpuconsole.core.notify.alerts import KINDS
from gpuconsole.model import Severity

ChannelKind = Literal["alertmanager", "webhook", "slack", "pagerduty", "email", "sns", "command"]
DEFAULT_REPEAT_S = 4 * 3600.0
PAGERDUTY_URL = "https://events.pagerduty.com/v2/enqueue"
# arn:aws[-PARTITION]:sns:REGION:ACCOUNT:NAME (a FIFO topic's name ends in .fifo, 256 characters in all)
SNS_TOPIC_ARN = (r"^arn:aws[-a-z]*:sns:(?P<region>[a-z]{2}(-[a-z]+)+-\d{1,2}):(?P<account>\d{12}):"
                 r"(?P<name>[A-Za-z0-9_-]{1,251}\.fifo|[A-Za-z0-9_-]{1,256})$")


class NotifyTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[notify]]`` table as written."""

    kind: Annotated[ChannelKind, msgspec.Meta(extra={"missing": "every channel needs a kind"})]
    name: Annotated[str, msgspec.Meta(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$",
                                      description="a name of letters, digits, '.', '_' or '-'")] | None = None
    url: str | None = None
    url_file: str | None = None
    url_env: str | None = None
    token_file: str | None = None
    routing_key_file: str | None = None
    routing_key_env: str | None = None
    command: str | None = None
    smtp_host: str | None = None
    smtp_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 587
    username: str | None = None
    password_file: str | None = None
    password_env: str | None = None
    sender: Annotated[str | None, msgspec.Meta(description="an e-mail address")] = msgspec.field(default=None, name="from")
    to: list[str] | None = None
    topic_arn: Annotated[str, msgspec.Meta(
        pattern=SNS_TOPIC_ARN, description="an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")] | None = None
    profile: Annotated[str, msgspec.Meta(
        min_length=1, pattern=r"^[\w+=,.@:/-]+$", description="an AWS profile name of ~/.aws/config")] | None = None
    ca_file: str | None = None
    kinds: list[str] | None = None
    min_severity: Literal["info", "warning", "critical"] = "info"
    repeat: str = "4h"
    timeout: Annotated[float, msgspec.Meta(gt=0, le=120, description="seconds from more than 0 to 120")] = 10.0


@dataclass(frozen=True, slots=True)
class Channel:
    """A channel ready to use: its secrets are read when a message goes out, never kept in text."""

    name: str
    kind: str
    url: str = ""
    url_file: str = ""
    url_env: str = ""
    token_file: str = ""
    routing_key_file: str = ""
    routing_key_env: str = ""
    command: str = ""
    smtp_host: str = ""
    smtp_port: int = 587
    username: str = ""
    password_file: str = ""
    password_env: str = ""
    sender: str = ""
    to: tuple[str, ...] = ()
    topic_arn: str = ""
    profile: str = ""  # sns: "" is the console's own AWS access (its profile, or its role session)
    aws_roles: bool = False  # sns: [aws.roles] is set, so only a role session may publish without a profile
    ca_file: str = ""
    kinds: tuple[str, ...] = ()
    min_severity: Severity = Severity.INFO
    repeat_s: float = DEFAULT_REPEAT_S
    timeout_s: float = 10.0

    @property
    def host(self) -> str:
        """What names the target in messages: the host of a plain URL, else the kind's words."""
        if self.url:
            return urllib.parse.urlsplit(self.url).hostname or self.kind
        if self.smtp_host:
            return self.smtp_host
        if self.topic_arn:
            return f"{self.topic} in {self.region}"
        return {"slack": "Slack webhook", "pagerduty": "PagerDuty", "command": "command"}.get(self.kind, self.kind)

    @property
    def topic(self) -> str:
        """An SNS channel's topic name."""
        return self.topic_arn.rsplit(":", 1)[-1]

    @property
    def region(self) -> str:
        """An SNS channel's region: the topic ARN's."""
        parts = self.topic_arn.split(":")
        return parts[3] if len(parts) == 6 else ""

    @property
    def fifo(self) -> bool:
        return self.topic.endswith(".fifo")

    def target_url(self) -> str:
        """The URL to POST to (a Slack URL read from its file or variable now). Raises ConfigError."""
        if self.kind == "pagerduty":
            return self.url or PAGERDUTY_URL
        if self.url:
            return self.url
        return check_url(read_secret(self, "url"), f"channel {self.name} key url_file")

    def describe(self) -> str:
        return f"{self.name} ({self.kind}, {self.host})"


def read_secret(channel: Channel, what: str) -> str:
    """The secret ``what`` (``url``, ``routing_key``, ``token``) from its file or variable.

    Raises:
        ConfigError: neither is set, or the file cannot be read (named by path, never by value).
    """
    path = getattr(channel, f"{what}_file", "")
    env = getattr(channel, f"{what}_env", "") if what != "token" else ""
    if path:
        try:
            value = Path(path).expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"channel {channel.name}: cannot read {what}_file {path}: "
                              f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    elif env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise ConfigError(f"channel {channel.name}: ${env} is not set")
    else:
        return ""
    if not value:
        raise ConfigError(f"channel {channel.name}: {what} is empty")
    return value


def check_url(url: str, where: str) -> str:
    """``url`` when it is https, or http to a loopback address. Raises ConfigError (never naming the path)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return url
    if parts.scheme == "http" and is_loopback(host):
        return url
    raise ConfigError(f"{where}: use an https:// URL (http:// only to a loopback address), not {parts.scheme or 'no'}://{host}")


def channel_from_table(table: dict[str, Any], n: int, where: str, default_name: str = "", *,
                       aws_roles: bool = False) -> Channel:
    """One ``[[notify]]`` table as a :class:`Channel` (``aws_roles``: ``[aws.roles]`` is set).
    Raises ConfigError naming the key."""
    from gpuconsole.core.ops.autopilot.expr import ExpressionError, parse_duration

    label = f"{where}[[notify]] #{n}"
    try:
        t = decode_table(dict(table), NotifyTable)
    except TableError as exc:
        raise ConfigError(f"{label} key {exc.key or 'notify'}: {exc.problem}") from None
    name = t.name or default_name or t.kind

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{label} ({name}) key {key}: {problem}")

    url = ""
    if t.url is not None:
        if t.kind == "slack":
            raise fail("url", "a Slack webhook URL is a secret: give url_file or url_env")
        url = check_url(t.url, f"{label} ({name}) key url")
    needs_url = t.kind in ("alertmanager", "webhook", "slack")
    if needs_url and not (url or t.url_file or t.url_env):
        raise fail("url", "required for this kind" + (" (url_file or url_env)" if t.kind == "slack" else ""))
    if t.kind == "pagerduty" and not (t.routing_key_file or t.routing_key_env):
        raise fail("routing_key_file", "required: a file (or routing_key_env) holding the Events API v2 routing key")
    if t.kind == "command" and not (t.command or "").strip():
        raise fail("command", "required: the shell command to run for each alert")
    if t.kind == "email":
        for key, value in (("smtp_host", t.smtp_host), ("from", t.sender), ("to", t.to)):
            if not value:
                raise fail(key, "required for an email channel")
        if t.username and not (t.password_file or t.password_env):
            raise fail("password_file", "required with username (or password_env)")
    if t.kind == "sns" and not t.topic_arn:
        raise fail("topic_arn", "required: the SNS topic's ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")
    for key, value in (("topic_arn", t.topic_arn), ("profile", t.profile)):
        if value is not None and t.kind != "sns":
            raise fail(key, "only for an sns channel")
    if t.command and ("\n" in t.command or "\0" in t.command):
        raise fail("command", "one line, please")
    unknown = [k for k in t.kinds or () if k not in KINDS]
    if unknown:
        raise fail("kinds", f"unknown kind {unknown[0]!r} (kinds: {', '.join(KINDS)})")
    try:
        repeat = parse_duration(t.repeat)
    except ExpressionError as exc:
        raise fail("repeat", str(exc)) from None
    if repeat < 60:
        raise fail("repeat", "must be 1m or more")
    return Channel(name=name, kind=t.kind, url=url, url_file=t.url_file or "", url_env=t.url_env or "",
                   token_file=t.token_file or "", routing_key_file=t.routing_key_file or "",
                   routing_key_env=t.routing_key_env or "", command=t.command or "",
                   smtp_host=t.smtp_host or "", smtp_port=t.smtp_port, username=t.username or "",
                   password_file=t.password_file or "", password_env=t.password_env or "", sender=t.sender or "",
                   to=tuple(t.to or ()), topic_arn=t.topic_arn or "", profile=t.profile or "",
                   aws_roles=aws_roles and t.kind == "sns", ca_file=t.ca_file or "",
                   kinds=tuple(t.kinds or ()), min_severity=Severity(t.min_severity), repeat_s=repeat,
                   timeout_s=t.timeout)


def channels_from_data(data: dict[str, Any], where: str = "") -> tuple[Channel, ...]:
    """Every ``[[notify]]`` table of a parsed configuration, checked, with names unique."""
    tables = data.get("notify", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{where}key notify: write each channel as a [[notify]] table")
    out: list[Channel] = []
    kinds = [t.get("kind") for t in tables]
    roles = "sns" in kinds and aws_roles_set(data)
    for n, table in enumerate(tables, 1):
        kind = table.get("kind")
        default = f"{kind}-{n}" if isinstance(kind, str) and kinds.count(kind) > 1 else ""
        channel = channel_from_table(table, n, where, default, aws_roles=roles)
        if any(c.name == channel.name for c in out):
            raise ConfigError(f"{where}[[notify]] #{n} key name: channel {channel.name!r} is declared twice")
        out.append(channel)
    return tuple(out)


def aws_roles_set(data: dict[str, Any]) -> bool:
    """Whether ``[aws.roles]`` binds AWS calls: the site's table, else this file's."""
    from gpuconsole.core.access.site import site_table

    site = site_table("aws")
    aws = site[1] if site is not None and "roles" in site[1] else data.get("aws")
    return isinstance(aws, dict) and "roles" in aws


def load_channels(explicit: Path | str | None = None) -> tuple[Channel, ...]:
    """The configuration file's channels (none without a file). Raises ConfigError (one line)."""
    path, text = read_config_text(explicit)
    if text is None:
        return ()
    return channels_from_data(parse_toml(text, path), f"{path}: ")
