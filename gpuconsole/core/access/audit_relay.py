"""The audit relay: one root-owned chain that every login's records reach, and no login can forge.

Without it, each login writes its own log and the shared copy with its own credentials, so a
login can write records in another's name, or point its copy somewhere else. The relay is a
small service run by root (``gpuconsole audit relay``; ``audit relay manifest`` prints its
systemd units) on a Unix socket every login may connect to, named by the site config::

    [audit]
    relay = "/run/gpuconsole/audit.sock"

It takes the login of each record from the socket's peer credentials (``SO_PEERCRED``), never
from the record, appends it to its own chain (root's, 0600), and ships that chain to the copies
of root's own ``[audit]`` table (CloudWatch Logs, syslog) with root's credentials. A login's
records reach it before the action runs: when the relay cannot be reached, the action does not
run (one line says why). Admins and auditors (and root) read the relay's chain through the same
socket: ``audit list``, ``export`` and ``verify`` use it when the site names a relay.

Messages are JSON lines: ``{"op": "append", "role", "action", "target", "params", "result"}``
answered by ``{"ok": true, "seq": N}``; ``{"op": "records"}`` and ``{"op": "verify"}`` for the
readers (verify holds the chain against the relay's CloudWatch copy, when it has one, so root's
own file cut short or rewritten is found too); an error is ``{"ok": false, "error": "one line"}``.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import socketserver
import stat
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuconsole.core.access.audit import AuditError, AuditLog, Verdict
from gpuconsole.model import AuditRecord

TIMEOUT_S = 10.0  # a relay that does not answer within this is down: the action does not run
MAX_MESSAGE = 256 * 1024
_PEERCRED = struct.Struct("3i")  # pid, uid, gid
MANIFEST = """\
# /etc/systemd/system/gpuconsole-audit-relay.socket
[Unit]
Description=gpuconsole audit relay socket

[Socket]
ListenStream={socket}
SocketMode=0666
DirectoryMode=0755

[Install]
WantedBy=sockets.target

# /etc/systemd/system/gpuconsole-audit-relay.service
[Unit]
Description=gpuconsole audit relay: one chain of every login's audit records
Requires=gpuconsole-audit-relay.socket

[Service]
ExecStart={command} audit relay --socket {socket} --db {db}
User=root
StateDirectory=gpuconsole
UMask=0077
Restart=always
NoNewPrivileges=true
ProtectSystem=strict
ReadWritePaths=/var/lib/gpuconsole

[Install]
WantedBy=multi-user.target
"""


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, as the kernel tells it."""
    _pid, uid, _gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return uid


