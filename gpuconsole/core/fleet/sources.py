"""The one factory that decides which backend serves each kind of data.

``--demo`` puts the simulated world behind all three faces. Without it the console uses the real
backends it finds (NVML for GPUs when the NVIDIA driver's library loads); a kind with no backend gets an :class:`Unconfigured` stand-in whose status
tells the user what is missing and how to set it up. Simulated data is never shown unasked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuconsole.backends.sim import DEMO_INTERRUPTION_S, FaultPlan, make_sim
from gpuconsole.backends.unconfigured import Unconfigured
from gpuconsole.core.fleet.source_names import CLOUD_SOURCES, GPU_SOURCES, JOB_SOURCES, check_region
from gpuconsole.model import SourceKind

if TYPE_CHECKING:
    from gpuconsole.backends.prometheus import PrometheusSettings

# Any of these means the user has set up AWS access the standard way (the chain boto3 follows).
AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
           "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI")


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


def aws_configured(options: SourceOptions, env: Mapping[str, str] = os.environ) -> bool:
    """Whether AWS access is set up, judged without touching the network.

    True when a region or profile is given on the command line, a standard AWS variable is set,
    or the AWS config or credentials file exists. (An instance role alone is found only with
    ``--region`` or ``--cloud aws``: probing the metadata service would delay every start.)
    """
    if options.regions or options.profile:
        return True
    if any(env.get(name) for name in AWS_ENV):
        return True
    home = Path.home() / ".aws"
    files = (env.get("AWS_CONFIG_FILE") or home / "config", env.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials")
    return any(Path(f).is_file() for f in files)


def kube_configured(options: SourceOptions, env: Mapping[str, str] = os.environ) -> bool:
    """Whether a Kubernetes cluster is set up, judged from files and variables only.

    True with ``--kubeconfig``, when a file of ``$KUBECONFIG`` (``:``-separated) exists, or,
    without ``$KUBECONFIG``, ``~/.kube/config``; or inside a pod (``KUBERNETES_SERVICE_HOST``).
    """
    if options.kubeconfig:
        return True
    spec = env.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    if any(Path(p).expanduser().is_file() for p in spec.split(os.pathsep) if p):
        return True
    return bool(env.get("KUBERNETES_SERVICE_HOST"))


def build_sources(options: SourceOptions, clock: Callable[[], float] = time.time) -> dict[SourceKind, Any]:
    """One backend per kind, following ``options``.

    Raises:
        ValueError: a bad ``--demo-faults`` spec or ``--gpus`` value (one-line message).
    """
    if options.gpus not in GPU_SOURCES:
        raise ValueError(f"unknown GPU source {options.gpus!r}: choose one of {', '.join(GPU_SOURCES)}")
    if options.cloud not in CLOUD_SOURCES:
        raise ValueError(f"unknown cloud {options.cloud!r}: choose one of {', '.join(CLOUD_SOURCES)}")
    if options.jobs not in JOB_SOURCES:
        raise ValueError(f"unknown job source {options.jobs!r}: choose one of {', '.join(JOB_SOURCES)}")
    for region in options.regions:
        check_region(region)
    faults = FaultPlan.parse(options.demo_faults) if options.demo_faults else None
    sim = None
    if options.demo or options.gpus == "sim":
        sim = make_sim(
            seed=options.seed,
            nodes=options.demo_nodes,
            start=options.sim_start,
            jobs=options.demo_jobs,
            faults=faults,
            clock=clock,
            # The demo shows a spot interruption within minutes (and the autopilot recovering it).
            interrupt_spot_after=DEMO_INTERRUPTION_S if options.demo else None,
        )
    sources: dict[SourceKind, Any] = {}
    if options.gpus == "off":
        sources[SourceKind.GPUS] = Unconfigured("off", "GPU telemetry is turned off (--gpus off)", "start without --gpus off")
    elif options.gpus == "prometheus" or (options.gpus == "auto" and not options.demo and options.prometheus):
        sources[SourceKind.GPUS] = _prometheus(options)
    elif options.gpus == "nvml" or (sim is None and _nvml_loads()):
        from gpuconsole.backends.nvml import (
            NvmlSource,  # pynvml is imported only when it is used
        )

        sources[SourceKind.GPUS] = NvmlSource(clock=clock)
    elif sim is not None:
        sources[SourceKind.GPUS] = sim[0]
    else:
        sources[SourceKind.GPUS] = Unconfigured(
            "none",
            "no GPU telemetry source found",
            "run gpuconsole on a host with the NVIDIA driver, or pass --prometheus URL (a Prometheus scraping the DCGM exporter)",
        )
    if options.demo and sim is not None:
        sources[SourceKind.JOBS] = sim[1]
        sources[SourceKind.CLOUD] = sim[2]
    else:
        sources[SourceKind.JOBS] = _jobs(options)
        sources[SourceKind.CLOUD] = _cloud(options)
    return sources


def _nvml_loads() -> bool:
    """Whether this host has the NVIDIA driver's NVML library (loading it calls no driver)."""
    try:
        from gpuconsole.backends.nvml import library_available
    except ImportError:
        return False
    return library_available()


def _prometheus(options: SourceOptions) -> Any:
    if options.prometheus is None:
        return Unconfigured("prometheus", "no Prometheus URL configured",
                            "pass --prometheus URL, or set url in the [prometheus] table of the config file")
    from gpuconsole.backends.prometheus import (
        PrometheusGpus,  # urllib3 is imported on its first poll
    )

    return PrometheusGpus(options.prometheus)


def _jobs(options: SourceOptions) -> Any:
    if options.jobs == "off":
        return Unconfigured("off", "Kubernetes jobs are turned off (--jobs off)", "start without --jobs off")
    if options.jobs == "kube" or kube_configured(options):
        from gpuconsole.backends.kube import (
            KubeJobs,  # the kubernetes client is imported only when it is used
        )

        return KubeJobs(options.kubeconfig, options.context, options.namespaces, watch=options.watch_jobs)
    return Unconfigured(
        "none",
        "no Kubernetes cluster configured",
        "point KUBECONFIG at a kubeconfig, or create ~/.kube/config (or pass --kubeconfig)",
    )


def _cloud(options: SourceOptions) -> Any:
    if options.cloud == "off":
        return Unconfigured("off", "cloud instances are turned off (--cloud off)", "start without --cloud off")
    if options.cloud == "aws" or aws_configured(options):
        from gpuconsole.backends.aws import (
            AwsCloud,  # boto3 is imported only when it is used
        )

        return AwsCloud(options.regions, options.profile, all_types=options.all_instance_types)
    return Unconfigured(
        "none",
        "no cloud account configured",
        "configure AWS credentials (aws configure, or AWS_PROFILE) and a region (--region)",
    )
