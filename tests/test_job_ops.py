"""Jobs through the core on the simulated cluster: every change is an action, checked and recorded."""

from __future__ import annotations

import re
import threading

import pytest

from gpuconsole.backends.base import JobControl
from gpuconsole.backends.sim import make_sim
from gpuconsole.backends.sim.training_log import LINE_EVERY_S
from gpuconsole.core.ops.actions import ActionError, ActionKind
from gpuconsole.core.ops.job_ops import NOT_A_CLUSTER, JobOps
from gpuconsole.core.ops.manifests import JobRequest
from gpuconsole.model import JobState, SourceKind
from tests.helpers import FrozenClock, demo_console, wait_for


@pytest.fixture
def sim():
    clock = FrozenClock()
    _gpus, jobs, _cloud = make_sim(clock=clock)
    ops = JobOps(jobs, clock)
    return ops, jobs, clock


def job_named(jobs, name: str):
    return next((j for j in jobs.poll_jobs().jobs if j.name == name), None)


def cron_named(jobs, name: str):
    return next((c for c in jobs.poll_jobs().cronjobs if c.name == name), None)


def test_the_simulator_is_a_job_control_and_the_console_offers_it() -> None:
    _gpus, jobs, _cloud = make_sim(clock=FrozenClock())
    assert isinstance(jobs, JobControl)
    console = demo_console()
    try:
        assert console.services.jobs.available
        assert console.services.jobs.control is console.hub.runners[SourceKind.JOBS].source
    finally:
        console.close()
    off = demo_console(demo=False)
    try:
        assert not off.services.jobs.available
        with pytest.raises(ActionError, match="cannot change jobs"):
            off.services.jobs.submit(JobRequest("x", "default"))
        off.switch_to_demo()
        assert off.services.jobs.available
    finally:
        off.close()


def test_an_invalid_request_is_refused_before_the_cluster_is_asked(sim) -> None:
    ops, jobs, _clock = sim
    with pytest.raises(ActionError, match=r"^name: only lowercase a-z"):
        ops.submit(JobRequest("Bad_Name", "team-nlp"))
    assert ops.log.recent() == ()


def test_dry_run_then_submit(sim) -> None:
    ops, jobs, _clock = sim
    req = JobRequest("bert-ft", "team-nlp", gpus=2, owner="alice")
    result = ops.submit(req, dry_run=True)
    assert result.ok and result.message == "dry run passed: Job team-nlp/bert-ft"
    assert job_named(jobs, "bert-ft") is None
    assert [dict(r.request.params)["dry-run"] for r in ops.log.recent()] == ["yes"]  # through the one path
    result = ops.submit(req)
    assert result.message == "created Job team-nlp/bert-ft"
    assert ops.log.recent()[-1].request.kind is ActionKind.SUBMIT_JOB
    job = job_named(jobs, "bert-ft")
    assert job.state is JobState.PENDING and job.gpus == 2 and job.owner == "alice"
    assert job.image == "nvcr.io/nvidia/pytorch:24.10-py3" and re.fullmatch(r"bert-ft-[a-z0-9]{5}", job.pod)
    with pytest.raises(ActionError, match=r'jobs.batch "bert-ft" already exists'):
        ops.submit(req, dry_run=True)
    with pytest.raises(ActionError, match=r'namespaces "nowhere" not found'):
        ops.submit(JobRequest("x", "nowhere"), dry_run=True)
    refused = ops.log.recent()[-1]  # a dry run goes through the one path, so its refusal is recorded too
    assert not refused.ok and dict(refused.request.params)["dry-run"] == "yes"


def test_a_distributed_job_is_one_queue_entry_holding_every_pods_gpus(sim) -> None:
    ops, jobs, _clock = sim
    result = ops.submit(JobRequest("ddp", "research", gpus=2, workers=4))
    assert result.message == "created Job research/ddp, Service research/ddp"
    job = job_named(jobs, "ddp")
    assert job.gpus == 8 and re.fullmatch(r"ddp-0-[a-z0-9]{5}", job.pod)
    assert "completionMode: Indexed" in ops.describe("Job", "research", "ddp")
    ops.delete("Job", "research", "ddp", "yes")
    ops.submit(JobRequest("ddp", "research", gpus=2, workers=4), dry_run=True)  # its Service went with it


