"""One Prometheus server over HTTP: its settings, a keep-alive pool, authentication, typed errors.

:class:`PrometheusClient` is shared by the adapter's sources (the GPUs of the DCGM exporter, the
serving figures of inference servers): one pool of connections, TLS always verified, a bearer
token (re-read on every request) or basic auth sent only over https or to this host, and every
failure one of the one-line errors of :mod:`gpuconsole.backends.base`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendThrottled,
    BackendTimeout,
    BackendUnavailable,
)
from gpuconsole.backends.prometheus import mapping as pm

TOKEN_ENV = "GPUCONSOLE_PROMETHEUS_TOKEN"
PASSWORD_ENV = "GPUCONSOLE_PROMETHEUS_PASSWORD"
SETUP_HINT = "pass --prometheus URL (or set url in the [prometheus] table of the config file)"
PARALLEL_QUERIES = 4  # instant queries in flight at once during a poll


@dataclass(frozen=True, slots=True)
class PrometheusSettings:
    """Where Prometheus is and how to authenticate (``--prometheus`` … or ``[prometheus]``).

    Attributes:
        url: the server's base URL, e.g. ``https://prometheus.example.com`` (a path prefix such
            as ``/prometheus`` is kept).
        token_file: a file holding a bearer token.
        username: basic-auth user; the password comes from ``password_file`` or
            ``$GPUCONSOLE_PROMETHEUS_PASSWORD``.
        ca_file: PEM bundle to verify the server with instead of the system's CA store.
        timeout: seconds to connect, and seconds to wait for each answer.
        selector: label matchers added to every query, e.g. ``cluster="prod"``.
        compress: ask for gzip-compressed answers: 3–4 times fewer bytes over a slow link to a
            distant Prometheus, for some CPU to decompress them (off: on a fast network the
            bytes cost less than the decompression).
    """

    url: str
    token_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    timeout: float = 5.0
    selector: str = ""
    compress: bool = False

    def check(self, env: Mapping[str, str] = os.environ) -> PrometheusSettings:
        """The settings if they can be used; ValueError with one line otherwise."""
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {self.url!r} (e.g. https://prometheus.example.com)")
        if parts.query or parts.fragment:
            raise ValueError(f"the Prometheus URL takes no query or fragment: {self.url!r}")
        if self.token_file and self.username:
            raise ValueError("give a bearer token or a user name, not both")
        sends = bool(self.token_file or self.username or env.get(TOKEN_ENV))
        from gpuconsole.backends.tls import is_loopback  # TLS code loads when a source is set up

        if sends and parts.scheme == "http" and not is_loopback(parts.hostname or ""):
            raise ValueError(f"credentials are only sent over https (or http to this host), not to {self.url}")
        for name in ("token_file", "password_file", "ca_file"):
            path = getattr(self, name)
            if path and not Path(path).expanduser().is_file():
                raise ValueError(f"{name.replace('_', ' ')}: no such file: {path}")
        if not 0 < self.timeout <= 300:
            raise ValueError(f"timeout must be more than 0 and at most 300 s, got {self.timeout:g}")
        if self.selector:
            pm.check_selector(self.selector)
        return self


def _one_line(text: object, limit: int = 160) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _one_line(text: object, limit: int = 160) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class PrometheusClient:
    """GET requests to one Prometheus, a few at a time, over one keep-alive pool.

    Args:
        settings: where and how to connect (checked by :meth:`PrometheusSettings.check`).
        env: where the token and password variables are read.
    """

    def __init__(self, settings: PrometheusSettings, env: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.env = env
        parts = urllib.parse.urlsplit(settings.url)
        self.host = parts.netloc
        self.name = f"prometheus {parts.hostname}" + (f":{parts.port}" if parts.port else "")
        self._base = settings.url.rstrip("/")
        self._lock = threading.Lock()
        self._pool: Any = None
        self._executor: ThreadPoolExecutor | None = None

    def _http(self) -> Any:
        with self._lock:
            if self._pool is None:
                import urllib3  # imported on first use, in the poll's thread, not at start-up

                from gpuconsole.backends.tls import client_context

                ca = str(Path(self.settings.ca_file).expanduser()) if self.settings.ca_file else None
                self._pool = urllib3.PoolManager(
                    ssl_context=client_context(self.name, ca),  # the TLS floor of [tls] min_version
                    num_pools=2,
                    maxsize=PARALLEL_QUERIES,
                    cert_reqs="CERT_REQUIRED",
                    ca_certs=ca,
                    timeout=urllib3.Timeout(connect=self.settings.timeout, read=self.settings.timeout),
                    retries=False,
                )
            return self._pool

    def headers(self) -> dict[str, str]:
        s = self.settings
        headers = {"Accept": "application/json", "User-Agent": "gpuconsole",
                   "Accept-Encoding": "gzip" if s.compress else "identity"}
        token = None
        if s.token_file:
            token = _read_secret(s.token_file, "token file")
        elif not s.username:
            token = self.env.get(TOKEN_ENV) or None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif s.username:
            password = _read_secret(s.password_file, "password file") if s.password_file else self.env.get(PASSWORD_ENV, "")
            pair = f"{s.username}:{password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        return headers

    def get(self, path: str, params: Mapping[str, str], headers: Mapping[str, str], *, raw: bool = False) -> Any:
        """GET ``path`` and return the decoded ``success`` answer (with ``raw``, its bytes,
        undecoded), or raise a backend error."""
        import urllib3

        url = f"{self._base}{path}?{urllib.parse.urlencode(params)}"
        where = f"Prometheus at {self.host}"
        try:
            response = self._http().request("GET", url, headers=dict(headers), redirect=False)
        except urllib3.exceptions.MaxRetryError as exc:  # retries=False still wraps some errors
            raise _transport_error(exc.reason or exc, where, self.settings.timeout) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise _transport_error(exc, where, self.settings.timeout) from exc
        body = response.data
        status = response.status
        if status in (401, 403):
            raise BackendPermissionDenied(f"{where} refused the credentials (HTTP {status})")
        if status == 429:
            raise BackendThrottled(f"{where} asked to slow down (HTTP 429)")
        if raw and status == 200 and body.startswith(b'{"status":"success"'):
            return body
        try:
            answer = json.loads(body)
        except ValueError:
            if status != 200:
                raise BackendError(f"{where} answered HTTP {status}") from None
            raise BackendError(f"{where} answered something that is not JSON: {_one_line(body[:120].decode('utf-8', 'replace'))}") from None
        if not isinstance(answer, dict):
            raise BackendError(f"{where} answered JSON of an unknown shape")
        if answer.get("status") != "success":
            kind = answer.get("errorType") or f"HTTP {status}"
            raise BackendError(f"{where}: {kind}: {_one_line(answer.get('error') or 'no message')}")
        if status != 200:
            raise BackendError(f"{where} answered HTTP {status}")
        return body if raw else answer

    def executor(self) -> ThreadPoolExecutor:
        """The threads that send a poll's queries, :data:`PARALLEL_QUERIES` at a time."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(PARALLEL_QUERIES, thread_name_prefix="prometheus")
            return self._executor

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        if pool is not None:
            pool.clear()


