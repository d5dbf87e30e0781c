"""The queues of a snapshot priced: what the GPUs of each queue's running jobs cost per hour.

A GPU-hour costs its node's instance price over the instance's GPUs (a MIG device its compute
share), as job costs count it. A queue's rate is unknown (None) when no instance is priced at
all, or when a running job of it sits on a node no priced instance backs.
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec.structs import replace

from gpuconsole.core.money.costs import gpu_price_per_hour, job_gpus
from gpuconsole.model import Instance, Job, JobState, Queue


def priced_queues(queues: tuple[Queue, ...], jobs: Iterable[Job], instances: Iterable[Instance]) -> tuple[Queue, ...]:
    if not queues:
        return queues
    prices = gpu_price_per_hour(instances)
    running = [j for j in jobs if j.state is JobState.RUNNING and (j.queue or j.cluster_queue)]
    out = []
    for queue in queues:
        rate: float | None = 0.0 if prices else None
        for job in running:
            if rate is None:
                break
            if queue.holds(job.queue, job.cluster_queue):
                price = prices.get(job.node or "")
                rate = None if price is None else rate + job_gpus(job) * price
        out.append(replace(queue, usd_per_hour=rate))
    return tuple(out)