def login_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class AuditRelay:
    """The relay's side: its chain, and who may read it.

    Args:
        log: the relay's own chain (root's).
        may_read: whether the login with this uid may read the chain (admins, auditors, root).
        role_of: the role the site gives a login (recorded beside what the client claimed).
        verify: the verdict on the chain (``audit_remote.verify_anchored``: against the relay's
            own copy, which must be a prefix of this chain; default: the chain and its head).
    """

    def __init__(self, log: AuditLog, may_read: Callable[[int], bool], role_of: Callable[[str], str | None], *,
                 verify: Callable[[], Verdict] | None = None) -> None:
        self.log = log
        self.may_read = may_read
        self.role_of = role_of
        self.verify = verify or log.verify
        self._server: socketserver.UnixStreamServer | None = None

    def answer(self, uid: int, message: dict[str, Any]) -> dict[str, Any]:
        """The answer to one message from the login ``uid``."""
        op = message.get("op")
        try:
            if op == "append":
                return {"ok": True, "seq": self._append(uid, message).seq}
            if op in ("records", "verify"):
                if not self.may_read(uid):
                    return {"ok": False, "error": f"{login_of(uid)} may not read the relay's audit log "
                                                  "(admins and auditors may)"}
                if op == "records":
                    return {"ok": True, "records": [r.as_dict() for r in self.log.records()]}
                verdict = self.verify()
                return {"ok": verdict.ok, "records": verdict.records, "message": verdict.message,
                        "bad_seq": verdict.bad_seq, "unreadable": verdict.unreadable, "hint": verdict.hint}
            if op == "ping":
                return {"ok": True}
        except AuditError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": False, "error": f"unknown request {op!r}"}

    def _append(self, uid: int, message: dict[str, Any]) -> AuditRecord:
        login = login_of(uid)
        fields = {key: message.get(key) for key in ("role", "action", "target", "result")}
        if not all(isinstance(v, str) for v in fields.values()):
            raise AuditError("a record needs role, action, target and result as text")
        params = message.get("params") or {}
        if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
            raise AuditError("a record's params are a table of text")
        pairs = [(str(k), v) for k, v in params.items()]
        claimed, site_role = message.get("actor"), self.role_of(login)
        if isinstance(claimed, str) and claimed != login:
            pairs.append(("claimed_actor", claimed))  # what the client said, kept as evidence
        role = fields["role"] if site_role is None or site_role == fields["role"] else site_role
        if role != fields["role"]:
            pairs.append(("claimed_role", str(fields["role"])))
        return self.log.append(login, role, str(fields["action"]), str(fields["target"]), pairs, str(fields["result"]))

    # ------------------------------------------------------------------ serving
    def serve(self, socket_path: Path, *, ready: threading.Event | None = None, inherited_fd: int | None = None) -> None:
        """Answer on ``socket_path`` (made 0666 in a 0755 folder: every login may connect) until
        :meth:`stop`; ``inherited_fd``: the listening socket systemd passed instead."""
        relay = self

        class Handler(socketserver.StreamRequestHandler):
            timeout = TIMEOUT_S

            def handle(self) -> None:
                uid = peer_uid(self.request)
                for line in iter(lambda: self.rfile.readline(MAX_MESSAGE), b""):
                    try:
                        message = json.loads(line)
                        answer = relay.answer(uid, message) if isinstance(message, dict) else None
                    except (ValueError, UnicodeDecodeError):
                        answer = None
                    answer = answer or {"ok": False, "error": "not a JSON object"}
                    self.wfile.write(json.dumps(answer).encode() + b"\n")

        if inherited_fd is None:
            socket_path = Path(socket_path)
            socket_path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            # Bound, listening and opened to every login under a private name first: the path
            # appears only once the relay answers there (a client never meets a refusing socket).
            staging = socket_path.with_name(f".{socket_path.name}.{os.getpid()}")
            staging.unlink(missing_ok=True)
            try:
                server = socketserver.ThreadingUnixStreamServer(str(staging), Handler)
                os.chmod(staging, 0o666)
                os.replace(staging, socket_path)
            except BaseException:
                staging.unlink(missing_ok=True)  # no half-made socket left beside the real one
                raise
        else:
            server = socketserver.ThreadingUnixStreamServer(str(socket_path), Handler, bind_and_activate=False)
            server.socket = socket.socket(fileno=inherited_fd)
        server.daemon_threads = True
        self._server = server
        if ready is not None:
            ready.set()
        server.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def systemd_socket() -> int | None:
    """The listening socket systemd passed this process (socket activation), if any."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()) and int(os.environ.get("LISTEN_FDS", "0") or 0) >= 1:
        return 3
    return None


# --------------------------------------------------------------------------- the logins' side


def ask(socket_path: Path, message: dict[str, Any]) -> dict[str, Any]:
    """Send one message to the relay and read its answer.

    Raises:
        AuditError: the relay cannot be reached, or does not answer in time.
    """
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(TIMEOUT_S)
            conn.connect(str(socket_path))
            conn.sendall(json.dumps(message).encode() + b"\n")
            with conn.makefile("rb") as answers:
                line = answers.readline(64 * 1024 * 1024)
    except OSError as exc:
        raise AuditError(f"the audit relay at {socket_path} cannot be reached ({exc.strerror or exc}): "
                         "nothing runs until it is back") from None
    try:
        answer = json.loads(line)
    except ValueError:
        raise AuditError(f"the audit relay at {socket_path} did not answer") from None
    return answer if isinstance(answer, dict) else {"ok": False, "error": "the relay's answer is not a JSON object"}


class RelaySink:
    """The sink of a login whose site names a relay: every record must reach it, or the
    action it belongs to does not run (no queue: the relay is on this machine)."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = Path(socket_path)
        self.name = f"the audit relay ({socket_path})"

    def check_writable(self) -> None:
        answer = ask(self.socket_path, {"op": "ping"})
        if not answer.get("ok"):
            raise AuditError(f"the audit relay refused: {answer.get('error')}")

    def deliver(self, record: AuditRecord, audit: AuditLog) -> None:
        params = json.loads(record.params) if record.params else {}
        answer = ask(self.socket_path, {"op": "append", "actor": record.actor, "role": record.role,
                                        "action": record.action, "target": record.target, "params": params,
                                        "result": record.result})
        if not answer.get("ok"):
            raise AuditError(f"the audit relay refused record {record.seq}: {answer.get('error')}")


def relay_records(socket_path: Path) -> list[AuditRecord]:
    """The relay's chain, for an admin or auditor."""
    answer = ask(socket_path, {"op": "records"})
    if not answer.get("ok"):
        raise AuditError(str(answer.get("error")))
    return [AuditRecord(**_record_fields(r)) for r in answer.get("records", [])]


def relay_verdict(socket_path: Path) -> Verdict:
    """The relay's verify of its own chain."""
    answer = ask(socket_path, {"op": "verify"})
    if "error" in answer:
        raise AuditError(str(answer["error"]))
    return Verdict(bool(answer.get("ok")), int(answer.get("records", 0)), str(answer.get("message", "")),
                   answer.get("bad_seq"), bool(answer.get("unreadable")), str(answer.get("hint", "")))


def _record_fields(row: dict[str, Any]) -> dict[str, Any]:
    params = row.get("params")
    return {"seq": row["seq"], "ts": row["ts"], "actor": row["actor"], "role": row["role"], "action": row["action"],
            "target": row["target"], "params": params if isinstance(params, str) else json.dumps(params, sort_keys=True, ensure_ascii=False),
            "result": row["result"], "prev_hash": row["prev_hash"], "hash": row["hash"]}


def private_db(path: Path) -> None:
    """Refuse a relay database another login could write: root's, in a folder only root writes."""
    folder = Path(path).parent
    if folder.exists() and folder.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise AuditError(f"{folder} may be written by others: the relay keeps its chain where only root writes")
