"""One run of an experiment as it is recorded: where it ran, when, what it measured, what it cost.

A run is one Job. Its ``state`` is one of :data:`RUN_STATES`; only a ``succeeded`` run with a
metric counts as a result. A ``failed`` or ``evicted`` run is kept (it was billed, and the table
shows it) and retried once under the next ``attempt`` number.
"""

from __future__ import annotations

from dataclasses import dataclass

PENDING, RUNNING, SUCCEEDED, FAILED, EVICTED, STOPPED = "pending", "running", "succeeded", "failed", "evicted", "stopped"
RUN_STATES = (PENDING, RUNNING, SUCCEEDED, FAILED, EVICTED, STOPPED)
LIVE_STATES = frozenset({PENDING, RUNNING})
LOST_STATES = frozenset({FAILED, EVICTED, STOPPED})


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of one arm.

    Attributes:
        arm: the arm's key (:attr:`~.spec.Arm.key`).
        repeat: 1-based repeat number; runs of repeat *k* of every arm go out together.
        attempt: 1 for the first try, 2 for the one retry.
        job: the Job's name.
        price_per_hour: the node's $/h in the market the run was billed in.
        cost: $ billed for the node time (start to end, or to now while it runs).
        message: why it failed, for the table.
    """

    experiment: str
    arm: str
    repeat: int
    attempt: int
    job: str
    state: str = PENDING
    node: str = ""
    submitted: float = 0.0
    start: float | None = None
    end: float | None = None
    metric: float | None = None
    market: str = "on-demand"
    price_per_hour: float = 0.0
    cost: float = 0.0
    message: str = ""

    @property
    def counts(self) -> bool:
        """Whether the run is a result: it succeeded and its metric was read."""
        return self.state == SUCCEEDED and self.metric is not None

    @property
    def seconds(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return max(self.end - self.start, 0.0)


def billed(price_per_hour: float, start: float | None, end: float) -> float:
    """$ for a node from ``start`` to ``end`` at ``price_per_hour``."""
    if start is None:
        return 0.0
    return price_per_hour * max(end - start, 0.0) / 3600.0
