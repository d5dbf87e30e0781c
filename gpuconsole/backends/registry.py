"""Every source the console can poll, by kind and name: how it is set up, built and explained.

:data:`SOURCES` holds one :class:`SourceEntry` per kind (gpus, jobs, cloud) and name (``sim``,
``nvml``, ``prometheus``, ``kube``, ``aws``, ``alibaba``, ``azure``, ``off``, ``none``); the core
chooses a name and asks here for the source. The few other adapter objects the core needs (STS and IAM calls, the
CloudWatch audit copy, SNS publishing, a Lease, kubeconfig contexts, …) are built here too.
Adapters are loaded through their faces, on first use only: importing this module imports no
driver.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpuconsole.backends.base import KubeconfigContexts, Lease
from gpuconsole.backends.unconfigured import Unconfigured
from gpuconsole.model import LaunchSpec, SourceKind

if TYPE_CHECKING:
    from gpuconsole.backends.prometheus import PrometheusSettings as PrometheusSettings
    from gpuconsole.backends.sim import FaultPlan as FaultPlan
    from gpuconsole.backends.sim import SimBench as SimBench

# Any of these means the user has set up AWS access the standard way (the chain boto3 follows).
AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
           "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI")

Clock = Callable[[], float]
World = tuple[Any, Any, Any]  # the simulated world's gpus, jobs and cloud faces


class SourceSettings(Protocol):
    """What the registry reads of the user's choices (``SourceOptions`` of the core)."""

    demo: bool
    seed: int
    demo_nodes: int | None
    demo_jobs: int | None
    demo_faults: str | None
    sim_start: float | None
    regions: tuple[str, ...]
    profile: str | None
    all_instance_types: bool
    kubeconfig: str | None
    context: str | None
    namespaces: tuple[str, ...]
    watch_jobs: bool
    prometheus: PrometheusSettings | None
    alibaba: Any  # the [alibaba] table as AlibabaSettings, None when absent
    azure: Any  # the [azure] table as AzureSettings, None when absent
    serving: Any  # where the services' serving figures come from (served.FiguresSettings), None: nowhere


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """One way to serve a kind of data.

    Attributes:
        kind / name: what it serves and what the command line calls it.
        set_up: whether the user has set it up, judged from files and variables only (``auto``
            picks it then); None for a source that is only ever asked for.
        build: makes the source from the settings, the clock and the simulated world (if any).
        reason / hint: what a pane says when this entry stands for data nobody set up.
    """

    kind: SourceKind
    name: str
    build: Callable[[SourceSettings, Clock, World | None], Any]
    set_up: Callable[[SourceSettings, Mapping[str, str]], bool] | None = None
    reason: str = ""
    hint: str = ""


def _explained(kind: SourceKind, name: str, reason: str, hint: str, *, shown: str | None = None) -> SourceEntry:
    """An entry that stands for data nobody set up: its source says why and how to set it up."""
    return SourceEntry(kind, name, lambda _o, _c, _w: Unconfigured(shown or name, reason, hint), reason=reason, hint=hint)


# ---------------------------------------------------------------------- set up?
def aws_configured(options: SourceSettings, env: Mapping[str, str] = os.environ) -> bool:
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


def alibaba_configured(options: SourceSettings, env: Mapping[str, str] = os.environ) -> bool:
    """Whether Alibaba Cloud is set up: an ``[alibaba]`` table with regions (files only)."""
    settings = getattr(options, "alibaba", None)
    return bool(settings is not None and settings.regions)


def azure_configured(options: SourceSettings, env: Mapping[str, str] = os.environ) -> bool:
    """Whether Azure is set up: an ``[azure]`` table with a subscription (files only)."""
    return bool(getattr(getattr(options, "azure", None), "subscription_id", ""))


def kube_configured(options: SourceSettings, env: Mapping[str, str] = os.environ) -> bool:
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


def nvml_loads(_options: SourceSettings | None = None, _env: Mapping[str, str] = os.environ) -> bool:
    """Whether this host has the NVIDIA driver's NVML library (loading it calls no driver)."""
    try:
        from gpuconsole.backends.nvml import library_available
    except ImportError:
        return False
    return bool(library_available())


# ---------------------------------------------------------------------- builders
def _sim_face(index: int) -> Callable[[SourceSettings, Clock, World | None], Any]:
    def build(options: SourceSettings, clock: Clock, world: World | None) -> Any:
        return (world if world is not None else simulated_world(options, clock))[index]

    return build


def _sim_services(options: SourceSettings, clock: Clock, world: World | None) -> Any:
    from gpuconsole.backends.sim import SimServicesBackend

    gpus = (world if world is not None else simulated_world(options, clock))[0]
    return SimServicesBackend(gpus.sim)


