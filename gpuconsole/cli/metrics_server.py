"""The simulated DCGM exporter's HTTP server: ``/metrics`` rendered from the simulated world.

Apart from the command's parser (:mod:`gpuconsole.cli.exporter`), so that parsing any command
line does not import ``http.server`` and the simulator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gpuconsole.backends.sim import render

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsServer(ThreadingHTTPServer):
    """Serves ``metrics()`` on ``/metrics`` (and nothing else) from a daemon thread.

    Args:
        metrics: renders the exposition text; called once per scrape.
        host, port: where to listen (port 0: any free port, see :attr:`port`).
    """

    daemon_threads = True

    def __init__(self, metrics: Callable[[], str], host: str = "127.0.0.1", port: int = 0) -> None:
        self.metrics = metrics
        self.scrapes = 0
        super().__init__((host, port), _Handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> MetricsServer:
        self._thread = threading.Thread(target=self.serve_forever, name="sim-exporter", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/":
            self._send(200, b"gpuconsole simulated DCGM exporter: see /metrics\n", "text/plain; charset=utf-8")
            return
        if path != "/metrics":
            self._send(404, b"not found\n", "text/plain; charset=utf-8")
            return
        try:
            body = self.server.metrics().encode("utf-8")
        except Exception as exc:  # noqa: BLE001 - a scrape that fails says why, the server goes on
            self._send(500, f"{type(exc).__name__}: {exc}\n".encode(), "text/plain; charset=utf-8")
            return
        self.server.scrapes += 1
        self._send(200, body, CONTENT_TYPE)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def sim_metrics(sim: Any) -> Callable[[], str]:
    """What the exporter of the simulated world ``sim`` (a ``SimCloud``) serves at this moment:
    its GPUs as the DCGM exporter's, and its inference pool's servers (vLLM's and Triton's)."""

    def metrics() -> str:
        reading, jobs, serving = sim.act(lambda w: (w.gpu_reading(), w.jobs_reading(), w.serving_metrics()))
        return render(reading.gpus, jobs) + serving

    return metrics
