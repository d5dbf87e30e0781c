"""The PromQL of inference servers' figures, one query per figure for every service, and its answers.

No I/O. Each answer named in :class:`~gpuconsole.model.serving.SeriesName` is one query: the
terms of every family that reports it (vLLM, NVIDIA Triton, Hugging Face TGI), each labelled
with its family and joined by ``or``. So a refresh sends the same dozen queries for one service
or for five hundred. A replica's own figures (requests, errors, running, waiting) are summed by
the ``namespace`` and ``pod`` labels; every other figure by ``namespace`` and the ``workload``
the pod's name gives (its Deployment's or StatefulSet's name, by the rules of
:func:`~gpuconsole.model.serving.workload_of`), and ``le`` for a histogram's buckets: Prometheus
adds up a service's replicas, so a refresh reads one histogram per service rather than one per
pod. Rates are over the window (``[services] window``); histogram buckets are read as rates
(``rate(…_bucket[window])``) and the core takes ``histogram_quantile`` of each service's
buckets (summed again where its pods make several workloads).
"""

from __future__ import annotations

import math
from sys import intern
from typing import Generic, TypeVar

import msgspec

from gpuconsole.backends.prometheus.mapping import _braces
from gpuconsole.model import PodSeries, ServingSeries
from gpuconsole.model.serving import WORKLOAD_RULE
from gpuconsole.model.serving import SeriesName as S

VLLM, TRITON, TGI = "vllm", "triton", "tgi"
FAMILIES: tuple[str, ...] = (VLLM, TRITON, TGI)

# {answer: ((family, expression), ...)}: ``{w}`` is the window, ``{s}`` the selector's braces.
TERMS: dict[str, tuple[tuple[str, str], ...]] = {
    S.OK: ((VLLM, "rate(vllm:request_success_total{s}[{w}])"),
           (TRITON, "rate(nv_inference_request_success{s}[{w}])"),
           (TGI, "rate(tgi_request_success{s}[{w}])")),
    S.ERRORS: ((TRITON, "rate(nv_inference_request_failure{s}[{w}])"),
               (TGI, "rate(tgi_request_failure{s}[{w}])")),
    S.LATENCY_BUCKET: ((VLLM, "rate(vllm:e2e_request_latency_seconds_bucket{s}[{w}])"),
                       (TGI, "rate(tgi_request_duration_bucket{s}[{w}])")),
    S.LATENCY_QUANTILE: ((TRITON, "nv_inference_request_summary_us{s} / 1e6"),),
    S.LATENCY_SUM: ((VLLM, "rate(vllm:e2e_request_latency_seconds_sum{s}[{w}])"),
                    (TRITON, "rate(nv_inference_request_duration_us{s}[{w}]) / 1e6"),
                    (TGI, "rate(tgi_request_duration_sum{s}[{w}])")),
    S.LATENCY_COUNT: ((VLLM, "rate(vllm:e2e_request_latency_seconds_count{s}[{w}])"),
                      (TRITON, "rate(nv_inference_request_success{s}[{w}])"),
                      (TGI, "rate(tgi_request_duration_count{s}[{w}])")),
    S.TTFT_BUCKET: ((VLLM, "rate(vllm:time_to_first_token_seconds_bucket{s}[{w}])"),),
    S.TOKENS: ((VLLM, "rate(vllm:generation_tokens_total{s}[{w}])"),
               (TGI, "rate(tgi_request_generated_tokens_sum{s}[{w}])")),
    S.INFERENCES: ((TRITON, "rate(nv_inference_count{s}[{w}])"),),
    S.RUNNING: ((VLLM, "vllm:num_requests_running{s}"),
                (TGI, "tgi_batch_current_size{s}")),
    S.WAITING: ((VLLM, "vllm:num_requests_waiting{s}"),
                (TRITON, "nv_inference_pending_request_count{s}"),
                (TGI, "tgi_queue_size{s}")),
    S.QUEUE_SUM: ((TRITON, "rate(nv_inference_queue_duration_us{s}[{w}]) / 1e6"),
                  (TGI, "rate(tgi_request_queue_duration_sum{s}[{w}])")),
    # vLLM's KV-cache use is a ratio per replica, under its new name or the older one.
    S.KV_CACHE: ((VLLM, "vllm:kv_cache_usage_perc{s} or vllm:gpu_cache_usage_perc{s}"),),
}
# The answers whose series keep one more label than the pod: a bucket's bound, a summary's quantile.
EXTRA_LABEL = {S.LATENCY_BUCKET: "le", S.TTFT_BUCKET: "le", S.LATENCY_QUANTILE: "quantile"}
# The answers read per pod: a replica's own figures (requests/s, running, waiting); the others
# come per workload, a few series for a service's pods rather than a histogram for each of them.
BY_POD = frozenset({S.OK, S.ERRORS, S.RUNNING, S.WAITING})
# The answers an SLO is judged on, read again over each SLO's own window.
SLO_ANSWERS = (S.OK, S.ERRORS, S.LATENCY_BUCKET, S.LATENCY_QUANTILE, S.TTFT_BUCKET)
MEAN = {S.KV_CACHE}  # averaged over a pod's series (one per model) rather than summed
MAXIMUM = {S.LATENCY_QUANTILE}  # a summary's quantile: the slowest of a pod's models


