"""The Prometheus adapter: a fleet's GPUs from DCGM exporter metrics, and inference servers'
figures (vLLM, Triton, TGI), over the HTTP API.

Modules (private to this folder unless named below):
    client: :class:`PrometheusSettings` and the HTTP client every source of the folder shares.
    source: :class:`PrometheusGpus`, the GPU source.
    serving, serving_queries: :class:`PrometheusServing`, the serving figures of every pod, one
        query per figure; :class:`CustomFigure`, a ``[[services.metrics]]`` figure.
    answers: the query answers decoded (typed samples, the roster of GPUs).
    mapping: the answers' columns built into GPUs, MIG slices and history samples.

Other layers use only the names below, imported from this package; each is loaded on first use.
"""

from __future__ import annotations

from gpuconsole.backends import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
    "PrometheusGpus": "source",
    "PrometheusSettings": "client",
    "PrometheusServing": "serving",
    "CustomFigure": "serving",
})
