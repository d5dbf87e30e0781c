"""Inference services: their serving figures, what they cost, their SLOs, and the configuration.

    config: the ``[services]`` table (window, another Prometheus, ``[[services.metrics]]``,
        ``[[services.slo]]``).
    figures: each service's figures from its pods' answers (sums, means, histogram quantiles).
    cost: $/h of a service's GPUs, $ per 1M tokens and per 1k requests, idle replicas.
    slo: objectives met or breached, since when, and the alert a breach raises.
    join: the services of a snapshot, every part above applied.
"""
