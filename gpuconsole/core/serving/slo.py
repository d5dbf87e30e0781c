"""Service level objectives: met or breached now, since when, and the alert a breach raises.

An SLO (``[[services.slo]]``) sets limits on a service's p99 latency, time to first token and
error ratio, measured over its window. It is met when every figure it names is known and within
its limit, breached when one is over, and unknown (None) while a figure it names cannot be
known (no metrics, no requests). :class:`SloTracker` remembers since when each service's state
has held, across snapshots; a breach is a warning alert with the figure and its limit.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuconsole.core.serving.config import Slo
from gpuconsole.model import Alert, Service, ServiceSlo, Severity

WORDS = {"p99_ms": "p99", "ttft_ms": "TTFT", "error_ratio": "error ratio"}


def window_words(seconds: float) -> str:
    return f"{seconds / 60:g}m" if seconds % 60 == 0 else f"{seconds:g}s"


def figure_words(name: str, value: float) -> str:
    """``p99 412 ms``, ``error ratio 1.2%``."""
    if name == "error_ratio":
        return f"{WORDS[name]} {value * 100:.1f}%"
    return f"{WORDS.get(name, name)} {value:,.0f} ms"


class SloTracker:
    """Since when each service's SLO has been met, breached or unknown (not thread-safe: the
    composing thread feeds it)."""

    def __init__(self) -> None:
        self._state: dict[str, tuple[bool | None, float]] = {}

    def judge(self, service: Service, slo: Slo, figures: Mapping[str, float | None], now: float) -> ServiceSlo:
        """The SLO of ``service`` judged on ``figures`` (measured over the SLO's window)."""
        limits = {"p99_ms": slo.p99_ms, "ttft_ms": slo.ttft_ms, "error_ratio": slo.error_ratio}
        breached, unknown = [], False
        for name, limit in limits.items():
            if limit is None:
                continue
            value = figures.get(name)
            if value is None:
                unknown = True
            elif value > limit:
                breached.append(name)
        met: bool | None = False if breached else None if unknown else True
        key = service.key
        last = self._state.get(key)
        since = last[1] if last is not None and last[0] == met else now
        self._state[key] = (met, since)
        values = tuple((n, v) for n, limit in limits.items() if limit is not None and (v := figures.get(n)) is not None)
        return ServiceSlo(slo.p99_ms, slo.ttft_ms, slo.error_ratio, window_words(slo.window_s), met, tuple(breached),
                          since, values)

    def forget_all_but(self, keys: set[str]) -> None:
        """Drop the services that are gone."""
        for key in [k for k in self._state if k not in keys]:
            del self._state[key]


def breach_alert(service: Service, now: float) -> Alert | None:
    """``chat/vllm-llama3 breaches its SLO: p99 412 ms over 300 ms, for 3 min`` (None when met)."""
    slo = service.slo
    if slo is None or slo.met is not False:
        return None
    parts = []
    judged = dict(slo.values)
    for name in slo.breached:
        value, limit = judged.get(name), getattr(slo, name)
        if name == "error_ratio" and value is not None:
            parts.append(f"{figure_words(name, value)} over {limit * 100:g}%")
        elif value is not None:
            parts.append(f"{figure_words(name, value)} over {limit:g} ms")
    minutes = int(max(0.0, now - (slo.since or now)) // 60)
    held = f", for {minutes} min" if minutes else ""
    return Alert(Severity.WARNING, "services", f"{service.key} breaches its SLO: {', '.join(parts)}{held}", now)
