"""Inference servers' figures from Prometheus: one instant query per figure for every service.

:class:`PrometheusServing` reads the answers of :mod:`~gpuconsole.backends.prometheus.serving_queries`
(and of any ``[[services.metrics]]`` queries) for every pod at once, a few queries at a time
over the client's keep-alive pool, and a figure's history over the last hour (``query_range``)
for the service detail's charts. The pods' answers become a
:class:`~gpuconsole.model.ServingReading`; which pods make which service is the core's join.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import msgspec

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.prometheus import answers as pa
from gpuconsole.backends.prometheus import serving_queries as sq
from gpuconsole.backends.prometheus.client import PrometheusClient, PrometheusSettings
from gpuconsole.model import ServingReading, ServingSeries


@dataclass(frozen=True, slots=True)
class CustomFigure:
    """One ``[[services.metrics]]`` figure: a family's PromQL whose series carry ``namespace``
    and ``pod`` (``{window}`` is replaced by the window)."""

    family: str
    figure: str  # rps, p99_ms, … (a name of ``model.serving.FIGURES``)
    promql: str


class PrometheusServing:
    """The serving figures of every pod one Prometheus scrapes.

    Args:
        settings: where and how to connect.
        window_s: the window rates and quantiles are taken over.
        custom: the ``[[services.metrics]]`` figures, read besides the built-in families.
        slo_windows: other windows SLOs are measured over: the figures an SLO names are read
            over each too (answers named ``ok@300``, …).
        slo_services: the services (``NS/NAME``) whose SLOs have those windows: the answers over
            them are read for their pods only (``()``: for every pod).
        env: where the token and password variables are read.
    """

    def __init__(self, settings: PrometheusSettings, window_s: float = 120.0, custom: tuple[CustomFigure, ...] = (),
                 slo_windows: tuple[float, ...] = (), slo_services: tuple[str, ...] = (),
                 env: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.window_s = window_s
        self.custom = custom
        self.slo_windows = slo_windows
        self.slo_services = slo_services
        self._client = PrometheusClient(settings, env)
        self.name = self._client.name
        self.host = self._client.host
        self.poll_timeout = 2.0 * settings.timeout

    def queries(self) -> dict[str, tuple[str, str]]:
        """``{answer: (PromQL, family or "")}`` of one round: the built-in figures, then the
        custom ones (a family's label is its own name)."""
        selector = self.settings.selector
        found = {name: (sq.figure_query(name, self.window_s, selector), "") for name in sq.TERMS}
        slo_selector = sq.pods_selector(self.slo_services, selector)
        for window in self.slo_windows:
            for name in sq.SLO_ANSWERS:
                found[f"{name}@{window:g}"] = (sq.figure_query(name, window, slo_selector), "")
        for n, custom in enumerate(self.custom):
            found[f"{custom.figure}#{n}"] = (sq.custom_query(custom.promql, self.window_s), custom.family)
        return found

    def poll_serving(self) -> ServingReading:
        """One round of every query at one moment. A query Prometheus refuses (a custom PromQL
        with a typo) is named in the reading's ``error`` and the others still count; a server
        that cannot be reached, or refuses the credentials, raises.

        Raises:
            BackendTimeout, BackendPermissionDenied, BackendThrottled, BackendError.
        """
        now = time.time()
        headers = self._client.headers()
        params = {"time": f"{now:.3f}"}
        executor = self._client.executor()
        # A query two answers share (a summary's quantiles have no window) is sent and read once.
        sent: dict[str, Future[bytes]] = {}
        futures: dict[str, tuple[str, str]] = {}
        for name, (query, family) in self.queries().items():
            if query not in sent:
                sent[query] = executor.submit(self._client.get, "/api/v1/query", {"query": query, **params}, headers,
                                              raw=True)
            futures[name] = (query, family)
        answers: list[ServingSeries] = []
        read: dict[tuple[str, str], ServingSeries] = {}
        refused: list[str] = []
        fatal: BaseException | None = None
        for name, (query, family) in futures.items():
            figure = name.split("#", 1)[0]
            try:
                if (query, family) not in read:
                    read[(query, family)] = sq.read_answer(figure, sent[query].result(), family)
                answers.append(msgspec.structs.replace(read[(query, family)], name=figure))
            except sq.ServingAnswerError as exc:
                refused.append(f"{figure}: {exc}")
            except BackendError as exc:
                if family and "bad_data" in str(exc):  # a custom query Prometheus cannot parse
                    refused.append(f"{family} {figure}: {exc}")
                else:
                    fatal = fatal or exc
        if fatal is not None:
            raise fatal
        error = f"Prometheus at {self.host}: " + "; ".join(refused) if refused else ""
        return ServingReading(tuple(answers), now, self.window_s, error)

    def history(self, promql: str, since: float, until: float, step: float) -> tuple[tuple[float, float], ...]:
        """``(time, value)`` of a one-series PromQL from ``since`` to ``until`` (``query_range``);
        the first series when it gives several."""
        params = {"query": promql, "start": f"{since:.3f}", "end": f"{until:.3f}", "step": f"{max(1.0, step):g}"}
        answer: Any = self._client.get("/api/v1/query_range", params, self._client.headers())
        try:
            series = pa.matrix(answer)
        except pa.PrometheusAnswerError as exc:
            raise BackendError(f"Prometheus at {self.host}: {exc}") from exc
        if not series:
            return ()
        points = []
        for at, text in series[0].get("values", ()):
            value = sq.number(str(text))
            if value is not None:
                points.append((float(at), value))
        return tuple(points)

    def close(self) -> None:
        self._client.close()

