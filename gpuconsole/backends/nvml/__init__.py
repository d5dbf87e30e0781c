"""The NVML adapter: GPUs, MIG slices, vGPUs and processes from the NVIDIA driver (``pynvml``).

Modules (private to this folder unless named below):
    source: :class:`NvmlSource`, the GPU source.
    query: the one NVML query helper (typed N/A, versioned functions resolved once).
    procs: GPU processes joined with the host's process table and their pods.

Other layers use only the names below, imported from this package; each is loaded on first use, so
``pynvml`` is imported only on a host that polls NVML.
"""

from __future__ import annotations

from gpuconsole.backends import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
    "NvmlSource": "source",
    "library_available": "source",
})
