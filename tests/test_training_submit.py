"""Submitting distributed training from the submit wizard: an MPIJob whose launcher runs the
deployment guide's ``mpirun`` with the NCCL settings chosen, and a PyTorchJob (master and
workers, ``nprocPerNode``), each through the server's dry run (``dryRun=All``) before it is
created, on the Kubernetes API test server serving the Kubeflow CRDs (tests/kube_server.py checks
them as the CRDs' schemas and the operators do: tests/kube_crd_schema.py).
"""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select, Static

from gpuconsole.core.ops.actions import ActionError, ActionLog
from gpuconsole.core.ops.job_ops import JobOps
from gpuconsole.core.ops.training_manifest import TrainingRequest, from_form, manifests, mpirun, validate
from tests import kube_server as ks
from tests.helpers import FrozenClock
from tests.kube_server import KubeCluster

GUIDE_NCCL = (("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_DISABLE", "1"), ("NCCL_DEBUG", "INFO"))
GUIDE_LINE = ["mpirun", "-np", "16", "-bind-to", "none", "-map-by", "slot",
              "-x", "NCCL_SOCKET_IFNAME=eth0", "-x", "NCCL_IB_DISABLE=1", "-x", "NCCL_DEBUG=INFO",
              "-mca", "btl_tcp_if_include", "eth0", "python", "distributed_train.py"]


def mpi_request(**changes) -> TrainingRequest:
    fields = dict(kind="MPIJob", name="allreduce", namespace="train", script="python distributed_train.py",
                  workers=2, gpus=8, presets=GUIDE_NCCL, owner="ana")
    return TrainingRequest(**{**fields, **changes})


def launcher_command(obj: dict) -> list[str]:
    return obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]


# --------------------------------------------------------------------------- the request (pure)


def test_the_launcher_runs_the_guides_mpirun_with_the_nccl_settings_chosen() -> None:
    assert mpirun(mpi_request()) == GUIDE_LINE
    # no NCCL setting: no -x and no -mca; other variables are exported too (the ranks see only those)
    assert mpirun(mpi_request(presets=(), workers=4, gpus=2, env=(("EPOCHS", "3"),))) == [
        "mpirun", "-np", "8", "-bind-to", "none", "-map-by", "slot", "-x", "EPOCHS=3", "python", "distributed_train.py"]
    # NCCL's exclusion list is OpenMPI's exclude list
    assert mpirun(mpi_request(presets=(("NCCL_SOCKET_IFNAME", "^lo,docker0"),)))[7:12] == [
        "-x", "NCCL_SOCKET_IFNAME=^lo,docker0", "-mca", "btl_tcp_if_exclude", "lo,docker0"]
    obj = manifests(mpi_request())[0]
    assert (obj["apiVersion"], obj["kind"], obj["spec"]["slotsPerWorker"]) == ("kubeflow.org/v2beta1", "MPIJob", 8)
    worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    assert worker["template"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert "resources" not in obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]


def test_a_pytorchjob_has_a_master_and_workers_with_nproc_per_node() -> None:
    req = TrainingRequest("PyTorchJob", "bert-ddp", "train", script="torchrun train.py --lr 3e-4", workers=3, gpus=8,
                          presets=(("NCCL_DEBUG", "WARN"),))
    obj = manifests(req)[0]
    assert (obj["apiVersion"], obj["spec"]["nprocPerNode"]) == ("kubeflow.org/v1", "8")
    replicas = obj["spec"]["pytorchReplicaSpecs"]
    assert {r: s["replicas"] for r, s in replicas.items()} == {"Master": 1, "Worker": 3}
    container = replicas["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch" and container["command"] == ["torchrun", "train.py", "--lr", "3e-4"]
    assert container["env"] == [{"name": "NCCL_DEBUG", "value": "WARN"}]
    assert req.total_gpus == 32
    alone = manifests(TrainingRequest("PyTorchJob", "solo", script="torchrun t.py", workers=0, gpus=2))[0]
    assert list(alone["spec"]["pytorchReplicaSpecs"]) == ["Master"]


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"name": "9lives"}, "name", "start it with a letter"),
    ({"name": "x" * 60}, "name", "too long for its pods' host names"),
    ({"script": ""}, "script", "required"),
    ({"script": "python 'train.py"}, "script", "cannot split"),
    ({"workers": 0}, "workers", "between 1 and"),
    ({"gpus": 0}, "gpus", "between 1 and 64"),
    ({"presets": (("NCCL_SOCKET_IFNAME", "eth0 eth1"),)}, "env:NCCL_SOCKET_IFNAME", "interface names"),
    ({"presets": (("NCCL_DEBUG", "LOUD"),)}, "env:NCCL_DEBUG", "one of VERSION"),
    ({"env": (("MASTER_ADDR", "x"),)}, "env", "set for distributed training already"),
    ({"namespace": "Team A"}, "namespace", ""),
    ({"image": "not an image!"}, "image", "not an image reference"),
])
def test_a_bad_field_is_named_in_one_line(changes, field, words) -> None:
    problems = validate(mpi_request(**changes))
    assert field in problems and words in problems[field], problems


