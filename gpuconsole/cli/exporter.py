"""``gpuconsole sim-exporter``: the simulated fleet on a DCGM-exporter-format ``/metrics`` endpoint.

A real Prometheus can scrape it like the exporter of a GPU fleet::

    gpuconsole sim-exporter --port 9400 --demo-nodes 16

then ``gpuconsole --prometheus http://127.0.0.1:9090`` shows that fleet. The world runs on the
wall clock from the given seed; every scrape advances it to the present and renders it.
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
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
    """What the exporter of the simulated world ``sim`` (a ``SimCloud``) serves at this moment."""

    def metrics() -> str:
        reading, jobs = sim.act(lambda w: (w.gpu_reading(), w.jobs_reading()))
        return render(reading.gpus, jobs)

    return metrics


def add_exporter_parser(sub: Any, port_type: Callable[[str], int], seed_type: Callable[[str], int],
                        nodes_type: Callable[[str], int]) -> None:
    parser = sub.add_parser(
        "sim-exporter",
        help="serve the simulated fleet as a DCGM exporter /metrics endpoint (for Prometheus)",
        description="Serve the simulated GPU fleet in the DCGM exporter's Prometheus format on /metrics, "
                    "for a Prometheus to scrape.",
    )
    parser.add_argument("--port", type=port_type, default=9400, metavar="N",
                        help="port to listen on, 1 to 65535 (default 9400, the exporter's; 0: any free port)")
    parser.add_argument("--host", default="127.0.0.1", metavar="ADDR", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--seed", type=seed_type, default=7, metavar="N", help="seed of the simulated world (default 7)")
    parser.add_argument("--demo-nodes", type=nodes_type, default=None, metavar="N", help="simulate N nodes of up to 8 GPUs instead of the default fleet")


def run_exporter(args: argparse.Namespace) -> int:
    from gpuconsole.backends.sim import make_sim

    # Listen first: a port in use or a bad address is one line at once, before the world is built.
    holder: list[Callable[[], str]] = []
    try:
        server = MetricsServer(lambda: holder[0](), args.host, args.port)
    except (OSError, OverflowError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        host_at_fault = isinstance(exc, socket.gaierror) or getattr(exc, "errno", None) == errno.EADDRNOTAVAIL
        option = "--host" if host_at_fault else "--port"
        print(f"gpuconsole: error: argument {option}: cannot listen on {args.host}:{args.port}: {why}", file=sys.stderr)
        return 2
    try:
        gpus, _jobs, _cloud = make_sim(seed=args.seed, nodes=args.demo_nodes)
        holder.append(sim_metrics(gpus.sim))
        count = len(gpus.poll_gpus().gpus)
        print(f"serving {count} simulated GPUs as DCGM exporter metrics on http://{args.host}:{server.port}/metrics "
              "(Ctrl-C stops)", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
