"""Queues priced and explained without a cluster: the $/h of what each queue admitted, what a
queue may borrow from its cohort, and the words the Jobs pane shows for a waiting job."""

from __future__ import annotations

from gpuconsole.backends.kube.queue_compose import borrowable, gang_words, quota_words
from gpuconsole.backends.kube.queue_records import PodGroupRecord
from gpuconsole.core.fleet.queues import lent, priced_queues, team_budgets
from gpuconsole.model import (
    Budget,
    BudgetPeriod,
    BudgetStatus,
    Instance,
    InstanceState,
    Job,
    JobState,
    Market,
    Queue,
    QueueKind,
    WaitingFor,
)
from gpuconsole.ui.panes.job_rows import waiting_text


def instance(node: str, price: float, gpus: int = 8) -> Instance:
    return Instance("i-0a1", "p4d.24xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, InstanceState.RUNNING,
                    0.0, price, gpus=gpus, node=node)


def job(name: str, gpus: int, *, node: str | None = "n1", queue: str | None = "team-a", cq: str | None = "team-a",
        state: JobState = JobState.RUNNING) -> Job:
    return Job(uid=name, name=name, namespace="ml", state=state, created=0.0, gpus=gpus, node=node,
               queue=queue, cluster_queue=cq)


def test_a_queue_costs_what_its_running_jobs_gpus_cost() -> None:
    queues = (Queue("team-a", QueueKind.KUEUE, gpu_quota=16), Queue("team-a", QueueKind.VOLCANO),
              Queue("idle", QueueKind.KUEUE))
    jobs = [job("a", 4), job("b", 2, node="n2"), job("waits", 8, node=None, state=JobState.QUEUED),
            job("vc", 1, cq=None)]
    kueue, volcano, idle = priced_queues(queues, jobs, [instance("n1", 32.0), instance("n2", 16.0)])
    assert kueue.usd_per_hour == 4 * 4.0 + 2 * 2.0
    assert volcano.usd_per_hour == 4.0 and idle.usd_per_hour == 0.0
    unknown = priced_queues(queues, jobs, [])  # no cloud: not $0.00/h
    assert [q.usd_per_hour for q in unknown] == [None, None, None]
    partly = priced_queues(queues, jobs, [instance("n1", 32.0)])  # job b's node is not priced
    assert partly[0].usd_per_hour is None and partly[1].usd_per_hour == 4.0


def test_what_a_queue_may_borrow_from_its_cohort() -> None:
    a = Queue("a", QueueKind.KUEUE, cohort="research", gpu_quota=16, gpu_used=20, gpu_borrowed=4, gpu_borrowing_limit=8)
    b = Queue("b", QueueKind.KUEUE, cohort="research", gpu_quota=16, gpu_used=6, gpu_borrowed=0)
    c = Queue("c", QueueKind.KUEUE, cohort="research", gpu_quota=8, gpu_used=0, gpu_lending_limit=2)
    assert borrowable(a, [a, b, c]) == 4  # 12 unused in the cohort, but 4 of its limit of 8 are borrowed already
    assert borrowable(b, [a, b, c]) == 2  # a lends nothing (it uses all of its own), c at most 2, no limit
    alone = Queue("x", QueueKind.KUEUE, gpu_quota=8, gpu_used=8)
    assert borrowable(alone, [alone]) == 0
    assert quota_words("x", None, alone, [alone], None) == "waiting in queue x: 8 of 8 GPUs used"
    unknown = Queue("d", QueueKind.KUEUE, cohort="research")
    assert quota_words("a", 2, a, [a, unknown], None) == ("waiting in queue a, position 2: 20 of 16 GPUs used, "
                                                          "may borrow ? of 8 from cohort research")


def test_what_a_queue_lends_to_its_cohort() -> None:
    a = Queue("a", QueueKind.KUEUE, cohort="research", gpu_quota=16, gpu_used=23, gpu_borrowed=7)
    b = Queue("b", QueueKind.KUEUE, cohort="research", gpu_quota=16, gpu_used=6, gpu_borrowed=0, gpu_lending_limit=4)
    c = Queue("c", QueueKind.KUEUE, cohort="research", gpu_quota=8, gpu_used=0, gpu_borrowed=0)
    cohort = [a, b, c]
    # a borrows 7: b lends what its limit allows (4), c the rest; a borrower lends nothing
    assert [lent(q, cohort) for q in cohort] == [0, 4, 3]
    assert lent(Queue("x", QueueKind.KUEUE, gpu_quota=8, gpu_used=2), []) == 0  # no cohort
    unknown = Queue("u", QueueKind.KUEUE, cohort="research", gpu_quota=8)  # its use is not known
    assert lent(b, [a, b, unknown]) is None
    assert lent(Queue("v", QueueKind.VOLCANO, gpu_quota=8, gpu_used=2), []) is None


def _budget(name: str, scope: str) -> BudgetStatus:
    return BudgetStatus(Budget(name=name, amount=1000.0, period=BudgetPeriod.MONTHLY, scope=scope), 100.0, 200.0, 1.0)


def test_a_queue_answers_to_the_budgets_of_its_namespaces_and_of_a_tag_naming_it() -> None:
    budgets = [_budget("fleet", "all"), _budget("nlp-money", "tag:Project=nlp"), _budget("ns", "namespace:team-nlp"),
               _budget("other", "namespace:research"), _budget("vision", "tag:Project=vision")]
    nlp = Queue("nlp", QueueKind.KUEUE, local_queues=("team-nlp/nlp", "team-nlp/spare"))
    assert team_budgets(nlp, budgets, []) == ("ns", "nlp-money")  # the namespace's first; never "all"
    volcano = Queue("gpu", QueueKind.VOLCANO)
    held = [job("vc", 1, queue="gpu", cq=None)]  # namespace ml
    assert team_budgets(volcano, [*budgets, _budget("ml", "namespace:ml")], held) == ("ml",)
    (priced,) = priced_queues((nlp,), [], [], budgets)
    assert priced.budgets == ("ns", "nlp-money")


def test_a_gang_in_words_from_the_older_unschedulable_message() -> None:
    group = PodGroupRecord("u", "ml", "pg", None, "default", 4, 4, "Inqueue",
                           "1/4 tasks in gang unschedulable: pod group is not ready, 4 minAvailable", 0)
    assert gang_words(group) == "3 of 4 pods fit; minMember 4"


def test_the_jobs_pane_leads_with_what_a_held_job_waits_for() -> None:
    held = Job(uid="1", name="sweep", namespace="ml", state=JobState.QUEUED, created=0.0, waiting_for=WaitingFor.QUOTA,
               pending_reason="waiting in queue team-a, position 3: 16 of 16 GPUs used")
    assert waiting_text(held) == "quota · waiting in queue team-a, position 3: 16 of 16 GPUs used"
    scheduler = Job(uid="2", name="x", namespace="ml", state=JobState.PENDING, created=0.0,
                    waiting_for=WaitingFor.CAPACITY, pending_reason="0/4 nodes are available")
    assert waiting_text(scheduler) == "0/4 nodes are available"
