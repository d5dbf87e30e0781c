"""A CronJob's schedule priced from its runs, and the warning when it alone breaks a budget."""

from __future__ import annotations

from gpuconsole.core.money.cron_costs import cronjob_costs, typical_runtime
from gpuconsole.model import (
    Budget,
    BudgetPeriod,
    CronJob,
    Instance,
    InstanceState,
    Job,
    JobState,
    Market,
)

NOW = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def run(name: str, minutes: float, node: str = "n1", state: JobState = JobState.SUCCEEDED) -> Job:
    started = NOW - 86400
    finished = started + minutes * 60 if state is not JobState.RUNNING else None
    return Job(f"uid-{name}-{minutes}", f"{name}-x", "research", state, started - 5, gpus=8, node=node,
               started=started, finished=finished, cronjob=name)


def node(name: str, price: float) -> Instance:
    return Instance(f"i-{name}", "p4d.24xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, InstanceState.RUNNING,
                    NOW - 86400, price, gpus=8, node=name)


def test_median_of_finished_runs_else_the_running_one() -> None:
    cron = CronJob("c1", "nightly", "research", "0 2 * * *", NOW - 30 * 86400, gpus=8)
    assert typical_runtime(cron, [run("nightly", 60), run("nightly", 120), run("nightly", 90)], NOW) == 90 * 60
    assert typical_runtime(cron, [run("nightly", 0, state=JobState.RUNNING)], NOW) == 86400
    assert typical_runtime(cron, [run("other", 60)], NOW) is None


def test_thirty_nightly_runs_of_eight_gpus_for_an_hour() -> None:
    cron = CronJob("c1", "nightly", "research", "0 2 * * *", NOW - 30 * 86400, gpus=8)
    # 30 runs × 1 h × 8 GPUs × ($32/h ÷ 8 GPUs = $4 per GPU-hour) = $960
    small = Budget("research", 500.0, BudgetPeriod.MONTHLY, "namespace:research")
    other = Budget("vision", 100.0, BudgetPeriod.MONTHLY, "namespace:vision")
    lines, warnings = cronjob_costs([cron], [run("nightly", 60)], [node("n1", 32.0)], [small, other], NOW)
    assert [(line.key, round(line.amount, 2)) for line in lines] == [("c1", 960.0)]
    assert len(warnings) == 1 and "research/nightly" in warnings[0] and "research" in warnings[0]
    assert "$960" in warnings[0] and "$500" in warnings[0]
    lines, warnings = cronjob_costs([cron], [], [node("n1", 32.0)], [small], NOW)
    assert lines == () and warnings == (), "no run seen: no guess"
