"""Every source of data and every system gpuconsole acts on, behind the interfaces of ``base``.

Folders and modules:
    base: the interfaces (GPU source, job backend, cloud backend), capability Protocols, typed errors.
    unconfigured: the stand-in for a source nobody has set up, saying how to set it up.
    tls: the TLS contexts of the connections gpuconsole opens itself (version floor, versions seen).
    registry: every source by kind and name (how it is set up, built and explained), and the
        other adapter objects the core uses; the core reaches adapters only through it.
    sim/: the simulated GPU cloud behind all three interfaces (demo mode and most tests).
    nvml/, kube/, aws/, prometheus/: one folder per real adapter.

Each adapter folder's ``__init__`` names what the core may use (its face); the core never imports
an adapter's private modules. The faces load their modules on first use (:func:`lazy_face`), so a
driver (``pynvml``, ``kubernetes``, ``boto3``) is imported only where it is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_face(package: str, names: Mapping[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """The ``__all__`` and the module ``__getattr__`` (PEP 562) of an adapter folder whose public
    ``names`` (``{name: module}``) are read from their module when asked for: the module is
    imported the first time, and a name is never copied into the folder, so the folder shows
    what its module holds now (a test that replaces ``kube.source.KubeJobs`` is seen here too)."""

    def load(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return sorted(names), load