def test_a_cronjob_runs_on_schedule_and_on_demand(sim) -> None:
    ops, jobs, clock = sim
    ops.submit(JobRequest("hourly-eval", "inference", gpus=1, schedule="0 * * * *", concurrency_policy="Allow"))
    cron = cron_named(jobs, "hourly-eval")
    assert cron.schedule == "0 * * * *" and cron.next_schedule == clock() + 3600 and not cron.suspended
    result = ops.trigger("inference", "hourly-eval")
    name = re.search(r"Job inference/(\S+)", result.message).group(1)
    assert re.fullmatch(r"hourly-eval-manual-[a-z0-9]{5}", name)
    assert job_named(jobs, name).cronjob == "hourly-eval"
    with pytest.raises(ActionError, match=r'cronjobs.batch "nope" not found'):
        ops.trigger("inference", "nope")


def test_forbid_skips_a_run_while_the_last_one_goes_on(sim) -> None:
    ops, jobs, clock = sim
    ops.submit(JobRequest("every-minute", "research", gpus=1, schedule="* * * * *"))
    clock.advance(60 * 3)
    runs = [j for j in jobs.poll_jobs().jobs if j.cronjob == "every-minute"]
    assert len(runs) == 1, "Forbid: one run at a time"


def test_delete_and_suspend_need_a_yes(sim) -> None:
    ops, jobs, _clock = sim
    running = next(j for j in jobs.poll_jobs().jobs if j.state is JobState.RUNNING and not j.cronjob)
    for action in (ops.delete, ops.suspend):
        with pytest.raises(ActionError, match="needs a yes"):
            action("Job", running.namespace, running.name)
    assert job_named(jobs, running.name).state is JobState.RUNNING
    assert [r.ok for r in ops.log.recent()] == [False, False]


def test_suspend_frees_the_gpus_and_resume_makes_a_new_pod(sim) -> None:
    ops, jobs, _clock = sim
    reading = jobs.poll_jobs()
    running = next(j for j in reading.jobs if j.state is JobState.RUNNING and j.gpus and not j.mig_profile)
    allocated = sum(n.gpu_allocated for n in reading.nodes)
    ops.suspend("Job", running.namespace, running.name, "yes")
    after = jobs.poll_jobs()
    suspended = next(j for j in after.jobs if j.uid == running.uid)
    assert suspended.state is JobState.SUSPENDED and suspended.pod is None and suspended.node is None
    assert sum(n.gpu_allocated for n in after.nodes) == allocated - running.gpus
    ops.resume("Job", running.namespace, running.name)
    resumed = job_named(jobs, running.name)
    assert resumed.state is JobState.PENDING and resumed.pod and resumed.pod != running.pod
    kinds = [r.request.kind for r in ops.log.recent()]
    assert kinds == [ActionKind.SUSPEND_JOB, ActionKind.RESUME_JOB]


def test_suspend_and_resume_a_cronjob(sim) -> None:
    ops, jobs, _clock = sim
    ops.suspend("CronJob", "team-nlp", "nightly-eval", "yes")
    assert cron_named(jobs, "nightly-eval").suspended
    assert ops.log.recent()[-1].request.kind is ActionKind.SUSPEND_CRONJOB
    ops.resume("CronJob", "team-nlp", "nightly-eval")
    cron = cron_named(jobs, "nightly-eval")
    assert not cron.suspended and cron.next_schedule is not None


