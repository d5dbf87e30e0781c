"""The one factory that decides which backend serves each kind of data.

``--demo`` puts the simulated world behind all three faces. Without it the console uses the real
backends it finds; a kind with no backend gets an :class:`Unconfigured` stand-in whose status
tells the user what is missing and how to set it up. Simulated data is never shown unasked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.sim import make_sim
from gpuconsole.backends.sim.faults import FaultPlan
from gpuconsole.backends.unconfigured import Unconfigured
from gpuconsole.model import SourceKind

GPU_SOURCES = ("auto", "sim", "off")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What the user asked for on the command line (or a test asked for)."""

    demo: bool = False
    seed: int = 7
    demo_nodes: int | None = None
    demo_faults: str | None = None
    gpus: str = "auto"
    sim_start: float | None = None


def build_sources(options: SourceOptions, clock: Callable[[], float] = time.time) -> dict[SourceKind, Any]:
    """One backend per kind, following ``options``.

    Raises:
        ValueError: a bad ``--demo-faults`` spec or ``--gpus`` value (one-line message).
    """
    if options.gpus not in GPU_SOURCES:
        raise ValueError(f"unknown GPU source {options.gpus!r}: choose one of {', '.join(GPU_SOURCES)}")
    faults = FaultPlan.parse(options.demo_faults) if options.demo_faults else None
    sim = None
    if options.demo or options.gpus == "sim":
        sim = make_sim(
            seed=options.seed,
            nodes=options.demo_nodes,
            start=options.sim_start,
            faults=faults,
            clock=clock,
        )
    sources: dict[SourceKind, Any] = {}
    if options.gpus == "off":
        sources[SourceKind.GPUS] = Unconfigured("off", "GPU telemetry is turned off (--gpus off)", "start without --gpus off")
    elif sim is not None:
        sources[SourceKind.GPUS] = sim[0]
    else:
        sources[SourceKind.GPUS] = Unconfigured(
            "none",
            "no GPU telemetry source found",
            "run gpuconsole on a host with the NVIDIA driver",
        )
    if options.demo and sim is not None:
        sources[SourceKind.JOBS] = sim[1]
        sources[SourceKind.CLOUD] = sim[2]
    else:
        sources[SourceKind.JOBS] = Unconfigured(
            "none",
            "no Kubernetes cluster configured",
            "point KUBECONFIG at a kubeconfig, or create ~/.kube/config",
        )
        sources[SourceKind.CLOUD] = Unconfigured(
            "none",
            "no cloud account configured",
            "configure AWS credentials (aws configure, or AWS_PROFILE) and a region",
        )
    return sources
