"""The seeded demo's Kueue: a cohort of two ClusterQueues with GPU quotas, and the three ways a job waits."""

from __future__ import annotations

from gpuconsole.backends.sim.world import SimWorld
from gpuconsole.model import Job, JobState, QueueKind, WaitingFor
from tests.helpers import START

QUOTA_WORDS = "52 of 44 GPUs used, may borrow 0 of 8 from cohort gpu-pool"


def _by_name(world: SimWorld) -> dict[str, Job]:
    return {j.name.rsplit("-", 1)[0] if j.kind == "Job" else j.name: j for j in world.jobs_reading().jobs
            if j.state in (JobState.PENDING, JobState.QUEUED)}


def test_the_demo_has_a_cohort_of_two_cluster_queues_with_gpu_quotas() -> None:
    world = SimWorld(seed=7, start=START)
    world.step(60)
    queues = {q.name: q for q in world.jobs_reading().queues}
    assert set(queues) == {"nlp", "research"}
    research, nlp = queues["research"], queues["nlp"]
    assert {q.kind for q in queues.values()} == {QueueKind.KUEUE} and {q.cohort for q in queues.values()} == {"gpu-pool"}
    assert research.local_queues == ("research/research",) and nlp.local_queues == ("team-nlp/nlp",)
    # research: the MPIJob (8), the PyTorchJob (24), the 70B run (16) and a 4-GPU run admitted, 8 borrowed from nlp
    assert (research.gpu_quota, research.gpu_used, research.gpu_borrowed, research.admitted_workloads) == (44, 52, 8, 4)
    assert (nlp.gpu_quota, nlp.gpu_lending_limit, nlp.gpu_borrowed) == (16, 8, 0)


def test_the_demo_shows_a_job_on_quota_a_gang_that_does_not_fit_and_one_waiting_for_capacity() -> None:
    world = SimWorld(seed=7, start=START)
    world.step(300)
    waiting = _by_name(world)
    quota = next(j for j in world.jobs_reading().jobs if j.queue_position == 1)
    assert quota.name.startswith("moe-ablation-")
    assert (quota.state, quota.waiting_for, quota.queue, quota.cluster_queue) == (
        JobState.QUEUED, WaitingFor.QUOTA, "research", "research")
    assert quota.pending_reason == f"waiting in queue research, position 1: {QUOTA_WORDS}"
    gang = waiting["llama-8b-ddp"]
    assert (gang.kind, gang.state, gang.waiting_for) == ("PyTorchJob", JobState.PENDING, WaitingFor.GANG)
    assert gang.pending_reason.startswith("0 of 3 pods fit; minMember 3; Worker: 0/8 nodes are available: ")
    capacity = waiting["llama-70b-pretrain"]
    assert (capacity.state, capacity.waiting_for, capacity.cluster_queue) == (
        JobState.PENDING, WaitingFor.CAPACITY, "research")
    assert capacity.pending_reason == "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    # a job of a namespace without a LocalQueue is the scheduler's alone
    assert all(j.queue is None for j in world.jobs_reading().jobs if j.namespace == "team-vision")


def test_kueue_admits_the_next_jobs_in_order_when_quota_is_given_back() -> None:
    world = SimWorld(seed=7, start=START)
    world.step(60)
    held = sorted((j for j in world.jobs_reading().jobs if j.state is JobState.QUEUED), key=lambda j: j.queue_position)
    assert [j.queue_position for j in held] == list(range(1, len(held) + 1))
    world.delete_object("Job", "research", _by_name(world)["llama-70b-pretrain"].name)  # gives back 16 GPUs
    world.step(1)
    after = {j.uid: j for j in world.jobs_reading().jobs}
    first = after[held[0].uid]
    assert first.state in (JobState.PENDING, JobState.RUNNING) and first.waiting_for is not WaitingFor.QUOTA
    research = next(q for q in world.jobs_reading().queues if q.name == "research")
    assert research.gpu_used == 52 - 16 + sum(j.gpus for j in held if after[j.uid].state is not JobState.QUEUED)


def test_a_job_submitted_to_a_local_queue_waits_for_its_quota_and_one_without_runs_as_before() -> None:
    world = SimWorld(seed=7, start=START)
    manifest = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "probe", "namespace": "research", "labels": {"kueue.x-k8s.io/queue-name": "research"}},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "train", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}
    world.apply_manifests([manifest])
    world.step(1)
    probe = next(j for j in world.jobs_reading().jobs if j.name == "probe")
    assert (probe.state, probe.waiting_for, probe.queue) == (JobState.QUEUED, WaitingFor.QUOTA, "research")


def test_the_seeded_demo_queues_are_the_same_every_time() -> None:
    a, b = SimWorld(seed=7, start=START), SimWorld(seed=7, start=START)
    a.step(120)
    b.step(120)
    assert a.jobs_reading() == b.jobs_reading()


