"""A fleet of 1,024 nodes × 8 GPUs read from Prometheus: the cost of one refresh, and CPU at rest.

    .venv/bin/python benchmarks/prometheus_fleet.py [--nodes 1024] [--interval 1] [--seconds 20] [--json]

A local HTTP server (its own process, on 127.0.0.1) answers ``/api/v1/query`` like a fast
Prometheus, from canned JSON for 8,192 GPUs: for each query, the series Prometheus would return
for it (the labels its ``max by`` or ``count by`` keeps), 8,192 per metric, written as
Prometheus writes them (compact, labels sorted, every sample at the query's evaluation time).
The values of the metrics come in two sets that alternate, so every refresh changes every GPU;
the identity query counts its series and the seldom-changing metrics (power limit, memory clock,
XID) keep their values, so those answers differ between refreshes only in their evaluation
time, as with a real fleet whose pods stay put. The server answers each query in a few
milliseconds (it joins canned bytes around the time), so what is measured is the console. The
console runs headless at 160×48 on the GPUs pane, its GPU source the Prometheus source pointed at
that server, polling at ``--interval`` (the scrape interval), no other source.

Figures (medians over the refreshes of the window):

- query + parse: one poll of the source (every metric's query, the answers read, the model
  built), as the Hub times it (wall time);
- table update: the GPUs pane rendering the new snapshot into its table (keyed rows, the cells
  that changed);
- tick: the two together;
- CPU: percent of one core used by the console's process (UI, Hub, source; the server is
  another process) over ``--seconds`` after the first refreshes, and that CPU time divided by
  the refreshes of the window. The load average is printed with them: on a busy machine the
  wall times grow while the CPU time does not.

``--json`` prints the figures as JSON after the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import statistics
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuconsole.backends.prometheus import mapping as pm
from gpuconsole.backends.prometheus.source import SLOW_EVERY_S

MODELS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")
NAMESPACES = ("nlp", "vision", "research", "inference")


def fleet_labels(nodes: int, seed: int = 7) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for n in range(nodes):
        model = MODELS[n % 2]
        for index in range(8):
            uuid = (f"GPU-{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-{rng.getrandbits(16):04x}-"
                    f"{rng.getrandbits(16):04x}-{rng.getrandbits(48):012x}")
            labels = {"UUID": uuid, "Hostname": f"ip-10-{n // 250}-{n % 250}-{index}.ec2.internal", "gpu": str(index),
                      "modelName": model, "DCGM_FI_DRIVER_VERSION": "550.54.15"}
            if rng.random() < 0.85:
                ns = NAMESPACES[rng.randrange(len(NAMESPACES))]
                labels.update(pod=f"train-{n:04d}-{index // 4}-{rng.getrandbits(20):05x}", namespace=ns, container="train")
            out.append(labels)
    return out


def value(metric: str, variant: int, i: int, rng: random.Random) -> float:
    if metric == pm.UTIL:
        return float(rng.randrange(0, 101))
    if metric == pm.FB_USED:
        return float(rng.randrange(0, 80000))
    if metric == pm.FB_FREE:
        return float(81920 - rng.randrange(0, 80000))
    if metric == pm.TEMP:
        return float(rng.randrange(30, 85))
    if metric == pm.POWER:
        return round(rng.uniform(60, 700), 3)
    if metric == pm.POWER_LIMIT:
        return 700.0
    if metric == pm.SM_CLOCK:
        return float(rng.randrange(210, 1980))
    if metric == pm.MEM_CLOCK:
        return 2619.0
    if metric == pm.MEM_COPY_UTIL:
        return float(rng.randrange(0, 60))
    if metric == pm.GR_ENGINE:
        return round(rng.random(), 6)
    if metric == pm.XID:
        return 0.0
    return -1.0  # FB_RESERVED: not reported by this exporter (answered empty below)


TIME = b'"@time@"'  # where an answer's evaluation time goes


def canned_answers(nodes: int) -> dict[str, list[list[bytes]]]:
    """For each query the source sends (the identity query and one per metric), two JSON answers,
    each cut where the evaluation time goes (see :func:`evaluation_time`)."""
    labels = fleet_labels(nodes)
    answers: dict[str, list[list[bytes]]] = {}
    for name in (pm.IDENTITY, *pm.METRICS):
        keep = pm.IDENTITY_LABELS if name == pm.IDENTITY else pm.KEY_LABELS
        metric = pm.ANCHOR if name == pm.IDENTITY else name
        variants = []
        for variant in range(2):
            rng = random.Random(f"{metric}:{variant}")
            result = []
            if metric != pm.FB_RESERVED:
                for i, lab in enumerate(labels):
                    metric_labels = {k: v for k, v in lab.items() if k in keep}
                    # The identity query counts the series of each set of labels: 1 each.
                    sample = "1" if name == pm.IDENTITY else repr(value(metric, variant, i, rng))
                    result.append({"metric": metric_labels, "value": ["@time@", sample]})
            body = {"status": "success", "data": {"resultType": "vector", "result": result}}
            variants.append(json.dumps(body, separators=(",", ":")).encode().split(TIME))
        answers[name] = variants
    return answers


def evaluation_time(param: str | None) -> bytes:
    """The ``time`` of a query as Prometheus writes it in the answer (seconds, to the millisecond)."""
    ms = round(float(param) * 1000) if param else round(time.time() * 1000)
    text = repr(ms / 1000)
    return text.removesuffix(".0").encode()


def canned_server(answers: dict[str, list[list[bytes]]], by_query: dict[str, str],
                  served: Any = None) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1 answering ``/api/v1/query`` like a fast Prometheus: the query
    ``q`` gets the two answers of ``answers[by_query[q]]`` in turn, at its evaluation time; any
    other query a ``bad_data`` error. ``served`` (a ``multiprocessing.Value``) counts the queries."""
    counts = dict.fromkeys(answers, 0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # As Prometheus (Go's net/http) does: without it, a small answer written after its headers
        # waits for the client's delayed ACK (about 40 ms), which is the peer's cost, not the console's.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            name = by_query.get(params.get("query", ""))
            if served is not None:
                with served.get_lock():
                    served.value += 1
            if name is None:
                body = b'{"status":"error","errorType":"bad_data","error":"unknown query"}'
                status = 400
            else:
                # Like Prometheus: every sample carries the evaluation time (the query's ``time``).
                body = evaluation_time(params.get("time")).join(answers[name][counts[name] % 2])
                counts[name] += 1
                status = 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    return server


def answers_size(answers: dict[str, list[list[bytes]]]) -> int:
    """Bytes of JSON one refresh of every query reads."""
    return sum(sum(map(len, v[0])) for v in answers.values())


def serve(nodes: int, port_out: multiprocessing.Queue) -> None:
    answers = canned_answers(nodes)
    server = canned_server(answers, {pm.instant_query(m): m for m in answers})
    port_out.put((server.server_address[1], answers_size(answers)))
    server.serve_forever()


async def measure(url: str, nodes: int, interval: float, seconds: float) -> dict[str, float]:
    import psutil

    from gpuconsole.backends.prometheus.source import PrometheusSettings
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions
    from gpuconsole.model import SourceKind
    from gpuconsole.ui.app import GpuConsoleApp
    from gpuconsole.ui.panes.gpus import GpusPane
    from gpuconsole.ui.widgets.virtual_table import VirtualTable

    renders: list[float] = []
    original = GpusPane.render_snapshot

    def timed(self, snapshot, palette):
        t0 = time.perf_counter()
        original(self, snapshot, palette)
        if snapshot.gpus:
            renders.append(time.perf_counter() - t0)

    GpusPane.render_snapshot = timed
    polls: list[float] = []
    options = ConsoleOptions(sources=SourceOptions(gpus="prometheus", jobs="off", cloud="off",
                                                   prometheus=PrometheusSettings(url, timeout=30)),
                             interval=interval, timeout=30)
    console = Console(options)
    last_seen = [None]

    def on_snapshot(snapshot) -> None:
        status = snapshot.source(SourceKind.GPUS)
        if status is not None and status.latency_s is not None and status.updated_at != last_seen[0]:
            last_seen[0] = status.updated_at
            polls.append(status.latency_s)

    console.subscribe(on_snapshot)
    app = GpuConsoleApp(console)  # as the command line runs it
    proc = psutil.Process()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            t0 = time.perf_counter()
            while not app.query("#gpus-pane .source-line"):  # the panes are composed after the first frame
                await asyncio.sleep(0.05)
            await pilot.press("2")
            while True:
                await asyncio.sleep(0.05)
                tables = app.query("#gpu-table").results(VirtualTable)
                table = next(iter(tables), None)
                if table is not None and len(table.shown_keys) >= nodes * 8 and len(renders) >= 2:
                    break
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError("the fleet did not show within 5 minutes")
            polls.clear()
            renders.clear()
            cpu0 = sum(proc.cpu_times()[:2])
            w0 = time.perf_counter()
            await asyncio.sleep(seconds)
            cpu = (sum(proc.cpu_times()[:2]) - cpu0) / (time.perf_counter() - w0) * 100.0
    finally:
        console.close()
        GpusPane.render_snapshot = original
    poll = statistics.median(polls) if polls else float("nan")
    render = statistics.median(renders) if renders else float("nan")
    per_refresh = cpu / 100.0 * seconds / len(polls) if polls else float("nan")
    return {"poll": poll, "render": render, "tick": poll + render, "cpu": cpu, "refreshes": len(polls),
            "cpu_per_refresh": per_refresh, "polls": [round(p, 4) for p in polls],
            "renders": [round(r, 4) for r in renders]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024, help="nodes of 8 GPUs (default 1024: 8,192 GPUs)")
    parser.add_argument("--interval", type=float, default=1.0, help="refresh (scrape) interval in seconds (default 1)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the measured window (default 20)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    args = parser.parse_args()
    ports: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(args.nodes, ports), daemon=True)
    server.start()
    try:
        port, size = ports.get(timeout=300)
        print(f"canned Prometheus on 127.0.0.1:{port}: {args.nodes * 8:,} series per metric; a refresh reads "
              f"{len(pm.FAST)} queries, every {SLOW_EVERY_S:g} s all {len(pm.METRICS) + 1} ({size / 1e6:.1f} MB of JSON)")
        figures = asyncio.run(measure(f"http://127.0.0.1:{port}", args.nodes, args.interval, args.seconds))
    finally:
        server.terminate()
        server.join(5)
    print(f"{'figure':<40}{'median':>10}   target")
    print(f"{'query + parse (one poll)':<40}{figures['poll'] * 1000:>8.0f}ms")
    print(f"{'table update (GPUs pane)':<40}{figures['render'] * 1000:>8.0f}ms")
    print(f"{'tick: query + parse + table update':<40}{figures['tick'] * 1000:>8.0f}ms   <= 200 ms")
    print(f"{f'CPU at a {args.interval:g} s interval (% of one core)':<40}{figures['cpu']:>9.1f}%   <= 20 %")
    print(f"{'CPU time per refresh (whole console)':<40}{figures['cpu_per_refresh'] * 1000:>8.0f}ms")
    print(f"{'each poll of the window':<40}{' '.join(f'{p * 1000:.0f}' for p in figures['polls'])} ms")
    print(f"({figures['refreshes']} refreshes in the {args.seconds:g} s window; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs)")
    if args.json:
        print(json.dumps({"nodes": args.nodes, "interval": args.interval, **figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
