"""The simulated inference pool's traffic and what its servers would report of it.

Requests arrive on a daily curve (quiet at night, busiest in the afternoon, UTC) with a burst a
few minutes after the world starts; each replica serves up to its capacity, and latency grows
with load as a queue's does (a wait of ρ/(1-ρ) service times, and a backlog once arrivals pass
capacity). Latencies are log-normal: a replica's histogram buckets, a summary's quantiles and
its mean follow from the median and spread. Nothing here draws from the world's generators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# vLLM's own bucket bounds (seconds) for end-to-end latency and time to the first token.
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, math.inf)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, math.inf)
SUMMARY_QUANTILES = (0.5, 0.9, 0.99)  # Triton's request summary, where it is enabled
BURST_AFTER_S = 150.0  # the burst begins this long after the world starts …
BURST_S = 600.0  # … and lasts this long
_Z = {0.5: 0.0, 0.9: 1.2816, 0.95: 1.6449, 0.99: 2.3263}


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """One service of the pool and how its traffic behaves.

    Attributes:
        family: ``vllm``, ``triton`` or ``""`` (no metrics exposed).
        peak_rps: requests a second at the busiest hour; ``burst``: the factor during the burst,
            ``burst_rps``: requests a second added during it (a load that outgrows the replicas
            at any hour).
        capacity: requests a second one replica serves at most.
        service_ms: the median latency of an unloaded replica.
        tokens: tokens generated per request (an LLM), ``batch``: inferences per request.
        errors: the share of requests that fail (counted where the server counts failures).
        summaries: Triton's latency summaries are enabled (its quantiles are known).
    """

    namespace: str
    name: str
    kind: str
    family: str
    image: str
    node_group: str
    replicas: int
    gpus: int = 1
    mig_profile: str | None = None
    peak_rps: float = 0.0
    burst: float = 1.0
    burst_rps: float = 0.0
    capacity: float = 1.0
    service_ms: float = 10.0
    tokens: float = 0.0
    batch: float = 1.0
    errors: float = 0.0
    summaries: bool = False
    ttft_ms: float = 0.0
    slots: int = 64
    queue_s: float = 0.5  # seconds of work its queue holds before it turns requests away
    hpa: tuple[int, int, str] | None = None  # (min, max, metric) of an HPA that targets it


def daily_load(t: float) -> float:
    """The share of the peak arriving at POSIX time ``t``: 0.3 at 04:00 UTC, 1.0 at 16:00."""
    hour = (t % 86400.0) / 3600.0
    return 0.3 + 0.7 * (0.5 - 0.5 * math.cos(2.0 * math.pi * (hour - 4.0) / 24.0))


def arrivals(spec: ServiceSpec, t: float, start: float, noise: float) -> float:
    """Requests a second arriving for ``spec`` at ``t`` (``noise``: a draw in [0, 1))."""
    rate = spec.peak_rps * daily_load(t) * (0.95 + 0.1 * noise)
    if start + BURST_AFTER_S <= t < start + BURST_AFTER_S + BURST_S:
        rate = rate * spec.burst + spec.burst_rps
    return rate


@dataclass(slots=True)
class Load:
    """One service's load this second: per-replica arrivals, served, the backlog and latency."""

    arriving: float = 0.0  # a second, over the whole service
    served: float = 0.0
    backlog: float = 0.0  # requests waiting beyond what replicas hold
    rejected: float = 0.0  # a second: turned away by a full queue
    utilization: float = 0.0  # ρ of a replica, at most 1
    median_s: float = 0.0
    sigma: float = 0.35
    wait_s: float = 0.0
    ttft_s: float = 0.0


def step_load(load: Load, spec: ServiceSpec, arriving: float, replicas: int) -> None:
    """Advance ``load`` by one second with ``arriving`` requests and ``replicas`` serving."""
    capacity = spec.capacity * replicas
    load.arriving = arriving
    if capacity <= 0:
        load.served, load.utilization, load.rejected = 0.0, 0.0, arriving
        return
    offered = arriving + load.backlog
    load.served = min(offered, capacity)
    queue = max(0.0, offered - capacity)
    limit = capacity * spec.queue_s  # the server's queue holds this much; the rest is turned away
    load.backlog, load.rejected = min(queue, limit), max(0.0, queue - limit)
    rho = min(0.97, arriving / capacity)
    load.utilization = min(1.0, load.served / capacity)
    service = spec.service_ms / 1000.0
    load.wait_s = service * rho * rho / (1.0 - rho) * 0.25 + load.backlog / capacity
    load.median_s = service + load.wait_s
    load.sigma = 0.3 + 0.25 * rho
    load.ttft_s = spec.ttft_ms / 1000.0 + load.wait_s


def normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def share_below(bound: float, median: float, sigma: float) -> float:
    """The share of log-normal latencies (``median``, ``sigma``) at most ``bound``."""
    if math.isinf(bound):
        return 1.0
    if bound <= 0 or median <= 0:
        return 0.0
    return normal_cdf(math.log(bound / median) / sigma)


def quantile(q: float, median: float, sigma: float) -> float:
    return median * math.exp(_Z[q] * sigma)


def mean(median: float, sigma: float) -> float:
    return median * math.exp(sigma * sigma / 2.0)
