"""The queues of a snapshot priced and placed: what the GPUs of each queue's running jobs cost per
hour, what it lends to its cohort, and the team budgets it answers to.

A GPU-hour costs its node's instance price over the instance's GPUs (a MIG device its compute
share), as job costs count it. A queue's rate is unknown (None) when no instance is priced at
all, or when a running job of it sits on a node no priced instance backs.

What a Kueue ClusterQueue lends is the part of its unused quota (within its lending limit) that
the rest of its cohort borrows now; Kueue does not say which lender a borrower's GPUs come from,
so the cohort's borrowing is counted against its lenders in the order of their names.

A queue's team budgets are those whose scope is one of its namespaces (``namespace:NS``: the
namespaces of a ClusterQueue's LocalQueues, of a Volcano queue's jobs), then those whose tag value
is the queue's name or one of those namespaces (``tag:Project=research`` for ClusterQueue
``research``), as budgets count a team's spend by namespace or by tag.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from msgspec.structs import replace

from gpuconsole.core.money.budget_words import ScopeError, scope_parts
from gpuconsole.core.money.costs import gpu_price_per_hour, job_gpus
from gpuconsole.model import BudgetStatus, Instance, Job, JobState, Queue, QueueKind, unfinished


def priced_queues(queues: tuple[Queue, ...], jobs: Iterable[Job], instances: Iterable[Instance],
                  budgets: Sequence[BudgetStatus] = ()) -> tuple[Queue, ...]:
    if not queues:
        return queues
    jobs = tuple(jobs)
    prices = gpu_price_per_hour(instances)
    running = [j for j in unfinished(jobs) if j.state is JobState.RUNNING and (j.queue or j.cluster_queue)]
    out = []
    for queue in queues:
        rate: float | None = 0.0 if prices else None
        for job in running:
            if rate is None:
                break
            if queue.holds(job.queue, job.cluster_queue):
                price = prices.get(job.node or "")
                rate = None if price is None else rate + job_gpus(job) * price
        out.append(replace(queue, usd_per_hour=rate, gpu_lent=lent(queue, queues),
                           budgets=team_budgets(queue, budgets, jobs)))
    return tuple(out)


def lent(queue: Queue, queues: Sequence[Queue]) -> int | None:
    """GPUs of ``queue``'s quota the rest of its cohort borrows now (0 outside a cohort; None
    for a Volcano queue, or when a figure of the cohort is not known)."""
    if queue.kind is not QueueKind.KUEUE:
        return None
    if queue.cohort is None:
        return 0
    cohort = sorted((q for q in queues if q.kind is queue.kind and q.cohort == queue.cohort), key=lambda q: q.name)
    if any(q.gpu_borrowed is None or q.gpu_lendable is None for q in cohort):
        return None
    remaining = sum(q.gpu_borrowed or 0 for q in cohort)  # a queue that borrows has nothing to lend
    for lender in cohort:
        give = min(lender.gpu_lendable or 0, remaining)
        if lender.name == queue.name:
            return give
        remaining -= give
    return 0


def queue_namespaces(queue: Queue, jobs: Iterable[Job]) -> set[str]:
    """The namespaces whose work the queue takes: its LocalQueues' (Kueue), its jobs' (Volcano)."""
    if queue.kind is QueueKind.KUEUE:
        return {lq.split("/", 1)[0] for lq in queue.local_queues}
    return {j.namespace for j in jobs if queue.holds(j.queue, j.cluster_queue)}


def team_budgets(queue: Queue, budgets: Sequence[BudgetStatus], jobs: Iterable[Job]) -> tuple[str, ...]:
    """The names of the budgets ``queue``'s team answers to (see the module's words), by namespace first."""
    if not budgets:
        return ()
    namespaces = queue_namespaces(queue, jobs)
    by_namespace, by_tag = [], []
    for status in budgets:
        try:
            kind, key, value = scope_parts(status.budget.scope)
        except ScopeError:
            continue
        if kind == "namespace" and key in namespaces:
            by_namespace.append(status.budget.name)
        elif kind == "tag" and (value == queue.name or value in namespaces):
            by_tag.append(status.budget.name)
    return (*by_namespace, *by_tag)
