"""What the simulated inference pool looks like from outside: the cluster's services, the serving
figures a Prometheus would answer for its pods, and the servers' own ``/metrics`` text.

The pods' rates come from one place (:func:`pod_rates`), so the direct reading the demo polls and
the exposition ``gpuconsole sim-exporter`` serves say the same: the exposition's counters are
those rates summed over the world's seconds (:class:`Totals`).
"""

from __future__ import annotations

import math
from collections import defaultdict

from gpuconsole.backends.sim import serving_traffic as st
from gpuconsole.backends.sim.serving_pool import ServingPool, SimReplica, SimService
from gpuconsole.model import (
    PodSeries,
    Rollout,
    Service,
    ServiceHpa,
    ServiceKind,
    ServiceReplica,
    ServicesReading,
    ServingReading,
    ServingSeries,
)
from gpuconsole.model.serving import SeriesName as S

MIG_SHARE = 1.0 / 7.0  # a 1g slice's share of its GPU's compute
TTFT_SUM, TTFT_COUNT = "ttft_sum", "ttft_count"  # kept for the exposition only
Rate = tuple[str, float | None, float]  # (answer, bucket bound or quantile, value)


def is_ready(replica: SimReplica, now: float) -> bool:
    return replica.node is not None and replica.ready_at is not None and replica.ready_at <= now


def pod_rates(service: SimService, replica: SimReplica, now: float) -> list[Rate]:
    """The answers a Prometheus would give for one ready pod: rates a second, gauges as they are."""
    spec, load = service.spec, service.load
    ready = sum(1 for r in service.replicas if is_ready(r, now))
    if not spec.family or not is_ready(replica, now) or not ready:
        return []
    served = load.served / ready
    median, sigma = load.median_s, load.sigma
    mean = st.mean(median, sigma)
    waiting = load.backlog / ready
    out: list[Rate] = []
    if spec.family == "vllm":
        running = min(float(spec.slots), served * mean)
        ttft_sigma = 0.4
        out += [(S.OK, None, served), (S.LATENCY_SUM, None, served * mean), (S.LATENCY_COUNT, None, served),
                (S.TOKENS, None, served * spec.tokens), (S.RUNNING, None, round(running)),
                (S.WAITING, None, round(waiting)), (S.KV_CACHE, None, min(0.98, 0.05 + 0.9 * running / spec.slots)),
                (TTFT_SUM, None, served * st.mean(load.ttft_s, ttft_sigma)), (TTFT_COUNT, None, served)]
        out += [(S.LATENCY_BUCKET, le, served * st.share_below(le, median, sigma)) for le in st.E2E_BUCKETS]
        out += [(S.TTFT_BUCKET, le, served * st.share_below(le, load.ttft_s, ttft_sigma)) for le in st.TTFT_BUCKETS]
    else:
        ok, failed = served * (1.0 - spec.errors), served * spec.errors + load.rejected / ready
        out += [(S.OK, None, ok), (S.ERRORS, None, failed), (S.LATENCY_SUM, None, ok * mean),
                (S.LATENCY_COUNT, None, ok), (S.INFERENCES, None, ok * spec.batch), (S.WAITING, None, round(waiting)),
                (S.QUEUE_SUM, None, ok * load.wait_s)]
        if spec.summaries:
            out += [(S.LATENCY_QUANTILE, q, st.quantile(q, median, sigma)) for q in st.SUMMARY_QUANTILES]
    return out


GAUGES = frozenset({S.RUNNING, S.WAITING, S.KV_CACHE, S.LATENCY_QUANTILE})


class Totals:
    """The pods' counters as their servers keep them: each second's rates added up."""

    def __init__(self) -> None:
        self.counted: dict[tuple[str, str, str, float | None], float] = defaultdict(float)
        self.gauges: dict[tuple[str, str, str, float | None], float] = {}

    def add(self, pool: ServingPool, now: float) -> None:
        self.gauges.clear()
        for service in pool.services:
            for replica in service.replicas:
                for name, le, value in pod_rates(service, replica, now):
                    key = (service.spec.namespace, replica.name, name, le)
                    if name in GAUGES:
                        self.gauges[key] = value
                    else:
                        self.counted[key] += value


def serving_reading(pool: ServingPool, now: float, window_s: float = 120.0) -> ServingReading:
    """This second's answers for every pod of the pool, as one round of serving queries."""
    answers: dict[str, list[PodSeries]] = defaultdict(list)
    for service in pool.services:
        ns, family = service.spec.namespace, service.spec.family
        for replica in service.replicas:
            for name, le, value in pod_rates(service, replica, now):
                if name not in (TTFT_SUM, TTFT_COUNT):
                    answers[name].append(PodSeries(ns, replica.name, value, family, le))
    return ServingReading(tuple(ServingSeries(name, tuple(series)) for name, series in answers.items()), now, window_s)


