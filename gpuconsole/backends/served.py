"""A cluster's inference services with their pods' serving figures, read from Prometheus.

:class:`ServedServices` is the ``kube`` services source once a Prometheus is configured (the
fleet's ``[prometheus]`` or ``[services.prometheus]``): each poll lists the cluster's services,
then reads every pod's figures in one round of queries (:class:`PrometheusServing`). A
Prometheus that fails leaves the services listed, their figures unknown and the reason in the
reading's ``error``; it never takes the cluster's part down. Changes (scale, restart), logs and
describe go to the cluster; the service screen's charts are Prometheus ``query_range`` over
the service's own pods.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.prometheus import mapping as pm
from gpuconsole.backends.prometheus import serving_queries as sq
from gpuconsole.backends.prometheus.client import PrometheusSettings
from gpuconsole.backends.prometheus.serving import CustomFigure, PrometheusServing
from gpuconsole.model import ServicesReading, ServingReading
from gpuconsole.model.serving import SeriesName as S


@dataclass(frozen=True, slots=True)
class FiguresSettings:
    """Where and how the services' serving figures are read."""

    prometheus: PrometheusSettings
    window_s: float = 120.0
    custom: tuple[CustomFigure, ...] = ()
    slo_windows: tuple[float, ...] = ()
    slo_services: tuple[str, ...] = ()  # NS/NAME of the services whose SLOs have those windows


def pod_selector(namespace: str, pods: tuple[str, ...], base: str = "") -> str:
    """``namespace="ns",pod=~"a|b"`` (with the configured selector first)."""
    pattern = "|".join(p.replace(".", "\\\\.") for p in pods) or "^$"
    mine = f'namespace="{namespace}",pod=~"{pattern}"'
    return f"{base},{mine}" if base else mine


def history_query(figure: str, window_s: float, selector: str) -> str:
    """The one-series PromQL of ``figure`` over the pods ``selector`` names (a service's)."""
    if figure == "rps":
        return f"sum({sq.figure_query(S.OK, window_s, selector)})"
    if figure == "tokens_per_s":
        return f"sum({sq.figure_query(S.TOKENS, window_s, selector)})"
    if figure == "p99_ms":
        quantile = f"1000 * histogram_quantile(0.99, sum by (le) ({sq.figure_query(S.LATENCY_BUCKET, window_s, selector)}))"
        mean = (f"1000 * sum({sq.figure_query(S.LATENCY_SUM, window_s, selector)}) / "
                f"sum({sq.figure_query(S.LATENCY_COUNT, window_s, selector)})")
        return f"({quantile}) or ({mean})"  # a server without histograms: its mean
    if figure == "gpu_util":
        return f"avg({pm.UTIL}{{{selector}}})"
    raise BackendError(f"no history of {figure!r} (rps, p99_ms, tokens_per_s or gpu_util)")


class ServedServices:
    """The services of ``cluster`` (a services backend) with ``figures`` joined to each poll.

    Args:
        cluster: lists the services and changes them (the Kubernetes adapter).
        settings: the Prometheus and window the figures come from.
    """

    def __init__(self, cluster: Any, settings: FiguresSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.figures = PrometheusServing(settings.prometheus, settings.window_s, settings.custom, settings.slo_windows,
                                         settings.slo_services)
        self.name = f"{getattr(cluster, 'name', 'kube')}+prometheus"
        self.capabilities = getattr(cluster, "capabilities", frozenset())
        # A poll is the cluster's (its first discovery and lists), then one round of queries.
        self.poll_timeout = float(getattr(cluster, "poll_timeout", 0.0)) + self.figures.poll_timeout

    def poll_services(self) -> ServicesReading:
        reading: ServicesReading = self.cluster.poll_services()
        if not reading.services:
            return reading
        try:
            serving = self.figures.poll_serving()
        except BackendError as exc:  # the services stay listed; their figures are unknown, and why
            serving = ServingReading((), time.time(), self.settings.window_s,
                                     f"serving figures from Prometheus at {self.figures.host}: {exc}")
        return msgspec.structs.replace(reading, serving=serving)

    # ------------------------------------------------------------------ the cluster's part
    def scale_service(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        self.cluster.scale_service(kind, namespace, name, replicas)

    def restart_service(self, kind: str, namespace: str, name: str) -> None:
        self.cluster.restart_service(kind, namespace, name)

    def service_logs(self, namespace: str, pod: str, *, tail_lines: int = 1000, follow: bool = False,
                     stop: threading.Event | None = None) -> Iterator[str]:
        return self.cluster.service_logs(namespace, pod, tail_lines=tail_lines, follow=follow, stop=stop)

    def describe_service(self, kind: str, namespace: str, name: str) -> str:
        return self.cluster.describe_service(kind, namespace, name)

    # ------------------------------------------------------------------ Prometheus's part
    def service_history(self, namespace: str, pods: tuple[str, ...], figure: str, since: float, until: float,
                        step: float) -> tuple[tuple[float, float], ...]:
        selector = pod_selector(namespace, pods, self.settings.prometheus.selector)
        return self.figures.history(history_query(figure, self.settings.window_s, selector), since, until, step)

    def close(self) -> None:
        try:
            self.figures.close()
        finally:
            self.cluster.close()
