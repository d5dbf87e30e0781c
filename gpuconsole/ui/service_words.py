"""Inference services in words: the figures of a :class:`~gpuconsole.model.Service` as the
Services pane, the service view and ``gpuconsole service`` print them.

A figure that cannot be known is :data:`UNKNOWN` ("–"), never 0. Names from data are made
inert by the callers' cells and lines (:func:`gpuconsole.ui.format.inert`).
"""

from __future__ import annotations

from gpuconsole.model import Service, ServiceKind, ServiceSlo
from gpuconsole.ui.format import money, short_model

UNKNOWN = "–"
NO_METRICS = "no serving metrics"
# How a service's figures reach the console, said where a service has none.
EXPOSE_HINT = ("expose vLLM, Triton or TGI metrics on its pods and scrape them with the Prometheus of "
               "--prometheus / [prometheus], or map the server's own in [[services.metrics]]")
KIND_SHORT = {ServiceKind.DEPLOYMENT: "Deploy", ServiceKind.STATEFULSET: "STS", ServiceKind.INFERENCESERVICE: "ISVC"}


def latency(ms: float | None) -> str:
    """``212 ms``, ``1.2 ms``, ``6.2 s``; unknown: ``–``."""
    if ms is None:
        return UNKNOWN
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 10_000:
        return f"{ms:,.0f} ms"
    return f"{ms / 1000:,.1f} s"


def short_latency(ms: float | None) -> str:
    """A table cell's latency: ``2.4ms``, ``212ms``, ``4.7s``; unknown ``–``."""
    if ms is None:
        return UNKNOWN
    if ms < 10:
        return f"{ms:.1f}ms"
    if ms < 1000:
        return f"{ms:.0f}ms"
    return f"{ms / 1000:.1f}s" if ms < 10_000 else f"{ms / 1000:.0f}s"


def rate(value: float | None) -> str:
    """A per-second figure: ``1,840``, ``13.5``; unknown: ``–``."""
    if value is None:
        return UNKNOWN
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def count(value: float | None) -> str:
    """Requests running or waiting: ``3``; unknown: ``–``."""
    return UNKNOWN if value is None else f"{value:,.0f}"


def percent(ratio: float | None, digits: int = 1) -> str:
    """A 0..1 ratio as ``2.5%``; unknown: ``–``."""
    return UNKNOWN if ratio is None else f"{ratio * 100:.{digits}f}%"


def unit_price(usd: float | None) -> str:
    """A price per 1M tokens or per 1k requests: ``$0.94``, ``$0.0031``; unknown: ``–``."""
    if usd is None:
        return UNKNOWN
    return money(usd) if usd >= 0.1 else f"${usd:.2g}"


def per_hour(usd: float | None) -> str:
    """``$58.98`` (an hour); unknown: ``–``."""
    return UNKNOWN if usd is None else money(usd)


def model_words(service: Service) -> str:
    """``H100``, ``L4``, ``T4``: the GPU model's first word; empty when unknown."""
    return short_model(service.gpu_model).split("-")[0] if service.gpu_model else ""


def gpu_words(service: Service, *, short: bool = False) -> str:
    """What the service holds: ``8 H100``, ``2×1g.10gb`` (MIG slices), ``2 GPUs``; ``0`` when it
    holds none. ``short``: ``8×H100`` (a table cell)."""
    if service.mig_profile:
        slices = sum(1 for r in service.replicas if r.gpus > 0) or service.replicas_ready
        return f"{slices}×{service.mig_profile}"
    gpus = f"{service.gpus:g}"
    model = model_words(service)
    if not model:
        return gpus if short else f"{gpus} GPU{'s' if service.gpus != 1 else ''}"
    return f"{gpus}×{model}" if short else f"{gpus} {model}"


def kind_words(service: Service, *, short: bool = False) -> str:
    return KIND_SHORT.get(service.kind, service.kind.value) if short else service.kind.value


def ready_words(service: Service) -> str:
    """``3/4``: ready of desired replicas."""
    return f"{service.replicas_ready}/{service.replicas_desired}"


def slo_mark(slo: ServiceSlo | None) -> str:
    """``✓`` met, ``✗`` breached, ``?`` a figure it names is unknown, ``–`` no SLO."""
    if slo is None:
        return UNKNOWN
    return {True: "✓", False: "✗"}.get(slo.met, "?")  # type: ignore[arg-type]


def slo_words(slo: ServiceSlo) -> str:
    """``SLO 300 ms ✓``; ``SLO p99 300 ms, TTFT 500 ms ✗ (p99)``."""
    objectives = slo.objectives()
    mark = slo_mark(slo)
    if len(objectives) == 1 and objectives[0][0] == "p99_ms":
        words = latency(objectives[0][1])
    else:
        words = ", ".join(f"{_OBJECTIVE[name]} {percent(limit) if name == 'error_ratio' else latency(limit)}"
                          for name, limit in objectives)
    missed = f" ({', '.join(_OBJECTIVE[n] for n in slo.breached)})" if slo.breached and len(objectives) > 1 else ""
    return f"SLO {words} {mark}{missed}"


_OBJECTIVE = {"p99_ms": "p99", "ttft_ms": "TTFT", "error_ratio": "errors"}