def test_deleting_a_cronjob_deletes_its_jobs(sim) -> None:
    ops, jobs, _clock = sim
    ops.submit(JobRequest("sweep", "research", gpus=1, schedule="@daily"))
    ops.trigger("research", "sweep")
    ops.delete("CronJob", "research", "sweep", "yes")
    reading = jobs.poll_jobs()
    assert cron_named(jobs, "sweep") is None and not [j for j in reading.jobs if j.cronjob == "sweep"]
    with pytest.raises(ActionError, match=r'cronjobs.batch "sweep" not found'):
        ops.delete("CronJob", "research", "sweep", "yes")


def test_logs_are_a_training_run_and_follow_while_it_runs(sim) -> None:
    ops, jobs, clock = sim
    running = next(j for j in jobs.poll_jobs().jobs if j.state is JobState.RUNNING and j.pod)
    tail = list(ops.logs(running.namespace, running.pod, tail_lines=5))
    assert len(tail) == 5 and all(re.search(r"loss \d+\.\d{4}", line) for line in tail)
    assert tail == list(ops.logs(running.namespace, running.pod, tail_lines=5)), "the same log every time"
    head = list(ops.logs(running.namespace, running.pod, tail_lines=100_000))[:3]
    assert head[0].startswith("=== ") and head[1].startswith("+ torchrun")

    stop = threading.Event()
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(
        ops.logs(running.namespace, running.pod, tail_lines=1, follow=True, stop=stop)))
    reader.start()
    wait_for(lambda: len(got) == 1)
    clock.advance(3 * LINE_EVERY_S)
    wait_for(lambda: len(got) == 4)
    stop.set()
    reader.join(3)
    assert not reader.is_alive()
    assert got[0] == tail[-1] and all("step" in line for line in got[1:])


def test_following_ends_when_the_container_exits(sim) -> None:
    ops, jobs, clock = sim
    running = min((j for j in jobs.poll_jobs().jobs if j.state is JobState.RUNNING and j.pod),
                  key=lambda j: j.started)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(
        ops.logs(running.namespace, running.pod, tail_lines=0, follow=True)))
    reader.start()
    while job_named(jobs, running.name).state is JobState.RUNNING:
        clock.advance(600)
    reader.join(5)
    assert not reader.is_alive()
    assert "training finished" in got[-1] or "Error" in got[-1]


def test_logs_of_a_pending_or_missing_pod_say_why(sim) -> None:
    ops, jobs, _clock = sim
    pending = next(j for j in jobs.poll_jobs().jobs if j.state is JobState.PENDING and j.pod)
    with pytest.raises(ActionError, match="is waiting to start"):
        list(ops.logs(pending.namespace, pending.pod))
    with pytest.raises(ActionError, match=r'pods "nope-abcde" not found'):
        list(ops.logs("team-nlp", "nope-abcde"))


def test_describe_shows_yaml_and_events(sim) -> None:
    ops, jobs, _clock = sim
    pending = next(j for j in jobs.poll_jobs().jobs if j.state is JobState.PENDING and j.pending_reason)
    text = ops.describe("Job", pending.namespace, pending.name)
    assert f"name: {pending.name}" in text and f"uid: {pending.uid}" in text
    events = text.split("Events:\n", 1)[1]
    assert "FailedScheduling" in events and pending.pending_reason in events
    cron = ops.describe("CronJob", "inference", "hourly-embeddings-refresh")
    assert "schedule: 0 * * * *" in cron and "Created job hourly-embeddings-refresh-" in cron
    with pytest.raises(ActionError, match="only Jobs and CronJobs"):
        ops.describe("Pod", "team-nlp", "x")


def test_without_a_cluster_every_call_says_why() -> None:
    ops = JobOps(None)
    assert not ops.available
    for call in (lambda: ops.submit(JobRequest("x", "default"), dry_run=True),
                 lambda: ops.delete("Job", "default", "x", "yes"),
                 lambda: ops.trigger("default", "x"),
                 lambda: ops.describe("Job", "default", "x"),
                 lambda: list(ops.logs("default", "x"))):
        with pytest.raises(ActionError, match=re.escape(NOT_A_CLUSTER)):
            call()
