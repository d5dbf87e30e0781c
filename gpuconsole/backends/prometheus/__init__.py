"""The Prometheus adapter: a fleet's GPUs from DCGM exporter metrics over the HTTP API.

Modules (private to this folder unless named below):
    source: :class:`PrometheusGpus`, the GPU source, and its :class:`PrometheusSettings`.
    answers: the query answers decoded (typed samples, the roster of GPUs).
    mapping: the answers' columns built into GPUs, MIG slices and history samples.

Other layers use only the names below, imported from this package; each is loaded on first use.
"""

from __future__ import annotations

from gpuconsole.backends import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
    "PrometheusGpus": "source",
    "PrometheusSettings": "source",
})
