"""The source registry and the capability Protocols: each kind and name built and explained in
one place, adapters loaded only when used, optional features found with ``isinstance``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuconsole.backends import base, registry
from gpuconsole.backends.sim import make_sim
from gpuconsole.backends.unconfigured import Unconfigured
from gpuconsole.core.fleet.sources import SourceOptions, build_sources, choose
from gpuconsole.model import SourceKind
from tests.helpers import FrozenClock


def test_every_name_the_command_line_offers_has_an_entry():
    from gpuconsole.core.fleet.source_names import CLOUD_SOURCES, GPU_SOURCES, JOB_SOURCES

    for kind, names in ((SourceKind.GPUS, GPU_SOURCES), (SourceKind.JOBS, JOB_SOURCES), (SourceKind.CLOUD, CLOUD_SOURCES)):
        for name in names:
            if name != "auto":
                assert registry.entry(kind, name).name == name
        assert registry.entry(kind, "none").reason, "what a pane says when nothing is set up"
    with pytest.raises(ValueError, match="no jobs source 'slurm'"):
        registry.entry(SourceKind.JOBS, "slurm")


def test_a_source_nobody_set_up_says_why_and_how_in_the_registrys_words():
    sources = build_sources(SourceOptions(gpus="off", jobs="off", cloud="off"))
    for kind, source in sources.items():
        assert isinstance(source, Unconfigured) and isinstance(source, base.SetupHint)
        assert (source.reason, source.hint) == registry.explain(kind, "off")
    unset = registry.build(SourceKind.GPUS, "prometheus", SourceOptions(), clock=FrozenClock())
    assert (unset.reason, unset.hint) == registry.explain(SourceKind.GPUS, "prometheus")


def test_the_demo_chooses_the_simulator_for_every_kind():
    assert choose(SourceOptions(demo=True), simulated=True) == {
        SourceKind.GPUS: "sim", SourceKind.JOBS: "sim", SourceKind.CLOUD: "sim", SourceKind.SERVICES: "sim"}
    assert choose(SourceOptions(gpus="off", jobs="off", cloud="off"), simulated=False) == {
        SourceKind.GPUS: "off", SourceKind.JOBS: "off", SourceKind.CLOUD: "off", SourceKind.SERVICES: "off"}


def test_importing_the_registry_and_the_sources_loads_no_adapter():
    code = ("import sys, gpuconsole.backends.registry, gpuconsole.core.fleet.sources, gpuconsole.core.fleet.console\n"
            "print(sorted(m for m in sys.modules if m.split('.')[:3] in (['gpuconsole', 'backends', 'aws'],"
            " ['gpuconsole', 'backends', 'kube'], ['gpuconsole', 'backends', 'nvml'],"
            " ['gpuconsole', 'backends', 'prometheus'], ['gpuconsole', 'backends', 'sim'])))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_optional_features_are_found_with_isinstance():
    gpus, jobs, cloud = make_sim(clock=FrozenClock())
    assert isinstance(jobs, base.CronJobSuspension) and isinstance(jobs, base.JobControl)
    assert not isinstance(cloud, base.BillingReports) and not isinstance(cloud, base.CredentialSwitching)
    assert not isinstance(jobs, base.KubeconfigContexts) and not isinstance(gpus, base.IntervalHint)
    from gpuconsole.backends.aws import AwsCloud
    from gpuconsole.backends.kube import KubeJobs

    aws = AwsCloud(("us-east-1",))
    assert isinstance(aws, base.BillingReports) and isinstance(aws, base.ResourceCosts)
    assert isinstance(aws, base.IntervalHint) and isinstance(aws, base.TimeoutHint)
    assert isinstance(aws, base.VolumeListing) and isinstance(aws, base.InstanceHistory)
    assert isinstance(aws, base.CredentialSwitching) and isinstance(aws, base.NamedProfile)
    kube = KubeJobs(None, "ctx", ("ml",), watch=False)
    try:
        assert isinstance(kube, base.KubeconfigContexts) and isinstance(kube, base.TimeoutHint)
        assert not isinstance(kube, base.IntervalHint)
    finally:
        kube.close()


def test_the_poll_policy_follows_the_sources_hints():
    from gpuconsole.core.fleet.options import ConsoleOptions
    from gpuconsole.core.fleet.wiring import poll_policy

    class Slow:
        min_interval = 15.0
        poll_timeout = 45.0

    options = ConsoleOptions(interval=1.0, timeout=5.0)
    assert (poll_policy(Slow(), options).interval, poll_policy(Slow(), options).timeout) == (15.0, 45.0)
    assert (poll_policy(object(), options).interval, poll_policy(object(), options).timeout) == (1.0, 5.0)
