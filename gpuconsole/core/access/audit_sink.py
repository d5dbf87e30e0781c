"""The audit sink: a copy of every audit record where the login that wrote it cannot rewrite it.

Each login's own chain (:mod:`.audit`) can be deleted or recomputed by that login, so every record
is also sent, as it is appended, to an append-only store, set in the ``[audit]`` table::

    [audit]
    cloudwatch_log_group = "/gpuconsole/audit"   # CloudWatch Logs: one stream per host and login
    region = "eu-west-1"                          # the group's region (required with the group)
    # profile = "audit"                           # an AWS profile of ~/.aws/config for the sink
    # account = "123456789012"                    # write only as the login's own IAM user there
    # stream = "bastion-1"                        # the streams' first part (default: this host's name)
    syslog = true                                 # also the system log (/dev/log, journald's too)
    # syslog_socket = "/dev/log"                  # where the system log listens

Each message is one JSON object: ``host``, ``login`` and the ``record`` with its chain hash, in
the stream ``<host>/<login>``: the IAM policy of ``access iam-policy`` lets each identity write only
streams ending in its own name, so a message naming another login in one's own stream is found.
Messages go into a queue file beside the log (0600) before they are sent, and leave it only once
the store took them; when the store cannot be reached they stay there and go with the next
record, the next ``audit verify``, or at exit. A record that can be neither sent nor queued
makes the append fail, so an action is never silently unaudited.

The CloudWatch copy is also the shared log auditors read; ``audit verify`` holds a login's chain
against it (:mod:`.audit_remote`). Without a relay it is written as :mod:`.audit_writer` says.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import pwd
import socket
import weakref
from urllib.parse import urlsplit
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Any

import msgspec

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.tls import is_loopback
from gpuconsole.core.access.audit import FIELDS, AuditError, AuditLog
from gpuconsole.core.access.audit_writer import WriterCheck
from gpuconsole.core.config import ConfigError, parse_toml, read_config_text
from gpuconsole.core.config_decode import TableError, decode_table, fields_of
from gpuconsole.core.paths import PRIVATE_FILE, private_dir
from gpuconsole.model import AuditRecord

log = logging.getLogger(__name__)

TABLE = "audit"
SCHEMA = "gpuconsole.audit/1"
DEFAULT_SYSLOG_SOCKET = "/dev/log"
DEFAULT_MAX_LAG_MIN = 15.0  # a record queued longer than this fails verify: the copy cannot vouch for it
_Text = Annotated[str, msgspec.Meta(pattern=r"\S", description="a non-empty string")]


class AuditTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The ``[audit]`` table as written."""

    cloudwatch_log_group: _Text | None = None
    region: _Text | None = None
    profile: _Text | None = None
    endpoint_url: _Text | None = None  # the copy's endpoint, pinned (default: AWS's own for the region)
    account: Annotated[str, msgspec.Meta(pattern=r"^\d{12}$", description="a 12-digit AWS account id")] | None = None
    stream: _Text = ""
    syslog: bool = False
    syslog_socket: _Text = DEFAULT_SYSLOG_SOCKET
    db: _Text | None = None  # the site's log (core.access.site)
    relay: _Text | None = None  # the relay's socket (core.access.audit_relay)
    max_lag: Annotated[float, msgspec.Meta(gt=0, le=10_080, description=(
        "a number of minutes more than 0, at most 10,080 (a week)"))] = DEFAULT_MAX_LAG_MIN


KEYS = fields_of(AuditTable)


@dataclass(frozen=True, slots=True)
class SinkSettings:
    """The ``[audit]`` table: where the copies go (None / False: nowhere)."""

    log_group: str | None = None
    region: str | None = None
    profile: str | None = None
    stream: str = ""
    syslog: bool = False
    syslog_socket: str = DEFAULT_SYSLOG_SOCKET
    relay: str | None = None
    max_lag_s: float = DEFAULT_MAX_LAG_MIN * 60
    endpoint_url: str | None = None
    account: str | None = None  # the copy is written only as the login's own IAM user there (.audit_writer)

    @property
    def any(self) -> bool:
        return bool(self.log_group) or self.syslog or bool(self.relay)


