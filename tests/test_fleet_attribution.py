"""Fleet mode around the Prometheus source: source selection, its configuration, the GPU → pod →
job → instance → $/h join, and charts from the source's own history."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from gpuconsole.backends.base import BackendError, Capability
from gpuconsole.backends.prometheus.source import PrometheusGpus, PrometheusSettings
from gpuconsole.backends.sim.sources import SimGpuSource
from gpuconsole.backends.unconfigured import Unconfigured
from gpuconsole.cli import main as cli
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.prometheus_config import resolve
from gpuconsole.core.fleet.sources import GPU_SOURCES, SourceOptions, build_sources
from gpuconsole.core.money.attribution import attribute, job_index, jobs_of
from gpuconsole.model import (
    FleetSnapshot,
    Gpu,
    GpuProcess,
    GpuSample,
    Instance,
    InstanceState,
    Job,
    JobState,
    Market,
    MigMode,
    MigSlice,
    Node,
    SourceKind,
)

PROM = PrometheusSettings("http://127.0.0.1:9090")


# --------------------------------------------------------------------------- source selection


def test_prometheus_is_a_gpu_source_chosen_when_configured():
    assert "prometheus" in GPU_SOURCES
    auto = build_sources(SourceOptions(prometheus=PROM))[SourceKind.GPUS]
    assert isinstance(auto, PrometheusGpus) and auto.settings is PROM
    assert isinstance(build_sources(SourceOptions(gpus="prometheus", prometheus=PROM))[SourceKind.GPUS], PrometheusGpus)
    unset = build_sources(SourceOptions(gpus="prometheus"))[SourceKind.GPUS]
    assert isinstance(unset, Unconfigured) and "--prometheus URL" in unset.hint
    # Not configured: no Prometheus; the demo keeps its simulator unless Prometheus is asked for.
    assert not isinstance(build_sources(SourceOptions())[SourceKind.GPUS], PrometheusGpus)
    assert isinstance(build_sources(SourceOptions(demo=True, prometheus=PROM))[SourceKind.GPUS], SimGpuSource)
    demo_fleet = build_sources(SourceOptions(demo=True, gpus="prometheus", prometheus=PROM))
    assert isinstance(demo_fleet[SourceKind.GPUS], PrometheusGpus)
    assert demo_fleet[SourceKind.JOBS].name == "sim"
    assert isinstance(build_sources(SourceOptions(gpus="off", prometheus=PROM))[SourceKind.GPUS], Unconfigured)


def test_command_line_and_config_file(tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("t")
    ca = tmp_path / "ca.pem"
    ca.write_text("-")
    config = tmp_path / "config.toml"
    config.write_text(f'[prometheus]\nurl = "https://prom.example.com"\ntoken_file = "{token}"\n'
                      f'ca_file = "{ca}"\ntimeout = 3\nselector = \'cluster="prod"\'\n')
    monkeypatch.setenv("GPUCONSOLE_CONFIG", str(config))
    settings = resolve({})
    assert settings == PrometheusSettings("https://prom.example.com", token_file=str(token), ca_file=str(ca),
                                          timeout=3.0, selector='cluster="prod"')
    # A flag wins over the file's key; a URL on the command line replaces the whole table.
    assert resolve({"timeout": 9.0}).timeout == 9.0
    assert resolve({"url": "http://127.0.0.1:9090"}) == PrometheusSettings("http://127.0.0.1:9090")
    args = cli.parse_args(["--prometheus", "http://127.0.0.1:9091", "--prometheus-user", "ops", "snapshot"])
    console = cli.make_console(args)
    try:
        source = console.hub.runners[SourceKind.GPUS].source
        assert isinstance(source, PrometheusGpus)
        assert (source.settings.url, source.settings.username) == ("http://127.0.0.1:9091", "ops")
    finally:
        console.close()
    config.write_text('[prometheus]\nurl = "https://prom.example.com"\ncompress = true\n')
    assert resolve({}).compress and not resolve({"url": "https://prom.example.com"}).compress
    gzipped = cli.make_console(cli.parse_args(["--prometheus", "http://127.0.0.1:9091", "--prometheus-gzip", "snapshot"]))
    try:
        assert gzipped.hub.runners[SourceKind.GPUS].source.settings.compress
    finally:
        gzipped.close()
    config.write_text('[prometheus]\nurl = "https://prom.example.com"\ncompress = "yes"\n')
    with pytest.raises(ValueError, match=r"\[prometheus\] key compress: expected true or false, got 'yes'"):
        resolve({})
    config.write_text('[prometheus]\nurl = "https://prom.example.com"\ntokenfile = "x"\n')
    with pytest.raises(ValueError, match=r"config.toml: \[prometheus\] key tokenfile: unknown key"):
        resolve({})
    config.write_text('[prometheus]\nurl = "http://prom.example.com"\nusername = "ops"\n')
    with pytest.raises(ValueError, match=r"config.toml: \[prometheus\]: credentials are only sent over https"):
        resolve({})
    monkeypatch.delenv("GPUCONSOLE_CONFIG")
    assert resolve({}) is None


@pytest.mark.parametrize(("argv", "words"), [
    (["--prometheus", "prom:9090"], "Prometheus: not an http(s) URL"),
    (["--prometheus-ca", "/no/such/ca.pem"], "--prometheus-ca needs --prometheus URL"),
    (["--prometheus-gzip"], "--prometheus-gzip needs --prometheus URL"),
    (["--prometheus-user", "ops"], "--prometheus-user needs --prometheus URL"),
    (["--prometheus", "https://p.example.com", "--prometheus-ca", "/no/such/ca.pem"], "ca file: no such file"),
])
def test_bad_prometheus_flags_are_one_line_and_status_2(capsys, argv, words):
    assert cli.main([*argv, "snapshot"]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


# --------------------------------------------------------------------------- the join

NODE = "ip-10-0-1-2.ec2.internal"


def gpu(**kw) -> Gpu:
    base = {"uuid": "GPU-1", "node": NODE, "index": 3, "name": "NVIDIA A100-SXM4-80GB", "utilization": 2.0,
            "memory_used_mib": 900, "memory_total_mib": 81920, "temperature_c": 40, "power_w": 80.0,
            "power_limit_w": 400.0}
    return Gpu(**{**base, **kw})


def job(name: str, ns: str, pod: str | None, pod_uid: str | None = None) -> Job:
    return Job(uid=f"uid-{name}", name=name, namespace=ns, state=JobState.RUNNING, created=0.0, gpus=1,
               pod=pod, pod_uid=pod_uid)


def instance(node: str = NODE, price: float = 32.8, gpus: int = 8, state=InstanceState.RUNNING, iid="i-1") -> Instance:
    return Instance(instance_id=iid, instance_type="p4d.24xlarge", region="us-east-1", availability_zone="us-east-1a",
                    market=Market.ON_DEMAND, state=state, launch_time=0.0, price_per_hour=price, gpus=gpus, node=node)


def test_a_pod_named_by_the_exporter_joins_its_job_and_instance_price():
    held = gpu(pod="bert-ft-x7k2p", namespace="nlp", utilization=62.0)
    snap = FleetSnapshot(taken_at=0.0, gpus=(held,), jobs=(job("bert", "nlp", "bert-x"), job("bert-ft", "nlp", None),
                                                            job("bert-ft", "other", None)),
                         instances=(instance(state=InstanceState.TERMINATED, iid="i-0"), instance()))
    who = attribute(snap, held)
    assert [(j.name, j.namespace) for j in who.jobs] == [("bert-ft", "nlp")]
    assert who.instance.instance_id == "i-1" and who.per_hour == pytest.approx(4.10)
    assert who.sentence() == f"GPU 3 on {NODE}: 62% busy, held by job bert-ft of ns nlp, costing $4.10/h"
    assert who.sentence(lambda n: n.split(".")[0]).startswith("GPU 3 on ip-10-0-1-2: ")
    # A job holding a GPU it does not use still wastes it.
    stalled = replace(held, utilization=2.0)
    assert attribute(replace(snap, gpus=(stalled,)), stalled).sentence().endswith(
        "2% busy, held by job bert-ft of ns nlp, costing $4.10/h while IDLE")


def test_unknown_pods_idle_gpus_and_nodes_known_by_instance_id():
    alone = gpu(node="gpu-node-7", pod="notebook-0", namespace="ds", utilization=62.0)
    nodes = (Node("gpu-node-7", "A100", 8, 8, 1, instance_id="i-9"),)
    snap = FleetSnapshot(taken_at=0.0, gpus=(alone,), nodes=nodes, instances=(instance(node=None, iid="i-9"),))
    assert attribute(snap, alone).sentence() == "GPU 3 on gpu-node-7: 62% busy, held by pod notebook-0 of ns ds, costing $4.10/h"
    idle = gpu(utilization=0.0)
    snap = FleetSnapshot(taken_at=0.0, gpus=(idle,), instances=(instance(),))
    assert attribute(snap, idle).sentence().endswith("0% busy, no job, costing $4.10/h while IDLE")
    unpriced = FleetSnapshot(taken_at=0.0, gpus=(idle,))
    assert attribute(unpriced, idle).sentence() == f"GPU 3 on {NODE}: 0% busy, no job"


def test_mig_instances_by_pod_uid_or_name_and_their_share_of_the_price():
    slices = (MigSlice("MIG-a", "GPU-1", 1, 0, "3g.40gb", 40192, 20000, 55.0, pod_uid="pod-uid-1"),
              MigSlice("MIG-b", "GPU-1", 2, 0, "1g.10gb", 9856, 100, None, pod="eval-0-abcde", namespace="ml"))
    mig_gpu = gpu(mig_mode=MigMode.ENABLED, mig_slices=slices)
    jobs = (job("train", "ml", "train-zzz", pod_uid="pod-uid-1"), job("eval", "ml", "eval-0-qqqqq"))
    snap = FleetSnapshot(taken_at=0.0, gpus=(mig_gpu,), jobs=jobs, instances=(instance(price=28.0),))
    first = attribute(snap, mig_gpu, "MIG-a")
    assert first.sentence() == (f"MIG 3g.40gb (GI 1) of GPU 3 on {NODE}: 55% busy, held by job train of ns ml, "
                                "costing $1.50/h")
    second = attribute(snap, mig_gpu, "MIG-b")
    assert [j.name for j in second.jobs] == ["eval"] and "utilization N/A" in second.sentence()
    assert [j.name for j in attribute(snap, mig_gpu).jobs] == ["train"]
    assert jobs_of(jobs, set(), "unrelated-pod", "ml") == ()


def scanned(jobs, pod_uids, pod, namespace):
    """What jobs_of means, as a pass over every job: the pods' owners in order, else the job
    whose pod (or the longest job name that prefixes it before a "-") matches, in ``namespace``."""
    found = [j for j in jobs if any(j.owns_pod(uid) for uid in pod_uids)] if pod_uids else []
    if found or not pod:
        return tuple(found)
    named = [j for j in jobs if not namespace or j.namespace == namespace]
    exact = next((j for j in named if j.pod == pod), None)
    if exact is not None:
        return (exact,)
    prefixes = [j for j in named if pod.startswith(j.name + "-")]
    return (max(prefixes, key=lambda j: len(j.name)),) if prefixes else ()  # max keeps the first of a tie


WORDS = st.sampled_from(["a", "b", "a-b", "a-b-c", "x", ""])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(WORDS, st.sampled_from(["ml", "nlp"]), st.sampled_from(["u1", "u2", "u3", None]),
                          st.lists(st.sampled_from(["u2", "u4", "u5"]), max_size=2),
                          st.sampled_from([None, "a-b-c", "x-1"])), max_size=12),
       st.sets(st.sampled_from(["u1", "u2", "u3", "u4", "u5", "u6", None]), max_size=3),
       st.sampled_from([None, "", "a-b-c-d", "a-b-c", "x-1", "a--q", "-"]), st.sampled_from([None, "", "ml", "nlp"]))
def test_the_index_of_a_reading_finds_the_holders_a_pass_over_every_job_finds(rows, uids, pod, namespace):
    """Shared pods, a distributed job's many pods, names with dashes and ties in any order."""
    jobs = tuple(Job(uid=f"j{n}", name=name, namespace=ns, state=JobState.RUNNING, created=0.0, pod_uid=uid,
                     pod_uids=tuple(more), pod=named) for n, (name, ns, uid, more, named) in enumerate(rows))
    assert jobs_of(jobs, set(uids), pod, namespace) == scanned(jobs, uids, pod, namespace)
    assert job_index(jobs) is job_index(jobs), "made once per reading"
    for uid in uids:
        assert job_index(jobs).owner(uid) == next((j for j in jobs if j.owns_pod(uid)), None)