async def test_the_demo_queues_screen_shows_what_each_queue_uses_lends_costs_and_its_team_budget() -> None:
    from textual.widgets import Static

    from gpuconsole.ui.screens.queues import QueuesScreen
    from tests.driving import column, running, shown

    async with running(size=(160, 48)) as (app, pilot):
        await pilot.press("3")
        await pilot.pause()
        reasons = " ".join(column(app, "job-table", "reason"))
        assert "quota · waiting in queue research, position 1: " + QUOTA_WORDS in reasons
        assert "gang · 0 of 3 pods fit; minMember 3" in reasons
        assert "0/8 nodes are available: 8 Insufficient nvidia.com/gpu." in reasons  # capacity: the scheduler's words
        await pilot.press("Q")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, QueuesScreen)
        rows = {line.split()[0]: line.split() for line in shown(screen.query_one("#queues-table", Static)).splitlines()}
        assert rows["QUEUE"][3:] == ["NOMINAL", "USED", "BORROWED", "LENT", "WAITING", "ADMITTED", "PENDING", "$/H", "BUDGET"]
        assert rows["research"][3:7] == ["44", "52", "8", "0"] and rows["nlp"][3:7] == ["16", "6", "0", "8"]
        assert rows["research"][-2] == "research-daily" and rows["nlp"][-2] == "team-nlp"  # tag:Project=<queue>
        assert rows["research"][-3].startswith("$") and rows["research"][-1].endswith("%")
        await pilot.press("down")
        await pilot.pause()
        drill = shown(screen.query_one("#queues-workloads", Static)).splitlines()
        assert drill[0].startswith("research: ")
        assert "admitted · budget research-daily: $" in drill[1] and " daily (" in drill[1]
        assert drill[2].split()[1] == "running"  # running first, then the waiting ones in Kueue's order
        held = [line for line in drill if " queued " in line]
        assert held and held[0].startswith("#1 research/moe-ablation-")


async def test_at_80_columns_the_queues_fit_without_wrapping_with_short_headers_and_a_legend() -> None:
    from textual.widgets import Static

    from tests.driving import running, shown

    async with running(size=(80, 24)) as (app, pilot):
        await pilot.press("3")
        await pilot.pause()
        await pilot.press("Q")
        await pilot.pause()
        table = app.screen.query_one("#queues-table", Static)
        lines = shown(table).splitlines()
        assert lines[0].split()[3:] == ["NOM", "USED", "BORR", "LENT", "WAIT", "ADM", "PEND", "$/H"]
        rows = {line.split()[0]: line.split() for line in lines[1:3]}
        assert rows["research"][3:7] == ["44", "52", "8", "0"]  # one line a queue: nothing wrapped
        assert lines[3].startswith("GPUs: NOM nominal") and lines[4].startswith("workloads: ADM admitted")
        assert all(len(line) <= table.content_size.width for line in lines)
        await pilot.press("down")
        await pilot.pause()
        assert "budget research-daily: $" in shown(app.screen.query_one("#queues-workloads", Static))  # said below


def test_a_cronjobs_runs_wait_in_its_jobs_local_queue_and_forbid_counts_the_one_held() -> None:
    from gpuconsole.core.ops.manifests import JobRequest, manifests

    world = SimWorld(seed=7, start=START)
    world.apply_manifests(manifests(JobRequest("every-minute", "research", image="busybox", gpus=1,
                                               schedule="* * * * *", queue="research")))
    world.apply_manifests(manifests(JobRequest("plain-minute", "research", image="busybox", gpus=1,
                                               schedule="* * * * *")))
    world.step(180)
    runs = [j for j in world.jobs_reading().jobs if j.cronjob == "every-minute"]
    assert [(j.state, j.queue) for j in runs] == [(JobState.QUEUED, "research")]  # Forbid: one run at a time
    plain = [j for j in world.jobs_reading().jobs if j.cronjob == "plain-minute"]
    assert plain and all(j.queue is None for j in plain)  # no queue label: the scheduler's alone


def test_the_demo_deactivates_and_reactivates_a_queued_workload_and_refuses_what_kueue_would() -> None:
    import pytest

    from gpuconsole.backends.sim import make_sim
    from gpuconsole.core.ops.actions import ActionError, ActionLog
    from gpuconsole.core.ops.job_ops import JobOps
    from tests.helpers import FrozenClock

    clock = FrozenClock(START + 300)
    _gpus, jobs, _cloud = make_sim(clock=clock)
    log = ActionLog()
    ops = JobOps(jobs, clock, log)

    def queued() -> list[Job]:
        return sorted((j for j in jobs.poll_jobs().jobs if j.waiting_for is WaitingFor.QUOTA),
                      key=lambda j: j.queue_position or 0)

    probe = {"apiVersion": "batch/v1", "kind": "Job",
             "metadata": {"name": "probe", "namespace": "research", "labels": {"kueue.x-k8s.io/queue-name": "research"}},
             "spec": {"template": {"spec": {"containers": [
                 {"name": "train", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}
    jobs.submit([probe])
    first, second = queued()[:2]
    assert second.name == "probe"
    assert ops.set_workload_active(first.namespace, first.name, False).ok
    now = {j.uid: j for j in jobs.poll_jobs().jobs}
    assert now[first.uid].state is JobState.QUEUED and now[first.uid].waiting_for is None
    assert now[first.uid].pending_reason == "deactivated in queue research (its Workload's spec.active is false)"
    assert now[second.uid].queue_position == 1  # the line moves up
    assert ops.set_workload_active(first.namespace, first.name, True).ok
    assert {j.uid: j for j in jobs.poll_jobs().jobs}[first.uid].queue_position == 1
    with pytest.raises(ActionError, match='localqueues.kueue.x-k8s.io "nlp" not found'):
        ops.move_queue(first.namespace, first.name, "nlp")  # nlp's LocalQueue is in team-nlp
    admitted = next(j for j in jobs.poll_jobs().jobs if j.name.startswith("llama-70b-pretrain"))  # waits for nodes
    with pytest.raises(ActionError, match="already admitted to research; only a pending job can be changed"):
        ops.set_workload_active(admitted.namespace, admitted.name, False)
    assert [r.ok for r in log.recent()] == [True, True, False, False]
