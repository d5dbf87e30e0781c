"""Test peers for notifications, all on 127.0.0.1.

* :class:`Receiver`: an HTTP server that records every JSON body POSTed to it (a webhook, Slack,
  PagerDuty, or Alertmanager's own webhook receiver), and can be down (answers 503) on demand.
* :func:`start_alertmanager`: a real Alertmanager (Debian's ``prometheus-alertmanager``) routing
  every alert to a :class:`Receiver`, with group_wait and group_interval of a second.
* :func:`fleet`: a hand-built :class:`FleetSnapshot` with a budget crossing, an idle billed GPU
  and an autopilot action, each switchable.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpuconsole.model import (
    Budget,
    BudgetStatus,
    FleetSnapshot,
    Gpu,
    IdleGpu,
    Instance,
    InstanceState,
    Market,
    Threshold,
)
from gpuconsole.model.autopilot import AutopilotRuleStatus

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"


class Receiver(ThreadingHTTPServer):
    """Records ``(path, body, headers)`` of each POST; ``down`` makes it answer 503."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.posts: list[tuple[str, Any, dict[str, str]]] = []
        self.down = False
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def bodies(self, path: str = "") -> list[Any]:
        with self.lock:
            return [b for p, b, _ in self.posts if p.startswith(path)]

    def wait_for(self, predicate: Callable[[list[Any]], bool], path: str = "", timeout: float = 30.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.bodies(path)
            if predicate(got):
                return got
            time.sleep(0.1)
        raise AssertionError(f"receiver: condition not met in {timeout} s; got {self.bodies(path)!r}")

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.server.down:
            self.send_response(503)
            self.end_headers()
            return
        with self.server.lock:
            self.server.posts.append((self.path, json.loads(raw), dict(self.headers)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_alertmanager(tmp: Path, receiver_url: str) -> tuple[subprocess.Popen[bytes], str]:
    """A real Alertmanager whose one route groups by alertname and sends to ``receiver_url``."""
    port = free_port()
    config = tmp / "alertmanager.yml"
    config.write_text(f"""
route:
  receiver: local
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: local
    webhook_configs:
      - url: {receiver_url}/am
        send_resolved: true
""")
    proc = subprocess.Popen([ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp / 'am-data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                             "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:  # noqa: S310 - loopback
                if answer.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("Alertmanager did not become ready")


def fleet(now: float, t0: float | None = None, *, budget: bool = True, idle: bool = True, autopilot: bool = True, demo: bool = False) -> FleetSnapshot:
    """A snapshot with the conditions asked for: a budget past 80%, a GPU idle for 40 minutes on
    a billed instance, an autopilot rule that acted a minute ago (times counted from ``t0``,
    the test's start, so each condition keeps its identity)."""
    t0 = now if t0 is None else t0
    gpu = Gpu("GPU-1111", "node-a", 0, "NVIDIA A100", 0.0 if idle else 90.0, 0 if idle else 1000, 81920, 40, 60.0, 400.0)
    inst = Instance("i-0abc", "p4d.24xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, InstanceState.RUNNING,
                    now - 7200, 32.0, gpus=8, node="node-a")
    b = Budget("team-a", 1000.0, thresholds=(Threshold(80.0),))
    return FleetSnapshot(
        taken_at=now, gpus=(gpu,), instances=(inst,),
        budgets=(BudgetStatus(b, 850.0, 1200.0, 4.0, crossed=(Threshold(80.0),) if budget else ()),),
        idle=(IdleGpu("GPU-1111", "node-a", "i-0abc", "alice", t0 - 2400, 4.0, 2.67),) if idle else (),
        autopilot=(AutopilotRuleStatus("autostop", "idle-stop", "all", "", acted="stopped i-0def",
                                       acted_at=t0 - 60),) if autopilot else (),
        demo=demo)


class SmtpServer:
    """A local SMTP server (aiosmtpd) that speaks STARTTLS with a throwaway CA's certificate,
    refuses mail before TLS, and logs in only ``user`` with ``password``; ``messages`` are the
    parsed e-mails received."""

    def __init__(self, tmp: Path, user: str, password: str) -> None:
        import ssl

        import trustme
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        ca = trustme.CA()
        self.ca_file = tmp / "smtp-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        self.messages: list[Any] = []
        server = self

        class Handler:
            async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
                import email

                server.messages.append(email.message_from_bytes(envelope.original_content))
                return "250 OK"

        def authenticate(_server: Any, _session: Any, _envelope: Any, _mechanism: str, data: Any) -> Any:
            return AuthResult(success=data.login == user.encode() and data.password == password.encode())

        self.port = free_port()
        self._controller = Controller(Handler(), hostname="127.0.0.1", port=self.port, tls_context=context,
                                      require_starttls=True, authenticator=authenticate, auth_require_tls=True)
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()