def test_the_form_reads_numbers_and_presets() -> None:
    req, problems = from_form({"kind": "PyTorchJob", "name": "ddp", "namespace": "train", "image": "img:1",
                               "script": "torchrun t.py", "workers": "2", "gpus": "eight",
                               "env:NCCL_IB_DISABLE": "1", "env:NCCL_DEBUG": "", "env": "A=1 B='two words'"})
    assert problems == {"gpus": "not a whole number"}
    assert (req.kind, req.workers, req.presets, req.env) == ("PyTorchJob", 2, (("NCCL_IB_DISABLE", "1"),),
                                                             (("A", "1"), ("B", "two words")))


# --------------------------------------------------------------------------- the cluster


def install(kube: KubeCluster) -> None:
    kube.server.crds = set(ks.TRAINING_CRDS)


def test_an_mpijob_passes_the_servers_dry_run_then_is_created(kube: KubeCluster) -> None:
    install(kube)
    log = ActionLog()
    ops = JobOps(kube.backend(watch=False), FrozenClock(1_700_000_000.0), log)
    checked = ops.submit(mpi_request(), dry_run=True)
    assert checked.ok and checked.message == "dry run passed: MPIJob train/allreduce"
    posts = kube.server.requested("/apis/kubeflow.org/v2beta1/namespaces/train/mpijobs", method="POST")
    assert [p.query.get("dryRun") for p in posts] == ["All"]
    assert kube.server.get("MPIJob", "allreduce", "train") is None  # a dry run stores nothing
    assert ops.submit(mpi_request()).message == "created MPIJob train/allreduce"
    stored = kube.server.get("MPIJob", "allreduce", "train")
    assert launcher_command(stored) == GUIDE_LINE
    assert stored["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpuconsole", "owner": "ana"}
    assert [dict(r.request.params)["kind"] for r in log.recent()] == ["MPIJob", "MPIJob"]