def _nvml(_options: SourceSettings, clock: Clock, _world: World | None) -> Any:
    from gpuconsole.backends.nvml import NvmlSource  # pynvml is imported only when it is used

    return NvmlSource(clock=clock)


PROMETHEUS_UNSET = ("no Prometheus URL configured",
                    "pass --prometheus URL, or set url in the [prometheus] table of the config file")


def _prometheus(options: SourceSettings, _clock: Clock, _world: World | None) -> Any:
    if options.prometheus is None:
        return Unconfigured("prometheus", *PROMETHEUS_UNSET)
    from gpuconsole.backends.prometheus import PrometheusGpus  # urllib3 is imported on its first poll

    return PrometheusGpus(options.prometheus)


def _kube(options: SourceSettings, _clock: Clock, _world: World | None) -> Any:
    from gpuconsole.backends.kube import KubeJobs  # the kubernetes client is imported only when it is used

    return KubeJobs(options.kubeconfig, options.context, options.namespaces, watch=options.watch_jobs)


def _kube_services(options: SourceSettings, _clock: Clock, _world: World | None) -> Any:
    from gpuconsole.backends.kube import KubeServices  # the kubernetes client is imported only when it is used

    cluster = KubeServices(options.kubeconfig, options.context, options.namespaces, watch=options.watch_jobs)
    if options.serving is None:
        return cluster
    from gpuconsole.backends.served import ServedServices  # with Prometheus's figures

    return ServedServices(cluster, options.serving)


def _aws(options: SourceSettings, _clock: Clock, _world: World | None) -> Any:
    from gpuconsole.backends.aws import AwsCloud  # boto3 is imported only when it is used

    return AwsCloud(options.regions, options.profile, all_types=options.all_instance_types)


def _alibaba(options: SourceSettings, _clock: Clock, _world: World | None) -> Any:
    from gpuconsole.backends.alibaba import AlibabaCloud, AlibabaSettings  # the SDK is imported on first use

    return AlibabaCloud(getattr(options, "alibaba", None) or AlibabaSettings())


def _azure(options: SourceSettings, _clock: Clock, _world: World | None) -> Any:
    from gpuconsole.backends.azure import AzureCloud, AzureSettings  # the SDKs are imported on first use
    return AzureCloud(getattr(options, "azure", None) or AzureSettings())


def azure_settings(**table: Any) -> Any:
    """The ``[azure]`` table's settings (ValueError, one line, for a bad endpoint URL)."""
    from gpuconsole.backends.azure import AzureSettings  # the SDKs are not imported by this
    return AzureSettings(**table)


def alibaba_settings(**table: Any) -> Any:
    """The ``[alibaba]`` table's settings (ValueError, one line, for a bad endpoint URL)."""
    from gpuconsole.backends.alibaba import AlibabaSettings, split_endpoint

    settings = AlibabaSettings(**table)
    if settings.endpoint:
        split_endpoint(settings.endpoint)
    return settings


def cloud_set(names: tuple[str, ...], options: SourceSettings, clock: Clock, world: World | None) -> Any:
    """The clouds ``names`` (each a registered cloud source) as one source."""
    from gpuconsole.backends.clouds import CloudSet

    return CloudSet([build(CLOUD, name, options, clock=clock, world=world) for name in names])


GPUS, JOBS, CLOUD, SERVICES = SourceKind.GPUS, SourceKind.JOBS, SourceKind.CLOUD, SourceKind.SERVICES

