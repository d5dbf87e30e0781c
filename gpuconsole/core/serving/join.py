"""The services of a snapshot: the cluster's services, their pods' figures, their cost and SLOs.

:class:`ServingBook` is kept by the session (the SLO states outlive a snapshot); :meth:`compose`
runs once per snapshot, after the instances are priced, and returns the services in the order
every view lists them: namespaces by what they cost an hour, then services by $/h, an unknown
cost last.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import msgspec

from gpuconsole.core.serving.config import ServingConfig
from gpuconsole.core.serving.cost import GpuPrices, costed, gpu_use
from gpuconsole.core.serving.figures import PodIndex, figures_of, with_figures
from gpuconsole.core.serving.slo import SloTracker, breach_alert
from gpuconsole.model import Alert, FleetSnapshot, Service, ServicesReading


def window_suffix(window_s: float) -> str:
    """The suffix of the answers read over an SLO's own window (``@300``)."""
    return f"@{window_s:g}"


class ServingBook:
    """The session's serving configuration and the SLO states it has watched.

    Args:
        config: the ``[services]`` table.
        error: why the table could not be read (shown where the services are; defaults apply).
    """

    def __init__(self, config: ServingConfig | None = None, error: str = "") -> None:
        self.config = config or ServingConfig()
        self.error = error
        self.tracker = SloTracker()

    def compose(self, reading: object, snapshot: FleetSnapshot, rates: Mapping[str, float] | Iterable[tuple[str, float]],
                now: float) -> tuple[tuple[Service, ...], tuple[Alert, ...]]:
        """The services of ``reading`` (a :class:`ServicesReading`) joined with ``snapshot``'s
        GPUs, nodes and priced instances, and the alerts of their SLOs."""
        if not isinstance(reading, ServicesReading):
            return (), ()
        index = PodIndex(reading.serving, reading.services)
        prices, use = GpuPrices(snapshot, rates), gpu_use(snapshot.gpus)
        services = [costed(s, prices, use) for s in with_figures(reading.services, index)]
        judged, alerts = [], []
        for service in services:
            slo = self.config.slos.get(service.key)
            if slo is not None:
                figures = _slo_figures(service, index, slo.window_s, self.config.window_s)
                service = msgspec.structs.replace(service, slo=self.tracker.judge(service, slo, figures, now))
                alert = breach_alert(service, now)
                if alert is not None:
                    alerts.append(alert)
            judged.append(service)
        self.tracker.forget_all_but({s.key for s in judged})
        return tuple(ordered(judged)), tuple(alerts)


def _slo_figures(service: Service, index: PodIndex, window_s: float, serving_window_s: float) -> dict[str, float | None]:
    """The figures an SLO is judged on: over its own window where they were read, else the
    service's (over the serving window)."""
    if window_s != serving_window_s:
        figures, _families = figures_of(index, service, window_suffix(window_s))
        if any(v is not None for v in figures.values()):
            return figures
    return {name: service.figure(name) for name in ("p99_ms", "ttft_ms", "error_ratio")}


def ordered(services: Iterable[Service]) -> list[Service]:
    """Namespaces by what they cost an hour (most first), then each one's services by $/h;
    an unknown cost last, then by name."""
    services = list(services)
    per_namespace: dict[str, float] = defaultdict(float)
    for s in services:
        per_namespace[s.namespace] += s.usd_per_hour or 0.0

    def key(s: Service) -> tuple[float, str, bool, float, str]:
        return (-per_namespace[s.namespace], s.namespace, s.usd_per_hour is None, -(s.usd_per_hour or 0.0), s.name)

    return sorted(services, key=key)