def settings_from_config(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> SinkSettings:
    """The ``[audit]`` table of the configuration file (empty settings when there is none).

    A file that is missing, unreadable or not TOML gives no settings here: the budgets' reading
    of the same file reports those problems. A wrong key of the table raises.

    Raises:
        ConfigError: a key of the table is unknown or of the wrong type (one line naming file and key).
    """
    try:
        path, text = read_config_text(explicit, env)
        if text is None:
            return SinkSettings()
        data = parse_toml(text, path)
    except ConfigError:
        return SinkSettings()
    table = data.get(TABLE)
    if table is None:
        return SinkSettings()
    try:
        given = decode_table(table, AuditTable)
    except TableError as exc:
        if not exc.key:
            raise ConfigError(f"{path}: key {TABLE}: write it as an [audit] table") from None
        raise ConfigError(f"{path}: [audit] key {exc.key}: {exc.problem}") from None
    if given.cloudwatch_log_group is not None and given.region is None:
        raise ConfigError(f"{path}: [audit] key region: the log group's region is needed with cloudwatch_log_group")
    if given.endpoint_url is not None and (problem := _endpoint_problem(given.endpoint_url)):
        raise ConfigError(f"{path}: [audit] key endpoint_url: {problem}")
    return SinkSettings(given.cloudwatch_log_group, given.region, given.profile, given.stream, given.syslog,
                        given.syslog_socket, given.relay, given.max_lag * 60, given.endpoint_url, given.account)


def _endpoint_problem(url: str) -> str | None:
    """Why ``url`` cannot be the copy's endpoint: https, or http on this machine only."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return None
    return f"expected an https:// URL (http:// only to this machine), got {url!r}"


def login_name() -> str:
    """The login that owns this process's local chain: from the real uid, never the environment."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


# --------------------------------------------------------------------------- messages


def encode(record: AuditRecord, host: str, login: str) -> str:
    """The message sent for ``record``: the record's JSON (with its chain hash), where and by whom."""
    body = {f: getattr(record, f) for f in FIELDS}
    return json.dumps({"schema": SCHEMA, "host": host, "login": login, "record": body},
                      separators=(",", ":"), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True, slots=True)
class RemoteRecord:
    """A record of the copy, with the host and login whose chain it belongs to."""

    host: str
    login: str
    record: AuditRecord
    stream: str = ""  # the stream it was read from ("" when not read from one)

    @property
    def stream_owner(self) -> str:
        """The identity whose stream this was: the part after the last ``/`` (streams are
        ``<host>/<login>``, and IAM lets each identity write only its own)."""
        return self.stream.rpartition("/")[2]


def stream_name(host: str, login: str) -> str:
    """The stream of one login on one host: ``<host>/<login>``."""
    return f"{host}/{login}"


def decode(message: str, stream: str = "") -> RemoteRecord | None:
    """A message of :func:`encode` back; None for anything else in the group."""
    try:
        doc = json.loads(message)
        if doc.get("schema") != SCHEMA:
            return None
        raw = doc["record"]
        record = AuditRecord(int(raw["seq"]), *(str(raw[f]) for f in FIELDS[1:]))
        return RemoteRecord(str(doc["host"]), str(doc["login"]), record, stream)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


# --------------------------------------------------------------------------- the queue

_LIVE: weakref.WeakSet[QueuedSink] = weakref.WeakSet()


def close_all() -> None:
    """Send what every sink of this process has queued, once (also run at exit, so a record
    queued during an outage goes as soon as the store is back; what still cannot go stays in
    its queue file for the next run)."""
    for sink in list(_LIVE):
        sink.close()


atexit.register(close_all)


class QueuedSink:
    """One destination, fed through a queue file so a record is kept until it was taken.

    Args:
        name: what the destination is, for messages.
        queue_path: the queue file (created 0600).
        send: hands messages to the destination in order; raises :class:`BackendError` or
            ``OSError`` when it did not take them all.
        host, login: named in every message (the login owns the local chain).
    """

    def __init__(self, name: str, queue_path: Path, send: Callable[[Sequence[str]], None], *, host: str,
                 login: str) -> None:
        self.name = name
        self.queue_path = Path(queue_path)
        self.lock_path = self.queue_path.with_name(self.queue_path.name + ".lock")
        self.host = host
        self.login = login
        self.last_error = ""
        self._send = send
        self._warned = False
        _LIVE.add(self)

    def close(self) -> None:
        """Send what is queued now, and not again at exit."""
        _LIVE.discard(self)
        self.flush()

    def check_writable(self) -> None:
        """Raise :class:`AuditError` unless the queue can take a record (without creating it:
        its first creation is what brings the records written before the sink along)."""
        try:
            private_dir(self.queue_path.parent)
        except OSError as exc:
            raise AuditError(f"cannot queue audit records in {self.queue_path.parent}: {exc.strerror or exc}") from None
        target = self.queue_path if self.queue_path.exists() else self.queue_path.parent
        if not os.access(target, os.W_OK):
            raise AuditError(f"cannot queue audit records for {self.name}: {target} is not writable")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[IO[str]]:
        """The queue file, open for reading and appending, locked against other processes."""
        private_dir(self.queue_path.parent)
        fd = os.open(self.queue_path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, PRIVATE_FILE)
        with os.fdopen(fd, "a+", encoding="utf-8") as handle:
            os.fchmod(fd, PRIVATE_FILE)
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield handle

    def deliver(self, record: AuditRecord, audit: AuditLog) -> None:
        """Queue ``record`` (and, the first time, the records written before the sink was set),
        then send the queue."""
        backlog = not self.queue_path.exists()
        records = [r for r in audit.records() if r.seq < record.seq] if backlog else []
        try:
            with self._locked() as handle:
                handle.write("".join(encode(r, self.host, self.login) + "\n" for r in (*records, record)))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise AuditError(f"audit record {record.seq} reached neither {self.name} nor its queue "
                             f"{self.queue_path}: {exc.strerror or exc}") from None
        self.flush(wait=False)

    def queued(self) -> list[str]:
        """The messages not sent yet, oldest first."""
        try:
            text = self.queue_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [line for line in text.splitlines() if line.strip()]

    @contextlib.contextmanager
    def _sending(self, wait: bool) -> Iterator[bool]:
        """The right to send this queue, held by one process at a time; False when another
        holds it and ``wait`` is False. The queue itself stays free meanwhile, so an action
        never waits for another process's slow send to queue its record."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                mine = True
            except BlockingIOError:
                mine = False
            yield mine
        finally:
            os.close(fd)

    def _lines(self, handle: IO[str]) -> list[str]:
        handle.seek(0)
        return [line for line in handle.read().splitlines() if line.strip()]

    def flush(self, wait: bool = True) -> int:
        """Send what is queued; returns how many messages are still queued (0: all sent).

        Args:
            wait: wait for another process that is sending this queue (else leave the queue to it).
        """
        try:
            if not self.queue_path.exists():
                return 0
            with self._sending(wait) as mine:
                if not mine:
                    return len(self.queued())
                with self._locked() as handle:
                    lines = self._lines(handle)
                if not lines:
                    return 0
                try:
                    self._send(lines)
                except (BackendError, OSError) as exc:
                    self._note_failure(str(exc), len(lines))
                    return len(lines)
                with self._locked() as handle:  # what was queued while sending stays
                    rest = self._lines(handle)[len(lines):]
                    handle.truncate(0)
                    handle.write("".join(line + "\n" for line in rest))
                self.last_error = ""
                return len(rest)
        except OSError as exc:
            self._note_failure(f"queue {self.queue_path}: {exc.strerror or exc}", 0)
            return -1

    def _note_failure(self, reason: str, waiting: int) -> None:
        self.last_error = " ".join(reason.split())
        if not self._warned:
            self._warned = True
            log.warning("audit sink %s unreachable (%s): %d record(s) queued in %s, sent later",
                        self.name, self.last_error, waiting, self.queue_path)


# --------------------------------------------------------------------------- the destinations


class CloudWatchSink(QueuedSink):
    """The CloudWatch Logs copy: the shared, append-only log every auditor reads."""

    max_lag_s = DEFAULT_MAX_LAG_MIN * 60  # how long a record may wait in the queue before verify fails

    def __init__(self, store: Any, stream: str, queue_path: Path, *, host: str, login: str,
                 account: str | None = None) -> None:
        super().__init__(store.where, queue_path, self._put, host=host, login=login)
        self.store = store
        self.stream = stream
        self.writer = WriterCheck(store, account, login) if account else None

    def _put(self, lines: Sequence[str]) -> None:
        if self.writer is not None:
            self.writer.require()  # never sent as anyone but the login's own IAM user
        self.store.put(self.stream, lines)

    def check_writable(self) -> None:
        super().check_writable()
        if self.writer is not None and (why := self.writer.refusal()):
            raise AuditError(why)

    def remote(self, everyone: bool = False) -> list[RemoteRecord]:
        """The copy: every record this login sent from this host, in any stream of its own (not
        only today's: a chain sent earlier under another stream name counts too), or
        (``everyone``) the group's. A record naming this login in another identity's stream is
        that identity's, and left out here (:mod:`.audit_shared` shows it as a mismatch).

        Raises:
            AuditError: the copy cannot be read (one line).
        """
        try:
            messages = self.store.read(None)
        except BackendError as exc:
            raise AuditError(f"cannot read the remote copy: {exc}") from None
        out = [r for r in (decode(message, stream) for stream, message in messages) if r is not None]
        if everyone:
            return out
        return [r for r in out if r.host == self.host and r.login == self.login and r.stream_owner == self.login]


def attach(audit: AuditLog, settings: SinkSettings, *, host: str | None = None, login: str | None = None) -> AuditLog:
    """Give ``audit`` the sinks of ``settings``; their queues live beside it."""
    host = host or socket.gethostname()
    login = login or login_name()
    if settings.relay:  # the relay ships the shared copy itself, with root's credentials
        from gpuconsole.core.access.audit_relay import RelaySink

        audit.sinks.append(RelaySink(Path(settings.relay)))
        return audit
    if settings.log_group and settings.region:
        from gpuconsole.backends.registry import cloudwatch_audit_store

        store = cloudwatch_audit_store(settings.log_group, settings.region, profile=settings.profile,
                                       endpoint_url=settings.endpoint_url)
        queue = audit.path.with_name(audit.path.name + ".cloudwatch-queue")
        sink = CloudWatchSink(store, stream_name(settings.stream or host, login), queue, host=host, login=login,
                              account=settings.account)
        sink.max_lag_s = settings.max_lag_s
        audit.sinks.append(sink)
    if settings.syslog:
        queue = audit.path.with_name(audit.path.name + ".syslog-queue")
        from gpuconsole.core.access.audit_syslog import syslog_sender

        audit.sinks.append(QueuedSink(f"the system log ({settings.syslog_socket})", queue,
                                      syslog_sender(settings.syslog_socket), host=host, login=login))
    return audit


class UnusableSink:
    """Stands for sinks whose settings are wrong: nothing runs unanchored, and the reason shows."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def check_writable(self) -> None:
        raise AuditError(f"the audit sink cannot be used: {self.reason}")

    def deliver(self, record: AuditRecord, audit: AuditLog) -> None:
        self.check_writable()


def configured(audit: AuditLog, config: Path | str | None = None) -> AuditLog:
    """``audit`` with the sinks of the configuration file; wrong settings fail closed."""
    try:
        settings = settings_from_config(config)
    except ConfigError as exc:
        audit.sinks.append(UnusableSink(str(exc)))
        return audit
    return attach(audit, settings)


def relay_socket(audit: AuditLog) -> Path | None:
    """The relay ``audit`` sends its records to, when the site names one."""
    return next((s.socket_path for s in audit.sinks if hasattr(s, "socket_path")), None)


def anchor(audit: AuditLog) -> CloudWatchSink | None:
    """The sink whose copy can be read back, when one is set."""
    return next((s for s in audit.sinks if isinstance(s, CloudWatchSink)), None)