def window_text(seconds: float) -> str:
    """A PromQL duration: ``2m``, ``90s``."""
    whole = int(round(seconds))
    return f"{whole // 60}m" if whole % 60 == 0 else f"{whole}s"


def figure_query(name: str, window_s: float, selector: str = "") -> str:
    """The one query of answer ``name`` (without a window suffix) for every service of every family:
    per pod for :data:`BY_POD`, else per workload (the sum over its pods, Prometheus adding up)."""
    how = "avg" if name in MEAN else "max" if name in MAXIMUM else "sum"
    extra = f", {EXTRA_LABEL[name]}" if name in EXTRA_LABEL else ""
    w, s = window_text(window_s), _braces(selector)
    terms = []
    for family, expr in TERMS[name]:
        expr = expr.format(w=w, s=s)
        if name in BY_POD:
            grouped = f"{how} by (namespace, pod{extra}) ({expr})"
        else:  # a mean is of the pods' means, as a mean over the pods' series would be
            per_pod = f"avg by (namespace, pod{extra}) ({expr})" if how == "avg" else expr
            grouped = f"{how} by (namespace, workload{extra}) ({with_workload(per_pod)})"
        terms.append(f'label_replace({grouped}, "family", "{family}", "", "")')
    return " or ".join(terms)


def with_workload(expr: str) -> str:
    """``expr`` with a ``workload`` label: what :data:`~gpuconsole.model.serving.WORKLOAD_RULE`
    makes of the pod's name (one ``label_replace``: Prometheus matches it once a series)."""
    return f'label_replace({expr}, "workload", "$1", "pod", "{WORKLOAD_RULE}")'


def pods_selector(services: Iterable[str], selector: str = "") -> str:
    """``selector`` with matchers for the pods of the services ``NS/NAME`` only: ``NAME-…`` in
    ``NS`` (a Deployment's ``NAME-<hash>-<id>``, a StatefulSet's ``NAME-0``, an
    InferenceService's ``NAME-predictor-…``); a pod of another service that shares a namespace and
    a prefix may come too, and is left out by the core's join."""
    keys = [key.split("/", 1) for key in services if "/" in key]
    if not keys:
        return selector
    namespaces = "|".join(sorted({_literal(ns) for ns, _name in keys}))
    names = "|".join(sorted({_literal(name) for _ns, name in keys}))
    inner = selector.strip().strip("{}").strip()
    return ", ".join(filter(None, (inner, f'namespace=~"{namespaces}"', f'pod=~"({names})-.+"')))


def _literal(name: str) -> str:
    """A Kubernetes name as a regular expression matching itself (``.`` as ``[.]``)."""
    return "".join(c if c.isalnum() or c == "-" else f"[{c}]" for c in name if c not in '"\\]^')


def custom_query(promql: str, window_s: float) -> str:
    """A ``[[services.metrics]]`` figure's PromQL with ``{window}`` replaced by the window."""
    return promql.replace("{window}", window_text(window_s))


# ---------------------------------------------------------------------- answers