SOURCES: dict[SourceKind, dict[str, SourceEntry]] = {
    GPUS: {
        "sim": SourceEntry(GPUS, "sim", _sim_face(0)),
        "nvml": SourceEntry(GPUS, "nvml", _nvml, set_up=nvml_loads),
        "prometheus": SourceEntry(GPUS, "prometheus", _prometheus, set_up=lambda o, _e: o.prometheus is not None,
                                  reason=PROMETHEUS_UNSET[0], hint=PROMETHEUS_UNSET[1]),
        "off": _explained(GPUS, "off", "GPU telemetry is turned off (--gpus off)", "start without --gpus off"),
        "none": _explained(GPUS, "none", "no GPU telemetry source found",
                           "run gpuconsole on a host with the NVIDIA driver, or pass --prometheus URL "
                           "(a Prometheus scraping the DCGM exporter)"),
    },
    JOBS: {
        "sim": SourceEntry(JOBS, "sim", _sim_face(1)),
        "kube": SourceEntry(JOBS, "kube", _kube, set_up=kube_configured),
        "off": _explained(JOBS, "off", "Kubernetes jobs are turned off (--jobs off)", "start without --jobs off"),
        "none": _explained(JOBS, "none", "no Kubernetes cluster configured",
                           "point KUBECONFIG at a kubeconfig, or create ~/.kube/config (or pass --kubeconfig)"),
    },
    CLOUD: {
        "sim": SourceEntry(CLOUD, "sim", _sim_face(2)),
        "aws": SourceEntry(CLOUD, "aws", _aws, set_up=aws_configured),
        "alibaba": SourceEntry(CLOUD, "alibaba", _alibaba, set_up=alibaba_configured),
        "azure": SourceEntry(CLOUD, "azure", _azure, set_up=azure_configured),
        "off": _explained(CLOUD, "off", "cloud instances are turned off (--cloud off)", "start without --cloud off"),
        "none": _explained(CLOUD, "none", "no cloud account configured",
                           "configure AWS credentials (aws configure, or AWS_PROFILE) and a region (--region)"),
    },
    SERVICES: {
        "sim": SourceEntry(SERVICES, "sim", _sim_services),
        "kube": SourceEntry(SERVICES, "kube", _kube_services, set_up=kube_configured),
        "off": _explained(SERVICES, "off", "inference services are turned off (--services off)",
                          "start without --services off"),
        "none": _explained(SERVICES, "none", "no Kubernetes cluster configured",
                           "point KUBECONFIG at a kubeconfig, or create ~/.kube/config (or pass --kubeconfig)"),
    },
}


def cloud_names() -> tuple[str, ...]:
    """The clouds a user can set up and list together (``--cloud aws,alibaba``)."""
    return tuple(name for name, found in SOURCES[CLOUD].items() if found.set_up is not None)


def entry(kind: SourceKind, name: str) -> SourceEntry:
    """The entry of ``name`` for ``kind``; ValueError (one line) for a name it does not have."""
    found = SOURCES[kind].get(name)
    if found is None:
        raise ValueError(f"no {kind.value} source {name!r}: choose one of {', '.join(SOURCES[kind])}")
    return found


def set_up(kind: SourceKind, name: str, options: SourceSettings, env: Mapping[str, str] = os.environ) -> bool:
    """Whether the user has set up source ``name`` of ``kind`` (files and variables only)."""
    check = entry(kind, name).set_up
    return check is not None and check(options, env)


def build(kind: SourceKind, name: str, options: SourceSettings, *, clock: Clock, world: World | None = None) -> Any:
    """The source ``name`` of ``kind``, built from ``options`` (``world``: the simulated one);
    a cloud ``name`` may list several (``aws,alibaba``)."""
    if kind is SourceKind.CLOUD and "," in name:
        return cloud_set(tuple(name.split(",")), options, clock, world)
    return entry(kind, name).build(options, clock, world)


def explain(kind: SourceKind, name: str) -> tuple[str, str]:
    """What a pane says for ``name`` of ``kind`` when nobody set it up: ``(reason, hint)``."""
    found = entry(kind, name)
    return found.reason, found.hint


# ---------------------------------------------------------------------- the simulated world
def fault_plan(spec: str) -> FaultPlan:
    """``--demo-faults`` parsed (ValueError with one line for a bad spec)."""
    from gpuconsole.backends.sim import FaultPlan

    return FaultPlan.parse(spec)


def simulated_world(options: SourceSettings, clock: Clock) -> World:
    """The simulated world of ``options`` and its three faces (gpus, jobs, cloud)."""
    from gpuconsole.backends.sim import DEMO_INTERRUPTION_S, make_sim

    return make_sim(
        seed=options.seed,
        nodes=options.demo_nodes,
        start=options.sim_start,
        jobs=options.demo_jobs,
        faults=fault_plan(options.demo_faults) if options.demo_faults else None,
        clock=clock,
        # The demo shows a spot interruption within minutes (and the autopilot recovering it).
        interrupt_spot_after=DEMO_INTERRUPTION_S if options.demo else None,
        serving=options.demo,  # and an inference pool, with a burst a few minutes in
        alibaba=options.demo,  # and a second cloud: an Alibaba Cloud region, cn-hangzhou
        azure=options.demo,  # and a third: an Azure region, eastus, one VM stopped but still billed
    )


def sim_bench(seed: int, start: float) -> SimBench:
    """The simulated benchmark bench of the demo's experiments."""
    from gpuconsole.backends.sim import SimBench

    return SimBench(seed=seed, start=start)


# ---------------------------------------------------------------------- Kubernetes
def kube_contexts(source: KubeconfigContexts) -> tuple[tuple[str, ...], str | None]:
    """The contexts of ``source``'s kubeconfig and its current one (reads files; BackendError)."""
    from gpuconsole.backends import kube

    names, current = kube.contexts(source.kubeconfig)
    return tuple(names), current


