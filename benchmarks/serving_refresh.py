"""500 inference services × 8 replicas from Prometheus: what one refresh of their figures costs.

    .venv/bin/python benchmarks/serving_refresh.py [--services 500] [--replicas 8] [--refreshes 30] [--json]

A local HTTP server (its own process, on 127.0.0.1) answers ``/api/v1/query`` like a fast
Prometheus, from canned JSON, for every query :class:`PrometheusServing` sends: the services are
vLLM (half), NVIDIA Triton (three in ten, half of them with their latency summaries enabled) and
Hugging Face TGI (one in five), 8 pods each (4,000 pods, named as Kubernetes names a
Deployment's: ``NAME-<hash>-<5 letters>``), in 20 namespaces; each answer holds the series
Prometheus would return for its query: per pod for a replica's own figures (requests, errors,
running, waiting), per workload for the others (the pods' values added up, their mean or their
maximum, as the query asks), with ``family``, ``namespace``, ``pod`` or ``workload``, and ``le``
of every histogram bucket or ``quantile`` of a summary (one service in fifty served nothing in
the window: its buckets are zero), written as Prometheus writes them. The values come in two sets that
alternate, so every refresh changes every figure. The cluster's side is built here: a
:class:`ServicesReading` of the services as Deployments (vLLM on 2 H100s a replica, Triton on an
L4, TGI on an A10G, nodes of 8 GPUs) and a :class:`FleetSnapshot` with those GPUs (their pods
named, as the DCGM exporter names them) and the priced instances under the nodes. The
``[services]`` table has a 2-minute window and five ``[[services.slo]]``, two over 5 minutes
(whose figures are read again over that window: five more queries).

Each refresh, timed (wall and this process's CPU):

- query + parse: ``PrometheusServing.poll_serving()`` (every query sent, a few at a time over
  the keep-alive pool, each answer read into the pods' or workloads' series);
- compose: ``ServingBook.compose`` (each service's figures from its pods' and workload's series,
  histogram quantiles, the pod → node → instance cost join, the SLOs judged);
- refresh: the two together (target: at most 200 ms; Prometheus is scraped every 15 s).

The peer, in the same run and interleaved with it: the GPU fleet refresh of
``prometheus_fleet.py`` (1,024 nodes × 8 GPUs from its canned DCGM answers, its own server
process), one poll of the Prometheus GPU source, its seldom-changing answers read between polls
as at a 15 s interval.

The number of queries a refresh sends is counted by the server, and checked to be the same for
``--services`` and for 5 services: one per figure, never one per service.

Figures: median with its spread (p10–p90) over ``--refreshes`` refreshes after a warm-up one.
``--json`` prints them as JSON after the table.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from prometheus_fleet import TIME, answers_size, canned_server
from prometheus_fleet import serve as serve_fleet

from gpuconsole.backends.prometheus import serving_queries as sq
from gpuconsole.model.serving import SeriesName as S
from gpuconsole.model.serving import workload_of

VLLM, TRITON, TGI = sq.VLLM, sq.TRITON, sq.TGI
NAMESPACES = 20
TARGET_MS = 200.0
# Bucket bounds (seconds) as each server exports them.
VLLM_E2E = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
            960.0, 1920.0, 7680.0, math.inf)
VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0, 160.0, 640.0, 2560.0, math.inf)
TGI_DURATION = (*(0.0001 * 1.5 ** n for n in range(1, 36)), math.inf)  # TGI's 35 exponential buckets
SUMMARY = (0.5, 0.9, 0.95, 0.99)
# family: (GPUs a replica, GPU model, instance type, $/h of an 8-GPU node)
HARDWARE = {VLLM: (2.0, "NVIDIA H100 80GB HBM3", "p5.48xlarge", 98.32),
            TRITON: (1.0, "NVIDIA L4", "g6.48xlarge", 13.35),
            TGI: (1.0, "NVIDIA A10G", "g5.48xlarge", 16.29)}


@dataclass(frozen=True)
class Served:
    """One service of the benchmark's cluster."""

    namespace: str
    name: str
    family: str
    pods: tuple[str, ...]
    summaries: bool  # Triton's latency summaries enabled
    idle: bool  # served nothing in the window

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the letters Kubernetes makes a pod's hash and suffix of