def test_the_server_refuses_what_the_crd_refuses_in_its_own_words(kube: KubeCluster) -> None:
    install(kube)
    control = kube.backend(watch=False).job_control
    bad = manifests(mpi_request())[0]
    bad["spec"]["slotsPerWorker"] = "8"
    with pytest.raises(Exception, match=r"spec.slotsPerWorker in body must be of type integer"):
        control.submit([bad], dry_run=True)
    unnamed = manifests(TrainingRequest("PyTorchJob", "ddp", "train", script="torchrun t.py"))[0]
    unnamed["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["name"] = "main"
    with pytest.raises(Exception, match="there is no container named pytorch"):
        control.submit([unnamed], dry_run=True)


def test_without_the_crd_the_dry_run_fails_in_one_line_and_nothing_is_created(kube: KubeCluster) -> None:
    ops = JobOps(kube.backend(watch=False), FrozenClock(1_700_000_000.0))
    with pytest.raises(ActionError, match="could not find the requested resource"):
        ops.submit(mpi_request(), dry_run=True)


# --------------------------------------------------------------------------- the wizard


def kube_console():
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions

    return Console(ConsoleOptions(sources=SourceOptions(jobs="auto", gpus="off", cloud="off"), interval=0.2, timeout=3))


@pytest.fixture
def cluster(kube: KubeCluster, monkeypatch: pytest.MonkeyPatch) -> KubeCluster:
    from gpuconsole.backends.kube import source as kube_backend
    from tests.test_kube import QuickKubeJobs

    monkeypatch.setattr(kube_backend, "KubeJobs", QuickKubeJobs)
    install(kube)
    kube.add(ks.node("gpu-node-1"), ks.node("gpu-node-2"))
    return kube


async def open_kind(app, pilot, kind: str):
    """N on the Jobs pane, then the Kind chosen: the distributed form in the Job form's place."""
    from gpuconsole.ui.wizards.distributed import DistributedWizard
    from gpuconsole.ui.wizards.submit import SubmitWizard
    from tests.helpers import wait_until

    await pilot.press("3")
    await pilot.pause()
    await pilot.press("N")
    await wait_until(lambda: isinstance(app.screen, SubmitWizard) and app.screen.built)
    await pilot.press(*"allreduce")
    app.screen.query_one("#kind-choice Select", Select).value = kind
    await wait_until(lambda: isinstance(app.screen, DistributedWizard) and app.screen.built)
    await pilot.pause()
    return app.screen


async def fill(pilot, wizard, widget_id: str, value: str) -> None:
    widget = wizard.query_one(f"#{widget_id}")
    widget.value = value
    await pilot.pause()


def status(wizard) -> str:
    from tests.driving import shown

    return shown(wizard.query_one("#submit-status"))


async def test_an_mpijob_from_the_wizard_passes_the_dry_run_and_runs_the_guides_mpirun(cluster: KubeCluster) -> None:
    from tests.driving import running, shown
    from tests.helpers import wait_until

    async with running(kube_console(), live=False) as (app, pilot):
        wizard = await open_kind(app, pilot, "MPIJob")
        assert wizard.training_kind == "MPIJob"
        assert wizard.query_one("#job-name", Input).value == "allreduce"  # kept from the Job form
        assert "1 Job › 2 Network › 3 Review" in " ".join(shown(wizard.query_one("#submit-steps")).split())
        await fill(pilot, wizard, "job-namespace", "train")
        await fill(pilot, wizard, "dist-script", "python distributed_train.py")
        await fill(pilot, wizard, "dist-gpus", "8")
        assert shown(wizard.query_one("#next-runs", Static)).startswith("Launcher runs: mpirun -np 16 -bind-to none")
        await pilot.press("ctrl+n")
        await wait_until(lambda: wizard.step == 1)
        await fill(pilot, wizard, "env-NCCL_SOCKET_IFNAME", "eth0")
        await fill(pilot, wizard, "env-NCCL_IB_DISABLE", "1")
        await fill(pilot, wizard, "env-NCCL_DEBUG", "INFO")
        await pilot.press("ctrl+n")
        await wait_until(lambda: wizard.step == 2 and wizard.can_submit)
        await pilot.pause()
        code = shown(wizard.query_one("#review-yaml", Static))
        assert "kind: MPIJob" in code and "slotsPerWorker: 8" in code and "- btl_tcp_if_include" in code
        assert shown(wizard.query_one("#review-context")).startswith(
            "MPIJob train/allreduce · 2 workers × 8 GPUs = 16 GPUs")
        assert shown(wizard.query_one("#dry-run")).startswith("Dry run passed: MPIJob train/allreduce")
        assert cluster.server.get("MPIJob", "allreduce", "train") is None
        await pilot.press("ctrl+n")
        await wait_until(lambda: cluster.server.get("MPIJob", "allreduce", "train") is not None)
        assert launcher_command(cluster.server.get("MPIJob", "allreduce", "train")) == GUIDE_LINE
        await wait_until(lambda: not isinstance(app.screen, type(wizard)))
        await wait_until(lambda: any(j.name == "allreduce" and j.kind == "MPIJob" for j in app.snapshot.jobs))


async def test_a_pytorchjob_from_the_wizard_is_created_after_the_dry_run(cluster: KubeCluster) -> None:
    from tests.driving import running, shown
    from tests.helpers import wait_until

    async with running(kube_console(), live=False) as (app, pilot):
        wizard = await open_kind(app, pilot, "PyTorchJob")
        assert wizard.training_kind == "PyTorchJob"
        await fill(pilot, wizard, "job-name", "bert-ddp")
        await fill(pilot, wizard, "job-namespace", "train")
        await fill(pilot, wizard, "dist-workers", "3")
        await fill(pilot, wizard, "dist-gpus", "4")
        assert shown(wizard.query_one("#next-runs")) == "Master and workers run: torchrun train.py · nprocPerNode 4"
        await pilot.press("ctrl+n")
        await wait_until(lambda: wizard.step == 1)
        await fill(pilot, wizard, "env-NCCL_IB_DISABLE", "1")
        await pilot.press("ctrl+n")
        await wait_until(lambda: wizard.step == 2 and wizard.can_submit)
        assert shown(wizard.query_one("#review-context")).startswith(
            "PyTorchJob train/bert-ddp · master + 3 workers × 4 GPUs = 16 GPUs")
        await pilot.pause()
        await pilot.press("ctrl+n")
        await wait_until(lambda: cluster.server.get("PyTorchJob", "bert-ddp", "train") is not None)
        stored = cluster.server.get("PyTorchJob", "bert-ddp", "train")
        assert stored["spec"]["nprocPerNode"] == "4"
        assert stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
        posts = cluster.server.requested("/pytorchjobs", method="POST")
        assert [p.query.get("dryRun") for p in posts] == ["All", None]


async def test_a_bad_field_keeps_the_form_on_its_step_with_the_reason(cluster: KubeCluster) -> None:
    from tests.driving import running

    async with running(kube_console(), live=False) as (app, pilot):
        wizard = await open_kind(app, pilot, "MPIJob")
        await fill(pilot, wizard, "dist-workers", "0")
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert wizard.step == 0 and "Workers: between 1 and" in status(wizard)


@pytest.mark.parametrize("keys", [("ctrl+n", "ctrl+n", "ctrl+n"), ("ctrl+n", "ctrl+n", "enter", "enter", "y")])
async def test_a_burst_through_the_distributed_wizard_creates_nothing(cluster: KubeCluster, keys) -> None:
    from tests.driving import burst, running, settle
    from tests.helpers import wait_until

    async with running(kube_console(), live=False) as (app, pilot):
        wizard = await open_kind(app, pilot, "MPIJob")
        await fill(pilot, wizard, "job-namespace", "train")
        burst(app, *keys)
        await settle(pilot, lambda: wizard.step == wizard.CONFIRM_STEP and "typed ahead" in status(wizard))
        await wait_until(lambda: wizard.can_submit)
        await pilot.pause(0.2)
        assert wizard.result is None and not wizard.submitting
        assert cluster.server.requested("/mpijobs", method="POST")[-1].query.get("dryRun") == "All"
        assert cluster.server.get("MPIJob", "allreduce", "train") is None
        await pilot.press("ctrl+n")  # pressed with the review on screen: created
        await wait_until(lambda: cluster.server.get("MPIJob", "allreduce", "train") is not None)


async def test_choosing_job_again_brings_back_the_job_form(cluster: KubeCluster) -> None:
    from gpuconsole.ui.wizards.submit import SubmitWizard
    from tests.driving import running
    from tests.helpers import wait_until

    async with running(kube_console(), live=False) as (app, pilot):
        wizard = await open_kind(app, pilot, "PyTorchJob")
        wizard.query_one("#kind-choice Select", Select).value = "Job"
        await wait_until(lambda: type(app.screen) is SubmitWizard and app.screen.built)
        await pilot.pause()
        assert app.screen.query_one("#job-name", Input).value == "allreduce"
        assert len(app.screen_stack) == 2  # the one form in the other's place
