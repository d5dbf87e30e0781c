"""Submitting to a queue: the Queue field of the submit wizard (Kueue's LocalQueues of the namespace,
Volcano's queues, with their free quota), Kueue's queue-name label, and Volcano's scheduler and
PodGroup sized to the job, created through the same dry run and create on the Kubernetes API test server."""

from __future__ import annotations

from textual.widgets import Select

from gpuconsole.core.ops.actions import ActionError, ActionLog
from gpuconsole.core.ops.job_ops import JobOps
from gpuconsole.core.ops.manifests import JobRequest, from_form, manifests, validate
from gpuconsole.core.ops.queue_manifest import NO_QUEUE, queue_choices
from gpuconsole.model import JobState, Queue, QueueKind
from tests import kube_queues as kq
from tests.helpers import demo_console, wait_until
from tests.kube_server import KubeCluster
from tests.test_jobs_pane import fill, open_submit, submit, to_review

QUEUES = (Queue("nlp", QueueKind.KUEUE, cohort="gpu-pool", gpu_quota=16, gpu_used=6,
                local_queues=("team-nlp/nlp", "team-nlp/spare", "research/research")),
          Queue("gpu", QueueKind.VOLCANO, gpu_quota=32, gpu_used=30),
          Queue("closed", QueueKind.VOLCANO, active=False),
          Queue("any", QueueKind.VOLCANO))


def test_the_queue_choices_of_a_namespace_say_each_queues_free_quota() -> None:
    choices = queue_choices(QUEUES, "team-nlp")
    assert choices[0] == NO_QUEUE
    assert [(c.value, c.label) for c in choices[1:]] == [
        ("kueue:nlp", "nlp (Kueue, nlp): 10 of 16 GPUs free"),
        ("kueue:spare", "spare (Kueue, nlp): 10 of 16 GPUs free"),
        ("volcano:any", "any (Volcano): no GPU quota"),
        ("volcano:gpu", "gpu (Volcano): 2 of 32 GPUs free"),  # a closed queue is not offered
    ]
    assert [c.value for c in queue_choices(QUEUES, "vision")] == ["", "volcano:any", "volcano:gpu"]


def _request(**fields: str) -> JobRequest:
    req, problems = from_form({"name": "ddp", "namespace": "ml", "image": "busybox", "gpus": "2", "workers": "1",
                               "backoff_limit": "2", **fields})
    assert not problems
    return req


def test_a_kueue_choice_labels_the_job_and_a_volcano_one_gives_a_multi_pod_job_its_pod_group() -> None:
    kueue = _request(queue="kueue:nlp")
    (job,) = manifests(kueue)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "nlp"
    assert "schedulerName" not in job["spec"]["template"]["spec"]

    one = _request(queue="volcano:gpu")
    (job,) = manifests(one)
    pod = job["spec"]["template"]
    assert pod["spec"]["schedulerName"] == "volcano" and pod["metadata"]["annotations"] == {
        "scheduling.volcano.sh/queue-name": "gpu"}  # one pod: Volcano makes its own PodGroup

    ddp = _request(queue="volcano:gpu", workers="4")
    job, group, service = manifests(ddp)
    assert [o["kind"] for o in (job, group, service)] == ["Job", "PodGroup", "Service"]
    assert job["spec"]["template"]["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "ddp"
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["spec"] == {"minMember": 4, "queue": "gpu", "minResources": {"nvidia.com/gpu": "8"}}
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]


def test_a_queue_the_cluster_cannot_take_is_one_line_under_the_field() -> None:
    assert validate(JobRequest("ddp", queue="nlp", volcano_queue="gpu"))["queue"].startswith("a job goes to a Kueue")
    assert validate(JobRequest("ddp", volcano_queue="Bad_Queue"))["queue"].startswith("not a Volcano queue name")
    cron = JobRequest("ddp", volcano_queue="gpu", workers=2, schedule="0 2 * * *")
    assert "cannot share one PodGroup" in validate(cron)["queue"]
    assert "queue" not in validate(JobRequest("ddp", volcano_queue="gpu", schedule="0 2 * * *"))


def test_a_multi_pod_job_goes_to_volcano_with_its_pod_group_through_dry_run_then_create(kube: KubeCluster) -> None:
    kube.server.volcano = True
    kube.add(kq.volcano_queue("gpu", gpus=32))
    backend = kube.backend(watch=False)
    backend.poll_jobs()  # discovery
    ops = JobOps(backend, log=ActionLog())
    req = _request(queue="volcano:gpu", workers="4", namespace="team-a")
    checked = ops.submit(req, dry_run=True)
    assert checked.ok and "PodGroup team-a/ddp" in checked.message
    assert kube.server.get("PodGroup", "ddp", "team-a") is None and kube.server.get("Job", "ddp", "team-a") is None
    assert ops.submit(req).ok
    job = kube.server.get("Job", "ddp", "team-a")
    group = kube.server.get("PodGroup", "ddp", "team-a")
    assert group["spec"]["minMember"] == 4 and group["spec"]["queue"] == "gpu"
    assert group["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]  # deleted with its Job
    assert job["spec"]["template"]["spec"]["schedulerName"] == "volcano"


def test_without_volcano_the_pod_group_is_refused_in_one_line_before_anything_is_created(kube: KubeCluster) -> None:
    backend = kube.backend(watch=False)
    backend.poll_jobs()
    ops = JobOps(backend, log=ActionLog())
    try:
        ops.submit(_request(queue="volcano:gpu", workers="2", namespace="team-a"), dry_run=True)
    except ActionError as exc:
        assert "PodGroup team-a/ddp" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("a cluster without Volcano took a PodGroup")
    assert kube.server.get("Job", "ddp", "team-a") is None


async def test_the_wizard_offers_the_namespaces_local_queues_and_the_job_waits_in_the_one_chosen() -> None:
    from tests.driving import running

    async with running() as (app, pilot):
        wizard = await open_submit(app, pilot)
        await pilot.press(*"probe")
        await wait_until(lambda: wizard.built)
        select = wizard.query_one("#job-queue", Select)
        await fill(pilot, wizard, "job-namespace", "default")
        assert [value for _label, value in select._options] == [""]  # no LocalQueue there
        await fill(pilot, wizard, "job-namespace", "research")
        labels = {value: str(label) for label, value in select._options}
        assert labels["kueue:research"] == "research (Kueue, research): 0 of 40 GPUs free"
        select.value = "kueue:research"
        await pilot.pause()
        code = await to_review(pilot, wizard)
        assert "kueue.x-k8s.io/queue-name: research" in code
        await submit(app, pilot, wizard)
        await wait_until(lambda: any(j.name == "probe" for j in app.snapshot.jobs))
        probe = next(j for j in app.snapshot.jobs if j.name == "probe")
        assert probe.state is JobState.QUEUED and probe.queue == "research"  # research's quota is taken


async def test_a_cluster_without_queues_gets_the_form_it_had() -> None:
    from tests.driving import running

    async with running(demo_console(nodes=4)) as (app, pilot):
        wizard = await open_submit(app, pilot)
        await wait_until(lambda: wizard.built)
        assert not wizard.query("#job-queue")
