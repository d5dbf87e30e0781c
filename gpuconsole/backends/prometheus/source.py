"""Whole-fleet GPU telemetry from Prometheus, where NVIDIA's DCGM exporter publishes it.

:class:`PrometheusGpus` sends one instant query per metric for the whole fleet (never one per
GPU) over one keep-alive pool, and re-reads the series that change seldom only now and then.
TLS is always verified; a bearer token (re-read each poll) or basic auth goes only over https
or to this host. Failures are the one-line errors of :mod:`gpuconsole.backends.base`.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
import time
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
    Capability,
)
from gpuconsole.backends.prometheus import answers as pa
from gpuconsole.backends.prometheus import mapping as pm
from gpuconsole.model import GpuReading, GpuSample

log = logging.getLogger(__name__)

TOKEN_ENV = "GPUCONSOLE_PROMETHEUS_TOKEN"
PASSWORD_ENV = "GPUCONSOLE_PROMETHEUS_PASSWORD"
SETUP_HINT = "pass --prometheus URL (or set url in the [prometheus] table of the config file)"
PARALLEL_QUERIES = 4  # instant queries in flight at once during a poll
SLOW_EVERY_S = 15.0  # how often the identity labels and the seldom-changing values are read again


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


class PrometheusGpus:
    """Every GPU the DCGM exporter reports to one Prometheus, behind the GPU source interface.

    Args:
        settings: where and how to connect (checked by :meth:`PrometheusSettings.check`).
        env: where the token and password variables are read.
    """

    capabilities: frozenset[Capability] = frozenset({Capability.MIG, Capability.HISTORY})

    def __init__(self, settings: PrometheusSettings, env: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.env = env
        parts = urllib.parse.urlsplit(settings.url)
        self.host = parts.netloc
        self.name = f"prometheus {parts.hostname}" + (f":{parts.port}" if parts.port else "")
        self._base = settings.url.rstrip("/")
        # The Hub waits this long for a poll: a request's own timeout is reported as such first.
        self.poll_timeout = 2.0 * settings.timeout
        self._queries = pm.instant_queries(settings.selector)
        self._by_uuid = True
        self._roster: pa.Roster | None = None  # what the identity labels name, read every SLOW_EVERY_S
        self._slow: dict[str, pa.Column] = {}
        self._size: pa.Column | None = None  # memory size (used + free) per GPU and instance at the last full read
        # The last answer of each query read every SLOW_EVERY_S (without its times), and what was read from it.
        self._kept: dict[str, tuple[bytes, pa.Column | pa.Roster]] = {}
        self._slow_at = 0.0
        self._polled_at: float | None = None  # when the last poll began (monotonic)
        # The read of the seldom-changing answers planned between two polls: its thread, and the
        # event that starts it before its moment (see _plan_read_between_polls).
        self._between: tuple[threading.Thread, threading.Event] | None = None
        self._between_failed = False  # that read failed: the next poll reads everything itself
        self._state = threading.Lock()  # the kept answers, replaced by that read while the console runs
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pool: Any = None
        self._executor: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ HTTP
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

    def _headers(self) -> dict[str, str]:
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

    def _get(self, path: str, params: Mapping[str, str], headers: Mapping[str, str], *, raw: bool = False) -> Any:
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

    # ------------------------------------------------------------------ GpuSource
    def poll_gpus(self) -> GpuReading:
        """Every GPU of the fleet: one instant query per metric, for the whole fleet.

        The metrics that change between scrapes are read on every poll. The identity labels
        (model, pods) and the values that seldom change are read by the first poll, then every
        :data:`SLOW_EVERY_S` between two polls (half-way, so that a refresh only waits for what
        changes between scrapes), and by the poll itself when a GPU appears that they do not
        name yet, or when the last read between polls failed.

        Raises:
            BackendTimeout, BackendPermissionDenied, BackendThrottled, BackendError: see the module.
        """
        headers = self._headers()
        now = time.time()
        started = time.monotonic()
        gap = started - self._polled_at if self._polled_at is not None else None
        self._polled_at = started
        if self._roster is None or self._between_failed:
            self.settle()
            self._between_failed = False
            answers = self._query((pm.IDENTITY, *pm.SLOW, *pm.FAST), now, headers)
            self._keep_slow(answers, answers.get(pm.FB_USED))
        else:
            answers = self._query(pm.FAST, now, headers)
        if self._roster is not None and not self._roster.keyed_by_uuid and self._by_uuid:
            # An exporter without UUID labels: key the values by node and index from now on.
            self.settle()
            self._by_uuid = False
            self._queries = pm.instant_queries(self.settings.selector, by_uuid=False)
            self._kept.clear()
            answers = self._query(pm.FAST, now, headers)
        elif self._unnamed(answers.get(pm.ANCHOR)):
            self.settle()  # a read between polls may be naming it right now
            if self._unnamed(answers.get(pm.ANCHOR)):
                self._keep_slow(self._query((pm.IDENTITY, *pm.SLOW), now, headers), answers.get(pm.FB_USED))
        with self._state:
            roster, slow, size = self._roster, self._slow, self._size
        columns = {**slow, **{m: answers[m] for m in pm.FAST if m in answers}}
        if size is not None:
            columns[pm.FB_FREE] = pa.less(size, columns.get(pm.FB_USED))
        roster = (roster or pa.Roster({})).including(columns, first=pm.ANCHOR)
        gpus = pm.build_gpus(columns, roster)
        if not gpus:
            raise BackendError(f"Prometheus at {self.host} has no DCGM exporter series ({pm.ANCHOR}): "
                               "is the exporter scraped?")
        self._plan_read_between_polls(started, gap)
        return GpuReading(gpus, now, pm.driver_versions(roster))

    def _plan_read_between_polls(self, started: float, gap: float | None) -> None:
        """Read the seldom-changing answers half-way to the next poll (expected ``gap`` seconds
        after this one) when they will be :data:`SLOW_EVERY_S` old by then."""
        between = self._between
        if gap is None or self._closed.is_set() or (between is not None and between[0].is_alive()):
            return
        if started + gap - self._slow_at < SLOW_EVERY_S:
            return
        go = threading.Event()
        thread = threading.Thread(target=self._read_between_polls, args=(min(gap / 2.0, SLOW_EVERY_S), go),
                                  name="prometheus-seldom", daemon=True)
        self._between = (thread, go)
        thread.start()

    def _read_between_polls(self, delay: float, go: threading.Event) -> None:
        go.wait(delay)
        if self._closed.is_set():
            return
        try:
            answers = self._query((pm.IDENTITY, pm.FB_USED, *pm.SLOW), time.time(), self._headers())
            self._keep_slow(answers, answers.get(pm.FB_USED))
        except BaseException as exc:  # noqa: BLE001 - the next poll reads everything, and fails as it may
            log.debug("reading the seldom-changing answers between polls failed: %s", exc)
            self._between_failed = True

    def settle(self, timeout: float | None = None) -> None:
        """Finish the read of the seldom-changing answers planned between polls, if any: start
        it now if it is still waiting for its moment, and wait for it (at most ``timeout`` s)."""
        between = self._between
        if between is not None:
            thread, go = between
            go.set()
            thread.join(timeout)

    def _keep_slow(self, answers: dict[str, Any], used: pa.Column | None) -> None:
        """Keep the identity and the seldom-changing answers until the next full read. Free
        memory moves with the memory used, which every poll reads: what is kept of it is the
        memory size then (used + free), and each poll's free memory is that size less its used."""
        slow = {m: answers[m] for m in pm.SLOW if m in answers}
        free = slow.pop(pm.FB_FREE, None)
        size = pa.plus(free, used) if free is not None else None
        with self._state:
            self._roster, self._slow, self._size = answers[pm.IDENTITY], slow, size
            self._slow_at = time.monotonic()

    def _unnamed(self, column: pa.Column | None) -> bool:
        """Whether the anchor metric has a series the kept identity labels do not name."""
        if column is None:
            return False
        roster = self._roster or pa.Roster({})
        return not (column.whole.keys() <= roster.gpus.keys() and column.parts.keys() <= roster.named.keys())

    def _query(self, names: tuple[str, ...], now: float, headers: Mapping[str, str]) -> dict[str, Any]:
        """Run the named instant queries at ``now``, a few at a time; the first failure is raised.

        Returns:
            ``{metric: Column}``, and the :class:`~gpuconsole.backends.prometheus.answers.Roster`
            of the identity query under :data:`~gpuconsole.backends.prometheus.mapping.IDENTITY`.
        """
        params = {"time": f"{now:.3f}"}
        executor = self._pool_of_workers()
        previous = self._roster
        kept = dict(self._kept)

        def one(name: str) -> pa.Column | pa.Roster:
            body = self._get("/api/v1/query", {"query": self._queries[name], **params}, headers, raw=True)
            seldom = name not in pm.FAST
            if seldom:
                # Read again only when it changed: these answers mostly stay the same for hours.
                same = pa.without_times(body)
                last = kept.get(name)
                if last is not None and last[0] == same:
                    return last[1]
            try:
                read = pa.read_roster(body, previous) if name == pm.IDENTITY else pa.read_values(body)
            except pa.PrometheusAnswerError as exc:
                raise BackendError(f"Prometheus at {self.host}: {exc} for {name}") from exc
            if seldom:
                self._kept[name] = (same, read)
            return read

        futures = {name: executor.submit(one, name) for name in names}
        results: dict[str, Any] = {}
        error: BaseException | None = None
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except BaseException as exc:  # noqa: BLE001 - the first failure is raised below
                error = error or exc
        if error is not None:
            raise error
        return results

    def history(self, uuid: str, since: float, until: float, step: float) -> tuple[GpuSample, ...]:
        """One GPU's utilization, memory, temperature and power from ``since`` to ``until``,
        one sample every ``step`` seconds (``query_range``), oldest first."""
        headers = self._headers()
        step = max(1.0, float(step))
        params = {"start": f"{since:.3f}", "end": f"{until:.3f}", "step": f"{step:g}"}
        series: dict[str, list[Any]] = {}
        for name, query in pm.history_queries(uuid, self.settings.selector).items():
            answer = self._get("/api/v1/query_range", {"query": query, **params}, headers)
            try:
                series[name] = pa.matrix(answer)
            except pa.PrometheusAnswerError as exc:
                raise BackendError(f"Prometheus at {self.host}: {exc}") from exc
        return pm.samples(series)

    def _pool_of_workers(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(PARALLEL_QUERIES, thread_name_prefix="prometheus")
            return self._executor

    def close(self) -> None:
        self._closed.set()
        between = self._between
        if between is not None:
            between[1].set()  # a read still waiting for its moment ends at once
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