def kubeconfig_user(kubeconfig: str | None, context: str | None) -> dict[str, str]:
    """The context, cluster and user names the kubeconfig gives (BackendUnavailable)."""
    from gpuconsole.backends.kube import kubeconfig_user as names  # the kubernetes client is imported only here

    return dict(names(kubeconfig, context))


def credential_expiries(kubeconfig: str | None, context: str | None) -> Any:
    """When the kubeconfig's client certificate or token expires."""
    from gpuconsole.backends.kube import credential_expiries as expiries

    return expiries(kubeconfig, context)


def cluster_session(kubeconfig: str | None, context: str | None) -> Any:
    """A job source of its own for one question to the cluster (no watch); close it after."""
    from gpuconsole.backends.kube import KubeJobs  # the kubernetes client is imported only here

    return KubeJobs(kubeconfig, context, watch=False)


def lease_for(job_backend: object, namespace: str, name: str, identity: str, *, lease_s: int) -> Lease | None:
    """The Lease ``name`` in ``namespace`` of the cluster ``job_backend`` watches; None for a job
    source that is no cluster."""
    if not isinstance(job_backend, KubeconfigContexts):
        return None
    from gpuconsole.backends.kube import KubeJobs, KubeLease

    if not isinstance(job_backend, KubeJobs):
        return None
    lease: Lease = KubeLease(job_backend, namespace, name, identity, lease_s=lease_s)
    return lease


# ---------------------------------------------------------------------- AWS
def sts_calls(profile: str | None) -> Any:
    """STS and IAM calls as the login of ``profile`` (``StsCalls``)."""
    from gpuconsole.backends.aws import StsCalls

    return StsCalls(profile)


def iam_keys(profile: str | None, key_id: str, secret: str) -> Any:
    """The IAM calls of ``profile``'s region and endpoint, signed with the key pair given."""
    from gpuconsole.backends.aws import IamKeys

    return IamKeys(profile, key_id, secret)


def cloudwatch_audit_store(log_group: str, region: str, *, profile: str | None, endpoint_url: str | None = None) -> Any:
    """The audit log's remote copy in a CloudWatch Logs group, at a pinned endpoint."""
    from gpuconsole.backends.aws import CloudWatchAuditStore

    return CloudWatchAuditStore(log_group, region, profile=profile, endpoint_url=endpoint_url)


def sns_publisher(region: str, profile: str | None = None, *,
                  credentials: Callable[[], dict[str, str]] | None = None, timeout: float = 10.0) -> Any:
    """Publishing to the SNS topics of ``region`` (``SnsPublisher``), as ``profile``'s chain, or
    as ``credentials`` (a role session's botocore refresh) when given."""
    from gpuconsole.backends.aws import SnsPublisher

    return SnsPublisher(region, profile, credentials=credentials, connect_timeout=min(5.0, timeout),
                        read_timeout=timeout)


def managed_tag() -> tuple[str, str]:
    """The tag every launch puts on its instances and volumes: ``(key, value)``."""
    from gpuconsole.backends.aws import MANAGED_TAG  # every cloud's launches carry the same one

    return (str(MANAGED_TAG[0]), str(MANAGED_TAG[1]))


def launch_request_json(spec: LaunchSpec) -> str:
    """The RunInstances request a launch of ``spec`` sends, as indented JSON."""
    from gpuconsole.backends.aws import request_json

    return str(request_json(spec))


def launch_terraform_block(spec: LaunchSpec, resource_name: str = "gpu") -> str:
    """The same launch as a Terraform ``aws_instance`` resource."""
    from gpuconsole.backends.aws import terraform_block

    return str(terraform_block(spec, resource_name))


# ---------------------------------------------------------------------- Prometheus
def prometheus_settings(**fields: Any) -> PrometheusSettings:
    """Where the fleet's Prometheus is and how to reach it (``PrometheusSettings``)."""
    from gpuconsole.backends.prometheus import PrometheusSettings

    return PrometheusSettings(**fields)


def serving_figures_settings(prometheus: PrometheusSettings, window_s: float, custom: tuple[tuple[str, str, str], ...],
                             slo_windows: tuple[float, ...], slo_services: tuple[str, ...] = ()) -> Any:
    """Where the inference services' figures are read (``served.FiguresSettings``); ``custom``:
    ``(family, figure, PromQL)`` of each ``[[services.metrics]]`` figure; ``slo_services``: the
    services whose SLOs have the ``slo_windows`` (those answers are read for their pods only)."""
    from gpuconsole.backends.prometheus.serving import CustomFigure
    from gpuconsole.backends.served import FiguresSettings

    return FiguresSettings(prometheus, window_s, tuple(CustomFigure(*c) for c in custom), slo_windows, slo_services)
