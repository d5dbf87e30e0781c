"""The one place that decides which backend serves each kind of data.

``--demo`` puts the simulated world behind all three faces. Without it the console uses the real
backends it finds (NVML for GPUs when the NVIDIA driver's library loads); a kind with no backend
gets a stand-in whose status tells the user what is missing and how to set it up (its words come
from :mod:`gpuconsole.backends.registry`, which builds every source). Simulated data is never
shown unasked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuconsole.backends import registry
from gpuconsole.core.fleet.source_names import GPU_SOURCES, JOB_SOURCES, check_cloud, check_region
from gpuconsole.model import SourceKind

if TYPE_CHECKING:
    from gpuconsole.backends.registry import PrometheusSettings


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What the user asked for on the command line (or a test asked for)."""

    demo: bool = False
    seed: int = 7
    demo_nodes: int | None = None
    demo_jobs: int | None = None  # list about this many jobs, the rest static history
    demo_faults: str | None = None
    gpus: str = "auto"
    sim_start: float | None = None
    cloud: str = "auto"
    regions: tuple[str, ...] = ()
    profile: str | None = None
    all_instance_types: bool = False
    jobs: str = "auto"
    kubeconfig: str | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()  # empty: every namespace
    watch_jobs: bool = True  # a watch-fed cache (the console); False: each poll lists (snapshot)
    prometheus: PrometheusSettings | None = None  # --prometheus URL … or the config file's [prometheus]
    alibaba: Any = None  # the config file's [alibaba] table (AlibabaSettings), None when absent
    azure: Any = None  # the config file's [azure] table (AzureSettings), None when absent
    services: str = "auto"  # inference services: auto, kube, sim or off
    serving: Any = None  # where their serving figures come from (backends.served.FiguresSettings)


def choose(options: SourceOptions, *, simulated: bool, env: Mapping[str, str] = os.environ) -> dict[SourceKind, str]:
    """The registry's name of the source that serves each kind, following ``options``
    (``simulated``: a simulated world is built for this session)."""
    gpus = options.gpus
    if gpus == "off":
        gpu = "off"
    elif gpus == "prometheus" or (gpus == "auto" and not options.demo and options.prometheus):
        gpu = "prometheus"
    elif gpus == "nvml" or (not simulated and registry.set_up(SourceKind.GPUS, "nvml", options, env)):
        gpu = "nvml"
    else:
        gpu = "sim" if simulated else "none"
    if options.demo and simulated:
        return {SourceKind.GPUS: gpu, SourceKind.JOBS: "sim", SourceKind.CLOUD: "sim",
                SourceKind.SERVICES: "off" if options.services == "off" else "sim"}
    return {SourceKind.GPUS: gpu,
            SourceKind.JOBS: _real(SourceKind.JOBS, options.jobs, "kube", options, env),
            SourceKind.CLOUD: _clouds(options, env),
            SourceKind.SERVICES: _services(options, env)}


def _services(options: SourceOptions, env: Mapping[str, str]) -> str:
    """Inference services come from the cluster the jobs come from (``off`` with ``--jobs off``)."""
    if options.services == "off" or options.jobs == "off":
        return "off"
    if "kube" in registry.SOURCES[SourceKind.SERVICES]:
        return _real(SourceKind.SERVICES, options.services, "kube", options, env)
    return "none"


def _clouds(options: SourceOptions, env: Mapping[str, str]) -> str:
    """The cloud source: ``off``, the clouds asked for (comma-separated when several), or with
    ``auto`` every cloud that is set up; ``none`` when none is."""
    if options.cloud == "off":
        return "off"
    if options.cloud != "auto":
        return options.cloud
    found = [name for name in registry.cloud_names() if registry.set_up(SourceKind.CLOUD, name, options, env)]
    return ",".join(found) if found else "none"


def _real(kind: SourceKind, asked: str, name: str, options: SourceOptions, env: Mapping[str, str]) -> str:
    """``off`` when turned off; ``name`` when asked for or set up; ``none`` otherwise."""
    if asked == "off":
        return "off"
    return name if asked == name or registry.set_up(kind, name, options, env) else "none"


def build_sources(options: SourceOptions, clock: Callable[[], float] = time.time) -> dict[SourceKind, Any]:
    """One backend per kind, following ``options``.

    Raises:
        ValueError: a bad ``--demo-faults`` spec or ``--gpus`` value (one-line message).
    """
    if options.gpus not in GPU_SOURCES:
        raise ValueError(f"unknown GPU source {options.gpus!r}: choose one of {', '.join(GPU_SOURCES)}")
    check_cloud(options.cloud)
    if options.jobs not in JOB_SOURCES:
        raise ValueError(f"unknown job source {options.jobs!r}: choose one of {', '.join(JOB_SOURCES)}")
    for region in options.regions:
        check_region(region)
    if options.demo_faults:
        registry.fault_plan(options.demo_faults)  # a bad spec fails here, before anything is built
    world = registry.simulated_world(options, clock) if options.demo or options.gpus == "sim" else None
    names = choose(options, simulated=world is not None)
    return {kind: registry.build(kind, name, options, clock=clock, world=world) for kind, name in names.items()}
