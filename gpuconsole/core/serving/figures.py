"""Each service's serving figures from its pods' answers: sums, means and histogram quantiles.

A :class:`~gpuconsole.model.ServingReading` holds one answer per figure for every pod of every
service, or for every workload (the pods a Deployment or StatefulSet names, added up by the
server: the service's workloads are those its replicas' names give, and a workload two services
claim says nothing of either; a pod gone within the window still counts in its workload's);
:func:`with_figures` adds up each service's replicas (rates and queue lengths), divides
what is a mean (latency sum over count), and takes the quantiles of the service's summed bucket
rates exactly as Prometheus's ``histogram_quantile`` does. A figure no pod answered stays None;
each figure says which family it came from.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, groupby
from operator import attrgetter

import msgspec

from gpuconsole.model import PodSeries, Service, ServingReading
from gpuconsole.model.serving import ADDITIVE, FIGURES, workload_of
from gpuconsole.model.serving import SeriesName as S

PodKey = tuple[str, str]  # (namespace, pod)
_POD = attrgetter("namespace", "pod")
FIGURES_SET = frozenset(FIGURES)
QUANTILES = (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99))
TTFT_QUANTILE = 0.99  # ttft_ms is the 99th percentile of the time to the first token


ServiceId = tuple[str, str, str]  # (kind, namespace, name): a Deployment and a StatefulSet may share a name


def service_id(service: Service) -> ServiceId:
    return (service.kind.value, service.namespace, service.name)


class PodIndex:
    """A reading's answers, each service's series apart, built once per reading: every series
    goes once to the service whose pod (or workload) it is.

    Args:
        services: every service of the reading. A workload two of them claim (their pods' names
            give the same one) adds up pods of both: it says nothing of either, and the answers
            per workload say nothing of a service that has such a workload.
    """

    def __init__(self, reading: ServingReading | None, services: Iterable[Service] = ()) -> None:
        self.per_workload: set[str] = set()  # the answers whose series are workloads' sums
        self.custom = False  # any [[services.metrics]] answer
        self.mixed: set[ServiceId] = set()  # the services with a workload another one claims too
        self._of: dict[ServiceId, dict[str, list[PodSeries]]] = {}
        if reading is None:
            return
        pods: dict[PodKey, dict[str, list[PodSeries]]] = {}
        workloads: dict[PodKey, ServiceId] = {}
        for service in services:
            mine = self._of.setdefault(service_id(service), {})
            keys = pods_of(service)
            pods.update(dict.fromkeys(keys, mine))
            for key in workloads_of(keys):
                if workloads.setdefault(key, service_id(service)) != service_id(service):
                    self.mixed.update((workloads[key], service_id(service)))
        by_workload = {key: self._of[owner] for key, owner in workloads.items()}
        names: set[str] = set()
        for answer in reading.answers:
            name = answer.name
            names.add(name)
            if answer.by == "workload":
                self.per_workload.add(name)
            owners = by_workload if answer.by == "workload" else pods
            series = answer.series
            if series and series[0].le is None:  # one series a pod or workload, mostly
                for key, one in zip(map(_POD, series), series):
                    mine = owners.get(key)
                    if mine is not None:
                        found = mine.get(name)
                        if found is None:
                            mine[name] = [one]
                        else:
                            found.append(one)
                continue
            # Every series to its service's list, one dict look-up each (a workload's buckets,
            # one after the other, go as a run).
            for key, run in groupby(series, _POD):
                mine = owners.get(key)
                if mine is not None:
                    found = mine.get(name)
                    if found is None:
                        mine[name] = list(run)
                    else:
                        found.extend(run)
        self.custom = not FIGURES_SET.isdisjoint(names)

    def of(self, service: Service) -> dict[str, list[PodSeries]]:
        """Every answer's series for ``service``, by answer name."""
        return self._of.get(service_id(service), {})


def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """The ``q`` quantile of cumulative ``(upper bound, count)`` buckets, as PromQL's
    ``histogram_quantile``: linear within the bucket the rank falls in, the highest finite
    bound when it falls in the ``+Inf`` bucket; None without a ``+Inf`` bucket or any count."""
    return histogram_quantiles((q,), buckets)[0]


