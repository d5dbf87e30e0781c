"""Local HTTPS peers for the TLS tests, with throwaway certificates made by ``trustme``.

* ``tls_ca``: a certificate authority made for the test session, and the certificate it issues
  to ``127.0.0.1`` and ``localhost``.
* :func:`server_context`: a server ``SSLContext`` with that certificate that speaks exactly one
  TLS version (``"1.2"`` or ``"1.3"``), the way an old proxy or a current server would.
* :class:`TlsCannedPrometheus`: the canned Prometheus of :mod:`tests.prometheus_peer`, over HTTPS.
* :class:`HookServer`: a webhook receiver (HTTP or HTTPS) that records what is POSTed to it and
  answers a chosen status, with a ``Location`` for a redirect.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import trustme

from tests.prometheus_peer import CannedPrometheus

TLS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


@pytest.fixture(scope="session")
def tls_ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA, version: str) -> ssl.SSLContext:
    """A server context for 127.0.0.1 / localhost that speaks only TLS ``version``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    context.minimum_version = context.maximum_version = TLS[version]
    return context


def ca_file(ca: trustme.CA, folder: Any) -> str:
    """The CA's certificate as a PEM file in ``folder`` (for ``ca_file`` settings and kubeconfigs)."""
    path = folder / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


class _Tls:
    """Wraps a socketserver's listening socket; each handshake happens in its handler's thread."""

    tls_context: ssl.SSLContext | None = None

    def server_activate(self) -> None:
        super().server_activate()  # type: ignore[misc]
        if self.tls_context is not None:
            self.socket = self.tls_context.wrap_socket(self.socket, server_side=True,  # type: ignore[attr-defined]
                                                       do_handshake_on_connect=False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a refused handshake is what the tests make happen


class TlsCannedPrometheus(_Tls, CannedPrometheus):
    def __init__(self, context: ssl.SSLContext) -> None:
        self.tls_context = context
        super().__init__()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"


class HookServer(_Tls, ThreadingHTTPServer):
    """Records each POST (path, JSON body) and answers ``status`` (with ``location`` for a 3xx)."""

    daemon_threads = True

    def __init__(self, context: ssl.SSLContext | None = None, status: int = 200, location: str = "",
                 host: str = "127.0.0.1") -> None:
        self.tls_context = context
        self.status = status
        self.location = location
        self.posts: list[tuple[str, Any]] = []
        self.gets: list[str] = []
        super().__init__((host, 0), _HookHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"{'https' if self.tls_context else 'http'}://{host}:{port}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _HookHandler(BaseHTTPRequestHandler):
    server: HookServer

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.posts.append((self.path, json.loads(raw) if raw else None))
        self._answer()

    def do_GET(self) -> None:
        self.server.gets.append(self.path)
        self._answer()

    def _answer(self) -> None:
        self.send_response(self.server.status)
        if self.server.location:
            self.send_header("Location", self.server.location)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        return None


@pytest.fixture
def hook_servers() -> Iterator[list[HookServer]]:
    """Start hook servers with ``hook_servers.append(HookServer(...))``; all stopped afterwards."""
    servers: list[HookServer] = []
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()
