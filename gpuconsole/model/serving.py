"""Inference services: GPU Deployments, StatefulSets and KServe InferenceServices, with what they
serve, how fast, and what it costs.

A :class:`Service` is what the Services pane, ``gpuconsole service`` and ``snapshot --json``
show: the Kubernetes facts (replicas, GPUs, nodes, image, HPA, rollout, why a replica waits), the
serving figures a Prometheus gives for its pods (requests/s, latency quantiles, tokens/s, queue
depth, …, each with the metric family it came from), what its GPUs cost, and its SLO. A figure
that cannot be known is None, never 0: a server without a failure count has no error ratio, a
service without metrics no latency, a node without a price no $/h.

The readings the sources return are here too: :class:`ServicesReading` (the cluster's services
and replicas, figures empty) and :class:`ServingReading` (one Prometheus answer per figure, per
pod or per workload, for every service at once); the core joins them.
"""

from __future__ import annotations

import enum
import re
from functools import lru_cache

from gpuconsole.model.value import Value

# Every serving figure a service can have, in the order the console shows them, with its unit.
FIGURES: tuple[str, ...] = ("rps", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "ttft_ms", "tokens_per_s",
                            "inferences_per_s", "running", "queue_depth", "queue_ms", "error_ratio", "kv_cache")
# The figures that add up over a service's replicas (rates and counts); the others are per request.
ADDITIVE: frozenset[str] = frozenset({"rps", "tokens_per_s", "inferences_per_s", "running", "queue_depth"})


class SeriesName:
    """The answers a round of serving queries holds (:attr:`ServingSeries.name`), per pod.

    Rates are per second over the window; ``*_BUCKET`` answers are a histogram's bucket rates
    (``le`` in seconds), ``LATENCY_QUANTILE`` a summary's quantiles in seconds (``le`` holds the
    quantile); a ``[[services.metrics]]`` figure comes as the figure's own name (``p99_ms``).
    """

    OK = "ok"  # requests that succeeded (vLLM: every finished request)
    ERRORS = "errors"  # requests that failed, where the server counts them
    LATENCY_BUCKET = "latency_bucket"
    LATENCY_QUANTILE = "latency_quantile"
    LATENCY_SUM = "latency_sum"  # seconds of request time per second
    LATENCY_COUNT = "latency_count"  # requests timed per second
    TTFT_BUCKET = "ttft_bucket"
    TOKENS = "tokens"  # generated tokens per second
    INFERENCES = "inferences"  # inferences (batch items, frames) per second
    RUNNING = "running"
    WAITING = "waiting"
    QUEUE_SUM = "queue_sum"  # seconds spent queued per second
    KV_CACHE = "kv_cache"  # 0..1


class ServiceKind(str, enum.Enum):
    """What runs the service."""

    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"
    INFERENCESERVICE = "InferenceService"


class Rollout(str, enum.Enum):
    """Where the last rollout stands, in the Deployment controller's words."""

    COMPLETE = "complete"
    PROGRESSING = "progressing"
    STALLED = "ProgressDeadlineExceeded"
    UNKNOWN = "unknown"


class ServiceReplica(Value):
    """One pod of a service: where it runs, what it holds, how busy it is."""

    pod: str
    node: str | None = None
    uid: str = ""
    phase: str = "Pending"  # the pod's phase: Pending, Running, …
    ready: bool = False
    gpus: float = 0.0  # whole GPUs, a MIG slice as its compute share
    mig_profile: str | None = None
    pending_reason: str | None = None  # the scheduler's words, for a pod that waits
    started: float | None = None
    gpu_utilization: float | None = None  # percent, mean over its GPUs, where a GPU source says
    running: float | None = None  # requests being served, where the server says
    waiting: float | None = None  # requests queued
    rps: float | None = None
    usd_per_hour: float | None = None


class ServiceHpa(Value):
    """The ``autoscaling/v2`` HorizontalPodAutoscaler that targets a service."""

    name: str
    min_replicas: int | None
    max_replicas: int
    current_replicas: int | None = None
    desired_replicas: int | None = None
    metrics: tuple[str, ...] = ()  # each metric and target in words: "cpu 80%", "pods vllm:num_requests_waiting 10"


class ServiceSlo(Value):
    """A service's objectives (``[[services.slo]]``) and whether they hold now.

    ``met`` is None while a figure it names cannot be known; ``since`` is when the present
    state (met or breached) began, as far as this console has watched.
    """

    p99_ms: float | None = None
    ttft_ms: float | None = None
    error_ratio: float | None = None
    window: str = "5m"
    met: bool | None = None
    breached: tuple[str, ...] = ()  # the objectives missed now, e.g. ("p99_ms",)
    since: float | None = None
    values: tuple[tuple[str, float], ...] = ()  # each objective's figure as judged, over the SLO's window

    def objectives(self) -> tuple[tuple[str, float], ...]:
        """``(figure, limit)`` of each objective set."""
        return tuple((name, limit) for name, limit in (("p99_ms", self.p99_ms), ("ttft_ms", self.ttft_ms),
                                                       ("error_ratio", self.error_ratio)) if limit is not None)