def summary(service: Service) -> str:
    """The line under the table: ``vllm-llama3 in ns chat: 4/4 ready on 8 H100, p99 212 ms
    (SLO 300 ms ✓), 1,840 tok/s, $0.94 per 1M tokens, $58.98/h``."""
    parts = [f"{service.name} in ns {service.namespace}: {ready_words(service)} ready on {gpu_words(service)}"]
    if not service.metrics_source:
        parts.append(f"{NO_METRICS} ({EXPOSE_HINT})")
    else:
        p99 = f"p99 {latency(service.p99_ms)}" if service.p99_ms is not None else f"mean {latency(service.mean_ms)}"
        if service.slo is not None:
            p99 += f" ({slo_words(service.slo)})"
        parts.append(p99)
        if service.tokens_per_s is not None:
            parts.append(f"{rate(service.tokens_per_s)} tok/s")
            if service.usd_per_million_tokens is not None:
                parts.append(f"{unit_price(service.usd_per_million_tokens)} per 1M tokens")
        else:
            parts.append(f"{rate(service.rps)} req/s")
            if service.usd_per_1k_requests is not None:
                parts.append(f"{unit_price(service.usd_per_1k_requests)} per 1k requests")
    if service.idle_replicas:
        idle = f"{service.idle_replicas} idle replica{'s' if service.idle_replicas != 1 else ''}"
        if service.idle_usd_per_hour is not None:
            idle += f" ({money(service.idle_usd_per_hour)}/h)"
        parts.append(idle)
    parts.append(f"{per_hour(service.usd_per_hour)}/h" if service.usd_per_hour is not None else "$/h unknown")
    return ", ".join(parts)


def hpa_words(service: Service) -> str:
    """``HPA vllm-llama3: 2–4 replicas, now 3 (wants 3) on pods vllm:num_requests_waiting 10``;
    empty when no HPA targets the service."""
    hpa = service.hpa
    if hpa is None:
        return ""
    now = f", now {hpa.current_replicas}" if hpa.current_replicas is not None else ""
    wants = f" (wants {hpa.desired_replicas})" if hpa.desired_replicas is not None else ""
    on = f" on {', '.join(hpa.metrics)}" if hpa.metrics else ""
    return f"HPA {hpa.name}: {hpa.min_replicas or 1}–{hpa.max_replicas} replicas{now}{wants}{on}"


def figure_lines(service: Service) -> list[str]:
    """Every serving figure known, each with the metric family it came from; or why there are none."""
    if not service.metrics_source:
        return [f"{NO_METRICS}: {EXPOSE_HINT}"]
    shown = (("requests/s", "rps", rate), ("p50", "p50_ms", latency), ("p95", "p95_ms", latency),
             ("p99", "p99_ms", latency), ("mean", "mean_ms", latency), ("time to first token", "ttft_ms", latency),
             ("tokens/s", "tokens_per_s", rate), ("inferences/s", "inferences_per_s", rate),
             ("running", "running", count), ("waiting", "queue_depth", count), ("queued", "queue_ms", latency))
    parts = [f"{label} {fmt(service.figure(name))}" for label, name, fmt in shown if service.figure(name) is not None]
    if service.error_ratio is not None:
        parts.append(f"errors {percent(service.error_ratio, 2)}")
    if service.kv_cache is not None:
        parts.append(f"KV cache {percent(service.kv_cache, 0)}")
    return [f"figures ({service.metrics_source}): " + " · ".join(parts)]


def facts(service: Service) -> list[str]:
    """The lines of ``gpuconsole service show`` and the service view under its summary."""
    lines = [f"{service.kind.value} {service.key} · image {service.image or UNKNOWN} · rollout {service.rollout.value}"
             + (f" ({service.rollout_message})" if service.rollout_message else "")]
    lines.append(f"replicas {service.replicas_ready} ready of {service.replicas_desired} "
                 f"({service.replicas_available} available) · {gpu_words(service)} "
                 f"({service.gpus_per_replica:g} a replica) · nodes {', '.join(service.nodes) or UNKNOWN}")
    if service.pending_reason:
        lines.append(f"pending: {service.pending_reason}")
    hpa = hpa_words(service)
    if hpa:
        lines.append(hpa)
    lines += figure_lines(service)
    money_parts = [f"{per_hour(service.usd_per_hour)}/h" if service.usd_per_hour is not None else "$/h unknown",
                   f"{unit_price(service.usd_per_million_tokens)} per 1M tokens",
                   f"{unit_price(service.usd_per_1k_requests)} per 1k requests"]
    if service.idle_replicas:
        money_parts.append(f"{service.idle_replicas} idle ({per_hour(service.idle_usd_per_hour)}/h)")
    lines.append("cost " + " · ".join(money_parts))
    if service.slo is not None:
        slo = service.slo
        state = {True: "met", False: "breached", None: "unknown"}[slo.met]
        judged = ", ".join(f"{_OBJECTIVE[n]} {percent(v) if n == 'error_ratio' else latency(v)}" for n, v in slo.values)
        lines.append(f"{slo_words(slo)} over {slo.window}: {state}" + (f" (now {judged})" if judged else ""))
    return lines