def histogram_quantiles(qs: Sequence[float], buckets: Iterable[tuple[float, float]]) -> list[float | None]:
    """:func:`histogram_quantile` of each of ``qs``, the buckets (every replica's, summed by
    bound) added up once."""
    merged: dict[float, float] = defaultdict(float)
    for bound, count in buckets:
        merged[bound] += count
    return _quantiles(qs, merged)


def series_quantiles(qs: Sequence[float], series: Iterable[PodSeries]) -> list[float | None]:
    """:func:`histogram_quantiles` of bucket series (their ``le`` and value)."""
    series = list(series)
    merged: dict[float | None, float] = {s.le: s.value for s in series}
    if len(merged) == len(series) and None not in merged:  # one histogram (a workload's): no bound twice
        return _quantiles(qs, merged)  # type: ignore[arg-type]
    merged = defaultdict(float)
    for s in series:
        if s.le is not None:
            merged[s.le] += s.value
    return _quantiles(qs, merged)  # type: ignore[arg-type]


def _quantiles(qs: Sequence[float], merged: Mapping[float, float]) -> list[float | None]:
    ordered = sorted(merged.items())
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return [None] * len(qs)
    # A count lower than the one below it is the scrape's skew: each count at least the one below.
    counts = list(accumulate((count for _bound, count in ordered), max, initial=0.0))[1:]
    total = counts[-1]
    if total <= 0:
        return [None] * len(qs)
    return [_rank_bound(q * total, ordered, counts) for q in qs]


def _rank_bound(rank: float, ordered: list[tuple[float, float]], counts: list[float]) -> float:
    index = bisect.bisect_left(counts, rank)  # the first bucket whose count reaches the rank
    if index >= len(ordered) - 1:
        return ordered[-2][0]
    end = ordered[index][0]
    if index == 0:
        if end <= 0:
            return end
        start, below = 0.0, 0.0
    else:
        start, below = ordered[index - 1][0], counts[index - 1]
    inside = counts[index] - below
    return start + (end - start) * ((rank - below) / inside if inside > 0 else 0.0)


def _sum(series: list[PodSeries]) -> float | None:
    if len(series) == 1:  # a workload's sum, mostly
        return series[0].value
    return math.fsum(s.value for s in series) if series else None


def _families(series: list[PodSeries]) -> str:
    found = {s.family for s in series}
    return found.pop() if len(found) == 1 else "+".join(sorted(found))


def _ratio(top: float | None, bottom: float | None, scale: float = 1.0) -> float | None:
    if top is None or bottom is None or bottom <= 0:
        return None
    return top / bottom * scale


