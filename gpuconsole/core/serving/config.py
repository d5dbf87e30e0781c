"""The ``[services]`` table: the serving window, another Prometheus, custom metrics and SLOs.

::

    [services]
    window = "2m"                      # rates and quantiles are taken over this (default 2m)
    [services.prometheus]              # another Prometheus than [prometheus] (same keys)
    url = "https://prometheus.serving.example.com"

    [[services.metrics]]               # any other server: a PromQL per figure, by namespace and pod
    family = "ray"
    rps = 'sum by (namespace, pod) (rate(ray_serve_num_http_requests_total[{window}]))'
    p99_ms = 'histogram_quantile(0.99, sum by (namespace, pod, le) (rate(ray_serve_http_request_latency_ms_bucket[{window}])))'

    [[services.slo]]                   # one service's objectives
    service = "chat/vllm-llama3"
    p99_ms = 300
    ttft_ms = 500
    error_ratio = 0.01
    window = "5m"

Each problem is one :class:`~gpuconsole.core.config.ConfigError` line naming the file and key.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from gpuconsole.core.config import ConfigError, config_path
from gpuconsole.core.config_decode import TableError, decode_table
from gpuconsole.model.serving import FIGURES

TABLE = "services"
DEFAULT_WINDOW_S = 120.0
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_Text = Annotated[str, msgspec.Meta(min_length=1)]
_Duration = Annotated[str, msgspec.Meta(min_length=1, description='a duration such as "90s", "2m" or "1h"')]
_PromQL = Annotated[str, msgspec.Meta(min_length=1, description="a PromQL expression")]
_Ms = Annotated[float, msgspec.Meta(gt=0, description="a number of milliseconds more than 0")]


class MetricsTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[services.metrics]]`` table: a family's PromQL per figure."""

    family: Annotated[str, msgspec.Meta(min_length=1, extra={"missing": "name the server's family (family = \"ray\")"})]
    rps: _PromQL | None = None
    p50_ms: _PromQL | None = None
    p95_ms: _PromQL | None = None
    p99_ms: _PromQL | None = None
    mean_ms: _PromQL | None = None
    ttft_ms: _PromQL | None = None
    tokens_per_s: _PromQL | None = None
    inferences_per_s: _PromQL | None = None
    running: _PromQL | None = None
    queue_depth: _PromQL | None = None
    queue_ms: _PromQL | None = None
    error_ratio: _PromQL | None = None
    kv_cache: _PromQL | None = None


class SloTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[services.slo]]`` table."""

    service: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                                         description="NAMESPACE/NAME of a service",
                                         extra={"missing": "name the service (service = \"NS/NAME\")"})]
    p99_ms: _Ms | None = None
    ttft_ms: _Ms | None = None
    error_ratio: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    window: _Duration | None = None


class ServicesTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The ``[services]`` table as written."""

    window: _Duration | None = None
    prometheus: dict[str, Any] | None = None
    metrics: list[MetricsTable] = []
    slo: list[SloTable] = []


@dataclass(frozen=True, slots=True)
class Slo:
    """One service's objectives, checked: the limits set and the window they are measured over."""

    service: str
    p99_ms: float | None = None
    ttft_ms: float | None = None
    error_ratio: float | None = None
    window_s: float = DEFAULT_WINDOW_S


@dataclass(frozen=True, slots=True)
class ServingConfig:
    """What the ``[services]`` table says, with every default filled in.

    Attributes:
        window_s: the window of rates and quantiles.
        prometheus: the ``[services.prometheus]`` table as written (``{}``: the fleet's own).
        custom: ``(family, figure, PromQL)`` of each ``[[services.metrics]]`` figure.
        slos: by ``NS/NAME``.
    """

    window_s: float = DEFAULT_WINDOW_S
    prometheus: Mapping[str, Any] = field(default_factory=dict)
    custom: tuple[tuple[str, str, str], ...] = ()
    slos: Mapping[str, Slo] = field(default_factory=dict)
    path: str = ""

    def slo_windows(self) -> tuple[float, ...]:
        """The SLO windows other than the serving window (each read with queries of its own)."""
        return tuple(sorted({s.window_s for s in self.slos.values() if s.window_s != self.window_s}))

    def slo_window_services(self) -> tuple[str, ...]:
        """The services (``NS/NAME``) whose SLOs have a window of their own: the answers over the
        SLO windows are read for their pods only."""
        return tuple(sorted(key for key, s in self.slos.items() if s.window_s != self.window_s))


def duration_s(text: str) -> float:
    """``"2m"`` → 120.0; ValueError (one line) for anything else."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f'expected a duration such as "90s", "2m" or "1h", got {text!r}')
    seconds = float(match[1]) * _UNITS[match[2]]
    if not 10.0 <= seconds <= 86400.0:
        raise ValueError(f"expected a duration from 10s to 24h, got {text!r}")
    return seconds


def decode(table: Any, path: str = "") -> ServingConfig:
    """The ``[services]`` table (a TOML dict) checked. Raises :class:`ConfigError`."""
    where = f"{path}: " if path else ""
    try:
        decoded = decode_table(table, ServicesTable)
    except TableError as exc:
        if not exc.key:
            raise ConfigError(f"{where}key {TABLE}: write it as a [services] table") from None
        raise ConfigError(f"{where}[services] key {exc.key}: {exc.problem}") from None
    try:
        window = duration_s(decoded.window) if decoded.window else DEFAULT_WINDOW_S
    except ValueError as exc:
        raise ConfigError(f"{where}[services] key window: {exc}") from None
    custom = []
    for n, metrics in enumerate(decoded.metrics):
        figures = [(metrics.family, f, getattr(metrics, f)) for f in FIGURES if getattr(metrics, f)]
        if not figures:
            raise ConfigError(f"{where}[services] key metrics[{n}]: give a PromQL for at least one figure "
                              f"({', '.join(FIGURES)})")
        custom.extend(figures)
    slos: dict[str, Slo] = {}
    for n, slo in enumerate(decoded.slo):
        key = f"{where}[services] key slo[{n}]"
        if slo.p99_ms is None and slo.ttft_ms is None and slo.error_ratio is None:
            raise ConfigError(f"{key}: set p99_ms, ttft_ms or error_ratio")
        if slo.service in slos:
            raise ConfigError(f"{key}.service: {slo.service} has an SLO already")
        try:
            slo_window = duration_s(slo.window) if slo.window else window
        except ValueError as exc:
            raise ConfigError(f"{key}.window: {exc}") from None
        slos[slo.service] = Slo(slo.service, slo.p99_ms, slo.ttft_ms, slo.error_ratio, slo_window)
    return ServingConfig(window, dict(decoded.prometheus or {}), tuple(custom), slos, path)


def load(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> ServingConfig:
    """The configuration file's ``[services]`` table (the defaults when there is none).

    A file that is missing at the default place, or is not TOML, gives the defaults here: the
    budgets' reading of the same file reports those problems.
    """
    path, _named = config_path(explicit, env)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return ServingConfig()
    table = data.get(TABLE)
    return ServingConfig() if table is None else decode(table, str(path))


# The demo's objectives: the LLM's p99 and first token, the embedding model's p99 (which its
# burst breaches a few minutes in), the risk model's p99 under 5 ms, as the guide asks.
DEMO_SLOS: Mapping[str, Slo] = {
    "chat/vllm-llama3": Slo("chat/vllm-llama3", p99_ms=10000.0, ttft_ms=2500.0),
    "search/text-embed": Slo("search/text-embed", p99_ms=150.0, error_ratio=0.01),
    "risk/risk-scorer": Slo("risk/risk-scorer", p99_ms=5.0),
}
