"""The demo world's distributed jobs: a running MPIJob (a launcher and two workers on the two
training nodes) and a PyTorchJob whose master and workers wait for H100s, as the Jobs pane and
the GPUs pane show them."""

from __future__ import annotations

from rich.style import Style

from gpuconsole.backends.sim.world import SimWorld
from gpuconsole.model import FleetSnapshot, JobState, WaitingFor
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.gpus import process_detail
from gpuconsole.ui.panes.job_rows import job_cells, roles_text

PLAIN = Palette(*[Style()] * 6)


def test_the_demo_runs_an_mpijob_and_a_pytorchjob_waits_for_gpus() -> None:
    world = SimWorld(seed=7)
    world.step(60)
    jobs = {j.kind: j for j in world.jobs_reading().jobs if j.roles}
    mpi, torch = jobs["MPIJob"], jobs["PyTorchJob"]
    assert (mpi.state, mpi.gpus, len(mpi.nodes)) == (JobState.RUNNING, 8, 2)
    assert roles_text(mpi) == "Launcher 1/1 · Worker 2/2 × 4 GPUs"
    assert mpi.pod is not None and mpi.pod.startswith("nccl-allreduce-launcher-")
    assert torch.state is JobState.PENDING and torch.waiting_for is WaitingFor.GANG
    assert torch.pending_reason.startswith("0 of 3 pods fit; minMember 3; Worker: 0/8 nodes are available: ")
    assert roles_text(torch) == "Master 0/1 × 8 GPUs · Worker 0/2 × 8 GPUs"
    cells = job_cells(torch, world.now, PLAIN)
    assert [str(c) for c in cells[:3]] == ["created", "PyTorch", "llama-8b-ddp"]


def test_the_gpus_pane_names_the_mpijob_as_the_holder_of_its_workers_gpus() -> None:
    world = SimWorld(seed=7)
    world.step(60)
    reading = world.jobs_reading()
    snap = FleetSnapshot(taken_at=world.now, gpus=world.gpu_reading().gpus, jobs=reading.jobs, nodes=reading.nodes)
    mpi = next(j for j in reading.jobs if j.kind == "MPIJob")
    held = [p for g in snap.gpus for p in g.processes if mpi.owns_pod(p.pod_uid)]
    assert len(held) == 8 and {g.node for g in snap.gpus for p in g.processes if p in held} == set(mpi.nodes)
    assert all("held by research/nccl-allreduce" in process_detail(p, snap, PLAIN).plain for p in held)


def test_the_demo_mpijobs_log_is_its_launchers() -> None:
    world = SimWorld(seed=7)
    world.step(60)
    mpi = next(j for j in world.jobs_reading().jobs if j.kind == "MPIJob")
    lines, count, ended = world.pod_log(mpi.namespace, mpi.pod, tail=20)
    assert lines and count >= len(lines) and not ended


def test_the_demos_mpijob_and_pytorchjob_suspend_resume_describe_and_delete_through_the_action_path() -> None:
    from gpuconsole.backends.sim import make_sim
    from gpuconsole.core.ops.actions import ActionLog
    from gpuconsole.core.ops.job_ops import JobOps
    from tests.helpers import FrozenClock

    clock = FrozenClock()
    gpus, jobs, _cloud = make_sim(clock=clock)
    ops = JobOps(jobs, clock, ActionLog())

    def named(name: str):
        return next((j for j in jobs.poll_jobs().jobs if j.name == name), None)

    def busy() -> int:  # GPUs with a process of the MPIJob's workers on them
        mpi = named("nccl-allreduce")
        return sum(1 for g in gpus.poll_gpus().gpus if any(mpi.owns_pod(p.pod_uid) for p in g.processes))

    assert named("nccl-allreduce").state is JobState.RUNNING and busy() == 8
    text = ops.describe("MPIJob", "research", "nccl-allreduce")
    assert "kind: MPIJob" in text and "mpiReplicaSpecs" in text and "suspend: false" in text
    assert "Created pod: nccl-allreduce-worker-0" in text and "Started container" in text
    assert ops.suspend("MPIJob", "research", "nccl-allreduce", "yes").ok
    assert named("nccl-allreduce").state is JobState.SUSPENDED and busy() == 0  # its pods gone, GPUs freed
    assert "suspend: true" in ops.describe("MPIJob", "research", "nccl-allreduce")
    assert ops.resume("MPIJob", "research", "nccl-allreduce").ok
    assert named("nccl-allreduce").state in (JobState.PENDING, JobState.RUNNING)
    assert ops.delete("PyTorchJob", "research", "llama-8b-ddp", "yes").ok
    assert named("llama-8b-ddp") is None
    assert not [j for j in jobs.poll_jobs().jobs if j.name.startswith("llama-8b-ddp-")]  # no member left behind
    clock.advance(120)
    uids = set(named("nccl-allreduce").pod_uids)
    assert ops.delete("MPIJob", "research", "nccl-allreduce", "yes").ok
    assert named("nccl-allreduce") is None
    assert not [p for g in gpus.poll_gpus().gpus for p in g.processes if p.pod_uid in uids]