class Service(Value):
    """One inference service at one moment.

    Figures are per second or milliseconds over the serving window (``[services] window``);
    ``sources`` names, for each figure known, the metric family it came from (``vllm``,
    ``triton``, ``tgi`` or a ``[[services.metrics]]`` family); ``metrics_source`` is the
    families of all of them (``""``: no serving metrics).
    """

    namespace: str
    name: str
    kind: ServiceKind = ServiceKind.DEPLOYMENT
    replicas_desired: int = 0
    replicas_ready: int = 0
    replicas_available: int = 0
    gpus_per_replica: float = 0.0
    gpus: float = 0.0  # every replica's GPUs (the pods that hold them)
    gpu_model: str | None = None
    mig_profile: str | None = None
    nodes: tuple[str, ...] = ()
    image: str = ""
    created: float | None = None
    uid: str = ""
    hpa: ServiceHpa | None = None
    rollout: Rollout = Rollout.UNKNOWN
    rollout_message: str = ""
    pending_reason: str | None = None
    replicas: tuple[ServiceReplica, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    # serving figures (None: not known)
    rps: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    ttft_ms: float | None = None
    tokens_per_s: float | None = None
    inferences_per_s: float | None = None
    running: float | None = None
    queue_depth: float | None = None
    queue_ms: float | None = None
    error_ratio: float | None = None
    kv_cache: float | None = None  # 0..1 of the KV cache in use, mean over replicas
    sources: tuple[tuple[str, str], ...] = ()  # (figure, family)
    metrics_source: str = ""
    # money
    usd_per_hour: float | None = None
    usd_per_million_tokens: float | None = None
    usd_per_1k_requests: float | None = None
    idle_replicas: int = 0
    idle_usd_per_hour: float | None = None
    slo: ServiceSlo | None = None

    @property
    def key(self) -> str:
        """``namespace/name``: how the command line and the rules name a service."""
        return f"{self.namespace}/{self.name}"

    def figure(self, name: str) -> float | None:
        """The serving figure ``name`` (one of :data:`FIGURES`), None when unknown."""
        value = getattr(self, name) if name in FIGURES else None
        return float(value) if value is not None else None

    def family(self, name: str) -> str | None:
        """The metric family the figure ``name`` came from."""
        return next((family for figure, family in self.sources if figure == name), None)


class PodSeries(Value):
    """One figure's answer for one pod (or one workload, see :attr:`ServingSeries.by`): ``le``
    is the bucket's bound for a histogram's series."""

    namespace: str
    pod: str
    value: float
    family: str
    le: float | None = None


class ServingSeries(Value):
    """The answer of one query, for every pod of every service."""

    name: str  # requests, errors, latency_bucket, … (see the Prometheus adapter's queries)
    series: tuple[PodSeries, ...] = ()
    # "pod", or "workload": each series is the sum over the pods of one workload (its ``pod`` is
    # the workload's name, :func:`workload_of`), added up by the server that answered
    by: str = "pod"


# How a pod's name gives its workload: a Deployment's pod is ``NAME-<template hash>-<5 characters>``
# (an InferenceService's predictor is such a Deployment), a StatefulSet's ``NAME-<ordinal>``; any
# other pod is a workload of its own. One whole-name regular expression, read alike by Python
# and by Prometheus (RE2): the shortest name that the rest of the pod's name follows as a
# Deployment's suffix, else as an ordinal, else the whole name.
WORKLOAD_RULE = "(.+?)(?:-[a-z0-9]{1,10}-[a-z0-9]{5}|-[0-9]+)?"
_RULE = re.compile(WORKLOAD_RULE)


@lru_cache(maxsize=65536)
def workload_of(pod: str) -> str:
    """The workload ``pod``'s name gives (:data:`WORKLOAD_RULE`): what the answers grouped
    by workload name their series by."""
    found = _RULE.fullmatch(pod)
    return found.group(1) if found else pod


class ServingReading(Value):
    """One round of serving queries: each figure's answer, the window its rates are over."""

    answers: tuple[ServingSeries, ...]
    taken_at: float
    window_s: float = 120.0
    error: str = ""  # a query that failed (the others still count)


class ServicesReading(Value):
    """What one poll of a services source returns: the services of the cluster, their replicas,
    and, where the source reads them itself (the simulator), their serving figures."""

    services: tuple[Service, ...]
    taken_at: float
    serving: ServingReading | None = None
    kserve: bool | None = None  # whether the cluster serves the InferenceService CRD (None: not asked)
