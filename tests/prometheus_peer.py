"""Test peers for the Prometheus source, all on 127.0.0.1.

* :class:`CannedPrometheus`: an HTTP server answering ``/api/v1/query`` and
  ``/api/v1/query_range`` from canned JSON, recording each request (query and headers), and
  misbehaving on demand (a status, a delay, a body that is not JSON).
* :class:`FaultProxy`: a small HTTP proxy in front of a real Prometheus that passes requests
  through, or answers errors, or answers slowly, or is down (refuses connections).
* :func:`exposition_vectors`: the series of a ``/metrics`` text as the instant-query vectors a
  Prometheus would answer (labels as scraped), for tests of the exporter and the parser together.
* :func:`find_prometheus`, :func:`start_prometheus`: a real Prometheus server process.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROMETHEUS = "/usr/bin/prometheus"


# --------------------------------------------------------------------------- canned answers


def vector_answer(result: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def series(value: float | str, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [1764480000.0, str(value)]}


class CannedPrometheus(ThreadingHTTPServer):
    """Answers each query with ``answers[metric]`` (the metric named in the query), else an
    empty vector; ``range_answers[name]`` likewise for ``query_range``.

    With ``compact``, an instant query's answer is written as Prometheus writes it: no spaces,
    labels sorted, every sample at the evaluation time (the query's ``time``).
    """

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CannedHandler)
        self.answers: dict[str, Any] = {}
        self.range_answer: Callable[[str], Any] | None = None
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.status: int | None = None
        self.body: bytes | None = None
        self.delay = 0.0
        self.compact = False
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _CannedHandler(BaseHTTPRequestHandler):
    server: CannedPrometheus

    def do_GET(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(parts.query))
        with self.server.lock:
            self.server.requests.append((parts.path, params, dict(self.headers.items())))
        if self.server.delay:
            time.sleep(self.server.delay)
        if self.server.status is not None:
            self._send(self.server.status, self.server.body or b"{}")
            return
        if self.server.body is not None:
            self._send(200, self.server.body)
            return
        query = params.get("query", "")
        if parts.path.endswith("/query_range"):
            answer = self.server.range_answer(query) if self.server.range_answer else {
                "status": "success", "data": {"resultType": "matrix", "result": []}}
        else:
            metric = next((m for m in self.server.answers if re.search(rf"\b{m}\b", query)), None)
            answer = self.server.answers.get(metric) if metric else None
            if answer is None:
                answer = vector_answer([])
            elif isinstance(answer, list):
                answer = vector_answer(answer)
            if self.server.compact:
                self._send(200, _as_prometheus_writes(answer, params.get("time")))
                return
        self._send(200, json.dumps(answer).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if "gzip" in self.headers.get("Accept-Encoding", ""):  # as Prometheus answers a client that asks
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _as_prometheus_writes(answer: dict[str, Any], at: str | None) -> bytes:
    data = answer.get("data", {})
    if answer.get("status") == "success" and data.get("resultType") == "vector":
        ms = round(float(at) * 1000) if at else 0
        when = ms // 1000 if ms % 1000 == 0 else ms / 1000
        result = [{"metric": dict(sorted(item["metric"].items())), "value": [when, item["value"][1]]}
                  for item in data["result"]]
        answer = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return json.dumps(answer, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- the exposition format

_LINE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """``(metric, labels, value)`` of every sample line of a text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        assert match, f"not an exposition line: {line!r}"
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(match.group(2))}
        out.append((match.group(1), labels, float(match.group(3))))
    return out


def exposition_vectors(text: str) -> dict[str, list[dict[str, Any]]]:
    """The instant-query result of each metric of an exposition, as Prometheus would answer it."""
    vectors: dict[str, list[dict[str, Any]]] = {}
    for metric, labels, value in parse_exposition(text):
        vectors.setdefault(metric, []).append({"metric": labels, "value": [0, repr(value)]})
    return vectors


# --------------------------------------------------------------------------- a proxy that fails


class FaultProxy(ThreadingHTTPServer):
    """Forwards GETs to ``target``; ``mode`` is ``pass``, ``error`` (HTTP 503 with a Prometheus
    error body), ``slow`` (waits ``delay`` seconds, then passes) or ``down`` (closes every
    connection without an answer)."""

    daemon_threads = True

    def __init__(self, target: str) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.target = target.rstrip("/")
        self.mode = "pass"
        self.delay = 3.0
        self.release = threading.Event()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def set(self, mode: str) -> None:
        self.mode = mode
        if mode == "pass":
            self.release.set()
        else:
            self.release.clear()

    def stop(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


class _ProxyHandler(BaseHTTPRequestHandler):
    server: FaultProxy

    def do_GET(self) -> None:
        mode = self.server.mode
        if mode == "down":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if mode == "error":
            body = json.dumps({"status": "error", "errorType": "unavailable",
                               "error": "the storage is not ready"}).encode()
            self._send(503, body)
            return
        if mode == "slow":
            self.server.release.wait(self.server.delay)
        try:
            with urllib.request.urlopen(self.server.target + self.path, timeout=10) as answer:
                body = answer.read()
                status = answer.status
        except urllib.error.HTTPError as exc:
            body, status = exc.read(), exc.code
        self._send(status, body)

    def _send(self, status: int, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        return None


# --------------------------------------------------------------------------- a real Prometheus


def find_prometheus() -> str | None:
    found = shutil.which("prometheus")
    if found:
        return found
    return PROMETHEUS if os.access(PROMETHEUS, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusProcess:
    """A Prometheus server of its own, scraping ``targets`` every second (or as ``scrape``, the
    ``scrape_configs`` section of its configuration, says)."""

    def __init__(self, binary: str, workdir: Path, targets: list[str], scrape: str | None = None) -> None:
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            + (scrape or "scrape_configs:\n  - job_name: dcgm\n    static_configs:\n"
               f"      - targets: [{', '.join(repr(t) for t in targets)}]\n"),
            encoding="utf-8",
        )
        self.log = (workdir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, promql: str, at: float | None = None) -> list[Any]:
        """The answer of ``promql`` now, or evaluated at ``at`` (POSIX seconds)."""
        params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.loads(answer.read())["data"]["result"]

    def wait_for(self, promql: str, predicate: Callable[[list[Any]], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.process.returncode}")
            try:
                if predicate(self.query(promql)):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus never answered {promql!r} as expected")
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self.log.close()