def cluster(services: int, replicas: int, seed: int = 11) -> list[Served]:
    """Deployments whose pods are named as Kubernetes names them: ``NAME-<hash>-<5 letters>``."""
    rng = random.Random(seed)
    out = []
    for n in range(services):
        family = VLLM if n % 10 < 5 else TRITON if n % 10 < 8 else TGI
        name = {VLLM: "llm", TRITON: "vision", TGI: "chat"}[family] + f"-{n:04d}"
        template = "".join(rng.choices(SAFE, k=10))
        pods = tuple(f"{name}-{template}-{''.join(rng.choices(SAFE, k=5))}" for _ in range(replicas))
        out.append(Served(f"team-{n % NAMESPACES:02d}", name, family, pods, family == TRITON and n % 2 == 0,
                          n % 50 == 49))
    return out


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def _pod_series(name: str, svc: Served, pod: str, rng: random.Random) -> list[tuple[dict[str, str], float]]:
    """The series answer ``name`` holds for one pod: ``(extra labels, value)``."""
    if svc.family not in {f for f, _expr in sq.TERMS[name]}:
        return []
    rps = 0.0 if svc.idle else {VLLM: 6.0, TRITON: 180.0, TGI: 4.0}[svc.family] * rng.uniform(0.5, 1.5)
    mean_s = {VLLM: 1.6, TRITON: 0.02, TGI: 0.9}[svc.family] * rng.uniform(0.6, 1.6)
    errors = 0.02 * rps * rng.random()
    if name in (S.LATENCY_BUCKET, S.TTFT_BUCKET):
        bounds = VLLM_TTFT if name == S.TTFT_BUCKET else VLLM_E2E if svc.family == VLLM else TGI_DURATION
        mean = mean_s / 8 if name == S.TTFT_BUCKET else mean_s
        return [({"le": _le(b)}, rps * (1.0 - math.exp(-b / mean))) for b in bounds]
    if name == S.LATENCY_QUANTILE:
        if not svc.summaries:
            return []
        return [({"quantile": repr(q)}, -mean_s * math.log(1.0 - q)) for q in SUMMARY]
    value = {S.OK: rps - errors, S.ERRORS: errors, S.LATENCY_SUM: rps * mean_s, S.LATENCY_COUNT: rps,
             S.TOKENS: rps * 180.0, S.INFERENCES: rps * 4.0, S.RUNNING: rps * mean_s,
             S.WAITING: float(rng.randrange(0, 12)), S.QUEUE_SUM: rps * 0.002 * rng.random(),
             S.KV_CACHE: rng.random()}[name]
    return [({}, value)]


def canned_answers(services: list[Served], queries: dict[str, str], slo_services: frozenset[str] = frozenset()
                   ) -> dict[str, list[list[bytes]]]:
    """For each answer name (``ok``, ``latency_bucket@300``, …), two JSON answers, each cut where
    the evaluation time goes: a series per pod, or per workload (the pods' series added up, their
    mean or their maximum, as the query asks Prometheus to). An answer over an SLO's own window
    holds the pods of ``slo_services`` only (its query selects them)."""
    answers: dict[str, list[list[bytes]]] = {}
    for answer in queries.values():
        name, _at, window = answer.partition("@")
        how = statistics.fmean if name in sq.MEAN else max if name in sq.MAXIMUM else math.fsum
        variants = []
        for variant in range(2):
            rng = random.Random(f"{answer}:{variant}")
            result = []
            for svc in services:
                if window and svc.key not in slo_services:
                    continue
                workloads: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}
                for pod in svc.pods:
                    for extra, value in _pod_series(name, svc, pod, rng):
                        if name in sq.BY_POD:
                            workloads[(pod, tuple(extra.items()))] = [value]
                        else:
                            workloads.setdefault((workload_of(pod), tuple(extra.items())), []).append(value)
                for (key, extra), values in workloads.items():
                    labels = dict(sorted({"family": svc.family, "namespace": svc.namespace,
                                          "pod" if name in sq.BY_POD else "workload": key, **dict(extra)}.items()))
                    result.append({"metric": labels, "value": ["@time@", repr(how(values))]})
            body = {"status": "success", "data": {"resultType": "vector", "result": result}}
            variants.append(json.dumps(body, separators=(",", ":")).encode().split(TIME))
        answers[answer] = variants
    return answers