def figures_of(index: PodIndex, service: Service, suffix: str = "") -> tuple[dict[str, float | None], dict[str, str]]:
    """The figures of ``service`` from its pods' answers, and each known figure's family.

    Args:
        suffix: the answers of another window (``@300``), for an SLO measured over its own.
    """
    mine = index.of(service)
    skip = index.per_workload if service_id(service) in index.mixed else ()

    def of(name: str) -> list[PodSeries]:
        name += suffix
        return [] if name in skip else mine.get(name, [])

    figures: dict[str, float | None] = dict.fromkeys(FIGURES)
    families: dict[str, str] = {}

    named: dict[int, str] = {}  # the families of each series list used, worked out once each

    def put(figure: str, value: float | None, *used: list[PodSeries]) -> None:
        if value is None:
            return
        figures[figure] = value
        found = []
        for group in used:
            if group:
                key = id(group)
                if key not in named:
                    named[key] = group[0].family if len(group) == 1 else _families(group)
                found.append(named[key])
        families[figure] = found[0] if len(found) == 1 else "+".join(sorted({p for f in found for p in f.split("+")}))

    ok, errors = of(S.OK), of(S.ERRORS)
    ok_rate, error_rate = _sum(ok), _sum(errors)
    if ok_rate is not None:
        put("rps", ok_rate + (error_rate or 0.0), ok, errors)
    put("error_ratio", _ratio(error_rate, (ok_rate or 0.0) + (error_rate or 0.0)), errors)
    buckets = of(S.LATENCY_BUCKET)
    summary = of(S.LATENCY_QUANTILE)
    from_buckets = series_quantiles([q for _f, q in QUANTILES], buckets) if buckets else [None] * len(QUANTILES)
    for (figure, q), value in zip(QUANTILES, from_buckets, strict=True):
        if value is not None:
            put(figure, value * 1000.0, buckets)
        else:  # a summary's quantile (Triton's, where enabled): the slowest replica's
            said = [s for s in summary if s.le is not None and abs(s.le - q) < 1e-9]
            if said:
                put(figure, max(s.value for s in said) * 1000.0, said)
    lat_sum, lat_count = of(S.LATENCY_SUM), of(S.LATENCY_COUNT)
    put("mean_ms", _ratio(_sum(lat_sum), _sum(lat_count), 1000.0), lat_sum)
    ttft = of(S.TTFT_BUCKET)
    ttft_s = series_quantiles((TTFT_QUANTILE,), ttft)[0] if ttft else None
    put("ttft_ms", ttft_s * 1000.0 if ttft_s is not None else None, ttft)
    for figure, name in (("tokens_per_s", S.TOKENS), ("inferences_per_s", S.INFERENCES), ("running", S.RUNNING),
                         ("queue_depth", S.WAITING)):
        series = of(name)
        put(figure, _sum(series), series)
    queued = of(S.QUEUE_SUM)
    put("queue_ms", _ratio(_sum(queued), _sum(lat_count), 1000.0), queued)
    kv = of(S.KV_CACHE)
    put("kv_cache", math.fsum(s.value for s in kv) / len(kv) if kv else None, kv)
    for figure in FIGURES if index.custom else ():  # [[services.metrics]] figures: named after the figure itself
        custom = of(figure)
        if custom and figures[figure] is None:
            put(figure, _sum(custom) if figure in ADDITIVE else max(s.value for s in custom), custom)
    return figures, families


def pods_of(service: Service) -> list[PodKey]:
    return [(service.namespace, r.pod) for r in service.replicas]


def workloads_of(pods: Iterable[PodKey]) -> list[PodKey]:
    """``(namespace, workload)`` of the workloads ``pods`` belong to, each once."""
    return list(dict.fromkeys((namespace, workload_of(pod)) for namespace, pod in pods))


def with_figures(services: Iterable[Service], index: PodIndex) -> list[Service]:
    """``services`` with the figures the answers of ``index`` give for their pods (and each
    replica with its own requests/s, running and waiting)."""
    out = []
    for service in services:
        figures, families = figures_of(index, service)
        out.append(_with(service, figures, families, index))
    return out


def _per_pod(series: list[PodSeries] | None) -> dict[str, float]:
    """A per-pod answer's value for each pod (the sum of its series where it has several)."""
    if not series:
        return {}
    one = {s.pod: s.value for s in series}
    if len(one) == len(series):  # one series a pod, mostly
        return one
    values: dict[str, list[float]] = defaultdict(list)
    for s in series:
        values[s.pod].append(s.value)
    return {pod: v[0] if len(v) == 1 else math.fsum(v) for pod, v in values.items()}


def _with(service: Service, figures: Mapping[str, float | None], families: Mapping[str, str],
          index: PodIndex) -> Service:
    known = {k: v for k, v in figures.items() if v is not None}
    if not known:
        return service
    mine = index.of(service)
    ok, errors, running, waiting = (_per_pod(mine.get(name)) for name in (S.OK, S.ERRORS, S.RUNNING, S.WAITING))
    replicas = []
    for replica in service.replicas:
        pod = replica.pod
        served = ok.get(pod)
        replicas.append(msgspec.structs.replace(
            replica, rps=served + errors.get(pod, 0.0) if served is not None else None,
            running=running.get(pod), waiting=waiting.get(pod)))
    sources = tuple((f, families[f]) for f in FIGURES if f in known)
    shown = ",".join(sorted({part for _f, fam in sources for part in fam.split("+")}))
    return msgspec.structs.replace(service, **known, replicas=tuple(replicas), sources=sources, metrics_source=shown)