# The answers of a refresh hold hundreds of thousands of series (a histogram's buckets for every
# pod): read into Structs the collector does not track, each value straight to a float (``NaN``,
# ``-Inf`` too; ``+Inf`` once it is written ``Inf``, see ``read_answer``).
class _Labels(msgspec.Struct, gc=False):
    namespace: str = ""
    pod: str = ""
    family: str = ""
    le: str | None = None
    quantile: str | None = None


class _WorkloadLabels(_Labels, gc=False):
    """The labels of a workload's series: its ``workload`` label read where a pod's is."""

    pod: str = msgspec.field(default="", name="workload")


class _Pair(msgspec.Struct, array_like=True, gc=False):
    """``[time, value]``: a Struct, not a tuple, so that the collector does not track it."""

    time: float
    value: float


L = TypeVar("L", bound=_Labels)


class _Sample(msgspec.Struct, Generic[L], gc=False):
    metric: L
    value: _Pair


class _Data(msgspec.Struct, Generic[L], gc=False):
    resultType: str  # noqa: N815 - the API's name
    result: list[_Sample[L]]


class _Answer(msgspec.Struct, Generic[L], gc=False):
    status: str
    data: _Data[L]


# strict=False: "1.5" reads as 1.5
_DECODERS = {by: msgspec.json.Decoder(_Answer[labels], strict=False)  # type: ignore[valid-type]
             for by, labels in (("pod", _Labels), ("workload", _WorkloadLabels))}


class ServingAnswerError(ValueError):
    """An answer that is not an instant vector."""


def read_answer(name: str, body: bytes, family: str = "") -> ServingSeries:
    """One answer as the pods' series, or the workloads' (a series without ``namespace`` and
    ``pod`` (``workload``) labels, or whose value is not a finite number, says nothing of a pod
    and is left out).

    Args:
        family: the family of every series (a ``[[services.metrics]]`` query, read per pod),
            else each series' own ``family`` label.
    """
    base = name.split("@", 1)[0]
    by = "pod" if family or base in BY_POD or base not in TERMS else "workload"
    decoder = _DECODERS[by]
    try:
        try:
            answer = decoder.decode(body)
        except msgspec.ValidationError:  # a value of +Inf, which msgspec reads only as "Inf"
            answer = decoder.decode(body.replace(b'"+Inf"', b'"Inf"'))
    except msgspec.DecodeError as exc:
        raise ServingAnswerError(f"an answer that is not an instant vector: {exc}") from None
    if answer.data.resultType != "vector":
        raise ServingAnswerError(f"expected a vector, got {answer.data.resultType!r}")
    return ServingSeries(name, _series(answer.data.result, family, base in EXTRA_LABEL), by=by)


def _series(samples: list[_Sample], family: str, bounded: bool) -> tuple[PodSeries, ...]:
    """The pods' (workloads') series, in one comprehension; with ``bounded``, each with its
    bucket's bound or its quantile. Names are interned: a workload's dozens of buckets share
    one string, hashed once when the core groups them."""
    one = PodSeries
    # ``v - v == 0`` holds for a finite v only (NaN and ±Inf give NaN).
    if not bounded:
        return tuple([one(intern(m.namespace), intern(m.pod), v, family or m.family or "custom") for s in samples
                      if (m := s.metric).namespace and m.pod and (v := s.value.value) - v == 0])
    bound = _BOUNDS
    if len(bound) > 4096:  # bounds are a few dozen texts; a server that invents them does not grow this
        bound.clear()
    return tuple([one(intern(m.namespace), intern(m.pod), v, family or intern(m.family) or "custom", b) for s in samples
                  if (m := s.metric).namespace and m.pod and (v := s.value.value) - v == 0
                  and ((b := bound[m.le if m.le is not None else m.quantile]) is not None or m.le is None is m.quantile)])


class _Bounds(dict[str | None, float | None]):
    """A bucket's ``le`` (or a summary's ``quantile``) text → its number (None: not a number),
    worked out once per text."""

    def __missing__(self, text: str | None) -> float | None:
        value = None if text is None else math.inf if text in ("+Inf", "Inf") else number(text)
        self[text] = value
        return value


_BOUNDS = _Bounds()


def number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