def _read_secret(path: str | None, what: str) -> str:
    if not path:
        return ""
    try:
        return Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise BackendUnavailable(f"cannot read the {what} {path}: {exc.strerror or exc}", hint=SETUP_HINT) from exc


def _transport_error(exc: BaseException, where: str, timeout: float) -> BackendError:
    import urllib3

    errors = urllib3.exceptions
    # NewConnectionError is a ConnectTimeoutError to urllib3: a refused connection is tested first.
    if isinstance(exc, errors.NewConnectionError):
        return BackendError(f"cannot reach {where}: {_one_line(_reason(exc))}")
    if isinstance(exc, (errors.TimeoutError, TimeoutError)):
        return BackendTimeout(f"no answer from {where} in {timeout:g} s")
    if isinstance(exc, errors.SSLError):
        return BackendError(f"TLS with {where} failed: {_one_line(_reason(exc))}")
    if isinstance(exc, errors.ProtocolError):
        return BackendError(f"{where} closed the connection: {_one_line(_reason(exc))}")
    return BackendError(f"{where}: {_one_line(_reason(exc))}")


def _reason(exc: BaseException) -> str:
    # urllib3 writes "HTTPConnection(host=…, port=…): Failed to establish a new connection: [Errno 111] …"
    text = re.sub(r"^(<[^>]*>|\w*HTTPS?Connection(Pool)?\([^)]*\)): ", "", str(exc))
    return text or type(exc).__name__