def _replica(service: SimService, replica: SimReplica, now: float) -> ServiceReplica:
    spec = service.spec
    ready = is_ready(replica, now)
    return ServiceReplica(replica.name, replica.node.node_name if replica.node is not None else None, replica.uid,
                          "Running" if replica.node is not None else "Pending", ready,
                          MIG_SHARE if spec.mig_profile else float(spec.gpus), spec.mig_profile,
                          replica.pending_reason, replica.started)


def service_model(pool: ServingPool, service: SimService, now: float) -> Service:
    """One pool service as the cluster lists it (its figures are the core's join)."""
    spec = service.spec
    replicas = tuple(_replica(service, r, now) for r in service.replicas)
    ready = sum(1 for r in replicas if r.ready)
    per_replica = MIG_SHARE if spec.mig_profile else float(spec.gpus)
    held = [r for r in service.replicas if r.node is not None]
    model = held[0].node.model.name if held and held[0].node is not None else None
    progressing = now < service.rollout_until or ready < service.desired
    rollout = Rollout.PROGRESSING if progressing else Rollout.COMPLETE
    hpa = None
    if spec.hpa is not None:
        low, high, metric = spec.hpa
        hpa = ServiceHpa(spec.name, low, high, len(replicas), service.desired, (metric,))
    pending = next((r.pending_reason for r in service.replicas if r.pending_reason), None)
    return Service(
        spec.namespace, spec.name, ServiceKind(spec.kind), service.desired, ready, ready, per_replica,
        per_replica * len(held), model, spec.mig_profile, tuple(sorted({r.node for r in replicas if r.node})),
        spec.image, service.created, service.uid, hpa, rollout,
        "" if not progressing else f"{ready} of {service.desired} replicas ready", pending, replicas,
        (("app.kubernetes.io/name", spec.name),))


def services_reading(pool: ServingPool, now: float) -> ServicesReading:
    return ServicesReading(tuple(service_model(pool, s, now) for s in pool.services), now, serving_reading(pool, now),
                           kserve=False)


# ---------------------------------------------------------------------- exposition

VLLM_NAMES = {S.OK: "vllm:request_success_total", S.TOKENS: "vllm:generation_tokens_total",
              S.RUNNING: "vllm:num_requests_running", S.WAITING: "vllm:num_requests_waiting",
              S.KV_CACHE: "vllm:kv_cache_usage_perc", S.LATENCY_BUCKET: "vllm:e2e_request_latency_seconds_bucket",
              S.LATENCY_SUM: "vllm:e2e_request_latency_seconds_sum",
              S.LATENCY_COUNT: "vllm:e2e_request_latency_seconds_count",
              S.TTFT_BUCKET: "vllm:time_to_first_token_seconds_bucket", TTFT_SUM: "vllm:time_to_first_token_seconds_sum",
              TTFT_COUNT: "vllm:time_to_first_token_seconds_count"}
# Triton's counters in its units: microseconds where it counts time.
TRITON_NAMES = {S.OK: ("nv_inference_request_success", 1.0), S.ERRORS: ("nv_inference_request_failure", 1.0),
                S.INFERENCES: ("nv_inference_count", 1.0), S.LATENCY_SUM: ("nv_inference_request_duration_us", 1e6),
                S.QUEUE_SUM: ("nv_inference_queue_duration_us", 1e6),
                S.WAITING: ("nv_inference_pending_request_count", 1.0),
                S.LATENCY_QUANTILE: ("nv_inference_request_summary_us", 1e6)}


def _bound(value: float) -> str:
    return "+Inf" if math.isinf(value) else f"{value:g}"


def render_serving(pool: ServingPool, totals: Totals) -> str:
    """The pool's servers' metrics in the Prometheus text format, labelled with each pod's
    namespace and name as a Kubernetes scrape would label them."""
    family_of = {(s.spec.namespace, r.name): s.spec for s in pool.services for r in s.replicas}
    lines: list[str] = []
    for (ns, pod, name, le), value in sorted([*totals.counted.items(), *totals.gauges.items()],
                                             key=lambda kv: (kv[0][2], kv[0][0], kv[0][1], kv[0][3] or 0.0)):
        spec = family_of.get((ns, pod))
        if spec is None:
            continue
        labels = f'namespace="{ns}",pod="{pod}"'
        if spec.family == "vllm" and name in VLLM_NAMES:
            extra = ',finished_reason="stop"' if name == S.OK else f',le="{_bound(le)}"' if le is not None else ""
            lines.append(f'{VLLM_NAMES[name]}{{{labels},model_name="{spec.name}"{extra}}} {value!r}')
        elif spec.family == "triton" and name in TRITON_NAMES:
            metric, scale = TRITON_NAMES[name]
            extra = f',quantile="{le:g}"' if le is not None else ""
            lines.append(f'{metric}{{{labels},model="{spec.name}",version="1"{extra}}} {value * scale!r}')
    return "\n".join(lines) + ("\n" if lines else "")