def serve_serving(services: int, replicas: int, queries: dict[str, str], served, port_out) -> None:
    every = cluster(services, replicas)
    answers = canned_answers(every, queries, frozenset(serving_config(every).slo_window_services()))
    server = canned_server(answers, queries, served)
    series = sum(bytes(b"".join(v[0])).count(b'"metric"') for v in answers.values())
    port_out.put((server.server_address[1], answers_size(answers), series))
    server.serve_forever()


def readings(services: list[Served], now: float):
    """The cluster's side: the services as Deployments, and a snapshot with their GPUs and the
    priced instances under their nodes."""
    from gpuconsole.model import (
        FleetSnapshot,
        Gpu,
        Instance,
        InstanceState,
        Market,
        Rollout,
        Service,
        ServiceKind,
        ServiceReplica,
    )

    rng = random.Random(5)
    gpus: list[Gpu] = []
    instances: list[Instance] = []
    nodes: dict[str, list[tuple[str, int, str]]] = {}  # family: [(node, index, GPU uuid)] free
    built = []
    for svc in services:
        per, model, itype, price = HARDWARE[svc.family]
        replicas = []
        for pod in svc.pods:
            free = nodes.get(svc.family, [])
            if len(free) < per:  # a new node
                node = f"ip-10-{len(instances) // 250}-{len(instances) % 250}-{svc.family}.ec2.internal"
                instances.append(Instance(f"i-{rng.getrandbits(64):017x}", itype, "us-east-1", "us-east-1a",
                                          Market.ON_DEMAND, InstanceState.RUNNING, now - 86400, price, 8, model,
                                          node=node))
                free = [(node, index, f"GPU-{rng.getrandbits(128):032x}") for index in range(8)]
            held, nodes[svc.family] = free[:int(per)], free[int(per):]
            node = held[0][0]
            for _node, index, uuid in held:
                busy = 0.0 if svc.idle else rng.uniform(35, 95)
                gpus.append(Gpu(uuid, node, index, model, busy + 1.0, 60000, 81920, 55, 400.0, 700.0,
                                pod=pod, namespace=svc.namespace))
            replicas.append(ServiceReplica(pod, node, uid=f"{rng.getrandbits(128):032x}", phase="Running", ready=True,
                                           gpus=per, started=now - 3600))
        built.append(Service(svc.namespace, svc.name, ServiceKind.DEPLOYMENT, len(svc.pods), len(svc.pods),
                             len(svc.pods), per, per * len(svc.pods), model,
                             nodes=tuple(sorted({r.node for r in replicas if r.node})),
                             image=f"registry.example.com/{svc.family}:1.0", created=now - 86400 * 3,
                             uid=f"{rng.getrandbits(128):032x}", rollout=Rollout.COMPLETE, replicas=tuple(replicas)))
    return tuple(built), FleetSnapshot(taken_at=now, gpus=tuple(gpus), instances=tuple(instances))


def serving_config(services: list[Served]):
    """A 2-minute window and five SLOs, two of them over 5 minutes."""
    from gpuconsole.core.serving.config import ServingConfig, Slo

    picked = [services[i] for i in (0, 1, 5, 8, 10) if i < len(services)]
    slos = {s.key: Slo(s.key, p99_ms=2500.0 if s.family != TRITON else 60.0, ttft_ms=400.0 if s.family == VLLM else None,
                       error_ratio=0.01 if s.family != VLLM else None, window_s=300.0 if n < 2 else 120.0)
            for n, s in enumerate(picked)}
    return ServingConfig(window_s=120.0, slos=slos)