# --------------------------------------------------------------------------- charts


class HistorySource:
    name = "fake"
    capabilities = frozenset({Capability.HISTORY})

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[tuple[str, float, float, float]] = []

    def poll_gpus(self):
        raise BackendError("not polled here")

    def history(self, uuid, since, until, step):
        self.asked.append((uuid, since, until, step))
        if self.fail:
            raise BackendError("Prometheus at p: down")
        return (GpuSample(since, 1.0, 2.0, 3.0, 4.0),)

    def close(self) -> None:
        return None


def test_charts_ask_a_history_keeping_source_first_then_the_store():
    now = 1_764_480_000.0
    console = Console(ConsoleOptions(sources=SourceOptions(gpus="off", jobs="off", cloud="off"), clock=lambda: now))
    try:
        source = HistorySource()
        console.hub.replace(SourceKind.GPUS, source)
        assert console.gpu_history("GPU-1", 86400) == [GpuSample(now - 86400, 1.0, 2.0, 3.0, 4.0)]
        assert source.asked == [("GPU-1", now - 86400, now, 360.0)]
        console.hub.replace(SourceKind.GPUS, HistorySource(fail=True))
        assert console.gpu_history("GPU-1", 600) == [], "no store: nothing, and no error"
        console.hub.replace(SourceKind.GPUS, Unconfigured("off", "off", "off"))
        assert console.gpu_history("GPU-1", 600) == []
    finally:
        console.close()


def test_a_gpu_is_held_by_a_live_job_and_its_detail_reads_no_finished_one() -> None:
    """A cluster that keeps finished jobs lists them beside the live ones: a GPU's holder is a
    live job (a finished job's pods let their GPUs go), found without reading every job."""
    finished = tuple(Job(uid=f"f{n}", name=f"old-{n}", namespace="ml", state=JobState.SUCCEEDED, created=0.0,
                         pod_uid="pod-1" if n == 3 else f"p{n}") for n in range(50))
    live = Job(uid="l1", name="train", namespace="ml", state=JobState.RUNNING, created=0.0, pod_uid="pod-1")
    held = gpu(processes=(GpuProcess(pid=1, gpu_uuid="GPU-1", name="python", memory_used_mib=900, pod_uid="pod-1"),))
    snap = FleetSnapshot(taken_at=0.0, gpus=(held,), jobs=(*finished, live))
    assert attribute(snap, held).jobs == (live,)
    assert job_index((*finished, live))._columns == {}  # noqa: SLF001 - the index of every job read nothing
