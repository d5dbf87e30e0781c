"""``gpuconsole sim-exporter``: the simulated fleet on a DCGM-exporter-format ``/metrics`` endpoint.

A real Prometheus can scrape it like the exporter of a GPU fleet::

    gpuconsole sim-exporter --port 9400 --demo-nodes 16

then ``gpuconsole --prometheus http://127.0.0.1:9090`` shows that fleet. The inference pool's
servers are served too (vLLM's and Triton's families, labelled with each pod's namespace and
name), so the serving figures can be read through Prometheus without a cluster. The world runs on the
wall clock from the given seed; every scrape advances it to the present and renders it.
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from collections.abc import Callable
from typing import Any


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
    from gpuconsole.cli.metrics_server import MetricsServer, sim_metrics
    from gpuconsole.cli.table import wrap

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
        gpus, _jobs, _cloud = make_sim(seed=args.seed, nodes=args.demo_nodes, serving=True)
        holder.append(sim_metrics(gpus.sim))
        count = len(gpus.poll_gpus().gpus)
        print(wrap(f"serving {count} simulated GPUs as DCGM exporter metrics, and the inference pool's vLLM and "
                   f"Triton metrics, on http://{args.host}:{server.port}/metrics (Ctrl-C stops)"), flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