def start(target, *args) -> tuple[multiprocessing.Process, tuple]:
    ports: multiprocessing.Queue = multiprocessing.Queue()
    process = multiprocessing.Process(target=target, args=(*args, ports), daemon=True)
    process.start()
    return process, ports.get(timeout=600)


def spread(values: list[float]) -> dict[str, float]:
    """Median, p10 and p90 (milliseconds)."""
    ms = sorted(v * 1000.0 for v in values)
    if not ms:
        return {"median": math.nan, "p10": math.nan, "p90": math.nan}
    cuts = statistics.quantiles(ms, n=10, method="inclusive") if len(ms) > 1 else [ms[0]] * 9
    return {"median": round(statistics.median(ms), 2), "p10": round(cuts[0], 2), "p90": round(cuts[-1], 2)}


def count_queries(source, served) -> int:
    before = served.value
    source.poll_serving()
    return served.value - before


def measure(args: argparse.Namespace) -> dict:
    from gpuconsole.backends.prometheus import PrometheusGpus, PrometheusServing, PrometheusSettings
    from gpuconsole.core.serving.join import ServingBook
    from gpuconsole.model import ServicesReading

    services = cluster(args.services, args.replicas)
    config = serving_config(services)

    def source_at(url: str) -> PrometheusServing:
        return PrometheusServing(PrometheusSettings(url, timeout=30), window_s=config.window_s,
                                 slo_windows=config.slo_windows(), slo_services=config.slo_window_services())

    queries = {promql: name for name, (promql, _family) in source_at("http://127.0.0.1:9").queries().items()}
    served, small_served = multiprocessing.Value("l", 0), multiprocessing.Value("l", 0)
    processes = []
    try:
        process, (port, size, series) = start(serve_serving, args.services, args.replicas, queries, served)
        processes.append(process)
        process, (small_port, _size, _series) = start(serve_serving, 5, args.replicas, queries, small_served)
        processes.append(process)
        process, (fleet_port, fleet_size) = start(serve_fleet, args.nodes)
        processes.append(process)
        print(f"canned Prometheus on 127.0.0.1:{port}: {args.services:,} services × {args.replicas} replicas "
              f"({args.services * args.replicas:,} pods), {len(queries)} queries a refresh, {series:,} series, "
              f"{size / 1e6:.1f} MB of JSON; the GPU fleet's on 127.0.0.1:{fleet_port}: {args.nodes * 8:,} GPUs "
              f"({fleet_size / 1e6:.1f} MB for all its queries)", flush=True)
        source = source_at(f"http://127.0.0.1:{port}")
        small = source_at(f"http://127.0.0.1:{small_port}")
        fleet = PrometheusGpus(PrometheusSettings(f"http://127.0.0.1:{fleet_port}", timeout=30))
        sent, sent_small = count_queries(source, served), count_queries(small, small_served)
        small.close()
        book = ServingBook(config)
        now = time.time()
        cluster_services, snapshot = readings(services, now)
        # The warm-up refresh, and a check that the figures are all there.
        reading = source.poll_serving()
        found, _alerts = book.compose(ServicesReading(cluster_services, reading.taken_at, reading), snapshot, (),
                                      reading.taken_at)
        check(found, services)
        fleet.poll_gpus()  # the first poll reads every answer, as a console's first refresh does
        fleet.settle()
        polls, composes, totals, cpus, fleet_polls, fleet_cpus = [], [], [], [], [], []
        for _ in range(args.refreshes):
            c0, t0 = time.process_time(), time.perf_counter()
            reading = source.poll_serving()
            t1 = time.perf_counter()
            found, _alerts = book.compose(ServicesReading(cluster_services, reading.taken_at, reading), snapshot, (),
                                          reading.taken_at)
            t2, c2 = time.perf_counter(), time.process_time()
            polls.append(t1 - t0)
            composes.append(t2 - t1)
            totals.append(t2 - t0)
            cpus.append(c2 - c0)
            time.sleep(args.pause)
            c0, t0 = time.process_time(), time.perf_counter()
            gpus = fleet.poll_gpus()
            fleet_polls.append(time.perf_counter() - t0)
            fleet_cpus.append(time.process_time() - c0)
            fleet.settle()  # its seldom-changing answers, read between polls (at 15 s, half-way)
            time.sleep(args.pause)
        assert len(gpus.gpus) == args.nodes * 8, len(gpus.gpus)
        source.close()
        fleet.close()
    finally:
        for process in processes:
            process.terminate()
            process.join(5)
    return {"services": args.services, "replicas": args.replicas, "pods": args.services * args.replicas,
            "refreshes": args.refreshes, "queries": len(queries), "queries_sent": sent, "queries_sent_5_services": sent_small,
            "series": series, "json_mb": round(size / 1e6, 1), "slos": len(config.slos),
            "poll_ms": spread(polls), "compose_ms": spread(composes), "refresh_ms": spread(totals),
            "refresh_cpu_ms": spread(cpus), "fleet_gpus": args.nodes * 8, "fleet_poll_ms": spread(fleet_polls),
            "fleet_poll_cpu_ms": spread(fleet_cpus), "target_ms": TARGET_MS,
            "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}


def check(found, services: list[Served]) -> None:
    """Every service composed, with the figures its family gives, its cost, and its SLO judged."""
    by_key = {s.key: s for s in found}
    assert len(by_key) == len(services), (len(by_key), len(services))
    for svc in services:
        got = by_key[svc.key]
        assert got.usd_per_hour is not None and got.metrics_source == svc.family, (svc.key, got.metrics_source)
        assert got.rps is not None and got.queue_depth is not None, svc.key
        if svc.idle:
            assert got.idle_replicas == len(svc.pods), (svc.key, got.idle_replicas)
            continue
        assert got.mean_ms is not None, svc.key
        if svc.family != TRITON or svc.summaries:
            assert got.p99_ms is not None, svc.key
        if svc.family == VLLM:
            assert got.ttft_ms is not None and got.usd_per_million_tokens is not None, svc.key
    assert sum(1 for s in found if s.slo is not None) == 5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=500, help="inference services (default 500)")
    parser.add_argument("--replicas", type=int, default=8, help="replicas (pods) a service (default 8)")
    parser.add_argument("--refreshes", type=int, default=30, help="refreshes measured (default 30)")
    parser.add_argument("--nodes", type=int, default=1024, help="the GPU fleet peer's nodes of 8 GPUs (default 1024)")
    parser.add_argument("--pause", type=float, default=0.2, help="seconds between two refreshes (default 0.2)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    args = parser.parse_args()
    figures = measure(args)

    def row(label: str, fig: dict[str, float], target: str = "") -> str:
        return f"{label:<52}{fig['median']:>8.0f} ms  ({fig['p10']:.0f}–{fig['p90']:.0f}){'':>4}{target}"

    print(f"{'figure':<52}{'median':>11}  (p10–p90)   target")
    pods = f"{figures['services']:,} services × {figures['replicas']}"
    print(row(f"{pods}: query + parse", figures["poll_ms"]))
    print(row(f"{pods}: compose (figures, cost, SLOs)", figures["compose_ms"]))
    print(row(f"{pods}: refresh", figures["refresh_ms"], f"<= {TARGET_MS:.0f} ms"))
    print(row(f"{pods}: refresh, CPU time", figures["refresh_cpu_ms"]))
    print(row(f"GPU fleet, {figures['fleet_gpus']:,} GPUs: refresh (poll)", figures["fleet_poll_ms"]))
    print(row(f"GPU fleet, {figures['fleet_gpus']:,} GPUs: refresh, CPU time", figures["fleet_poll_cpu_ms"]))
    same = figures["queries_sent"] == figures["queries_sent_5_services"] == figures["queries"]
    print(f"queries a refresh: {figures['queries_sent']} for {figures['services']:,} services, "
          f"{figures['queries_sent_5_services']} for 5 ({'the same: one per figure' if same else 'NOT the same'})")
    print(f"({figures['refreshes']} refreshes; load average {' '.join(map(str, figures['load_average']))} "
          f"on {figures['cpus']} CPUs)")
    if args.json:
        print(json.dumps(figures, indent=2))
    if not same:
        print("the number of queries grows with the number of services", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
