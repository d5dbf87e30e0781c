"""Experiments against the Kubernetes API test server: the official client submits every run,
the server says how each ended and serves its log."""

from __future__ import annotations

from gpuconsole.core.ops.actions import ActionKind, ActionLog
from gpuconsole.core.ops.experiments.pricing import ArmPrices
from gpuconsole.core.ops.experiments.runner import ExperimentRunner
from gpuconsole.core.ops.experiments.store import ExperimentStore
from gpuconsole.core.ops.experiments.spec import parse_text
from gpuconsole.core.ops.job_ops import JobOps
from tests.helpers import FrozenClock
from tests.experiment_cluster import finish, submitted
from tests.test_experiment_spec import EXAMPLE

NS = "ml-vision"
RATES = {"p4d": 2900.0, "g5": 830.0, "g6": 780.0}


def runner_on(kube, text: str = EXAMPLE, log: ActionLog | None = None) -> tuple[ExperimentRunner, ActionLog, ExperimentStore]:
    backend = kube.backend(watch=False)
    actions = log or ActionLog()
    clock = FrozenClock(1_700_000_000.0)
    store = ExperimentStore()
    runner = ExperimentRunner(parse_text(text), JobOps(backend, clock, actions), store,
                              lambda: backend.poll_jobs().jobs, source=text, prices=ArmPrices(), owner="ana",
                              clock=clock)
    return runner, actions, store


def finish_all(kube, names: list[str], *, fail: frozenset[str] = frozenset(), no_metric: frozenset[str] = frozenset(),
               seconds: float = 600.0) -> None:
    for name in names:
        rate = RATES[name.split("-")[2]]
        log = ("epoch 1/1", "step 5000 loss 1.21") if name in no_metric else \
            ("epoch 1/1", f"samples/s: {rate - 1:.1f}", f"samples/s: {rate:.1f}")
        finish(kube.server, name, NS, log=log, failed=name in fail, seconds=seconds,
               node=f"node-{name.split('-')[2]}")


def new_names(kube, seen: set[str]) -> list[str]:
    names = [j["metadata"]["name"] for j in submitted(kube.server, NS)]
    fresh = [n for n in names if n not in seen]
    seen.update(fresh)
    return fresh


def test_three_arms_submit_jobs_with_their_node_selectors_and_labels(kube) -> None:
    runner, actions, _store = runner_on(kube)
    assert runner.tick()
    jobs = submitted(kube.server, NS)
    assert len(jobs) == 3  # round 1: one run of each arm
    pinned = {j["spec"]["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] for j in jobs}
    assert pinned == {"p4d.24xlarge", "g5.xlarge", "g6.xlarge"}
    for job, arm in zip(jobs, runner.spec.arms, strict=True):
        labels = job["spec"]["template"]["metadata"]["labels"]
        assert labels["gpuconsole.io/experiment"] == "resnet50-epoch"
        assert labels["gpuconsole.io/arm"] == arm.key and labels["gpuconsole.io/repeat"] == "1"
        assert job["metadata"]["labels"]["gpuconsole.io/arm"] == arm.key
    assert jobs[2]["spec"]["template"]["spec"]["nodeSelector"]["karpenter.sh/capacity-type"] == "spot"
    assert [r.request.kind for r in actions.recent()] == [ActionKind.SUBMIT_JOB] * 3
    assert runner.tick() and len(submitted(kube.server, NS)) == 3  # round 2 waits for round 1


def test_metrics_come_from_the_logs_and_rounds_interleave(kube) -> None:
    runner, _actions, store = runner_on(kube)
    seen: set[str] = set()
    orders = []
    while runner.tick():
        fresh = new_names(kube, seen)
        orders.append([n.split("-")[2] for n in fresh])
        finish_all(kube, fresh)
    assert orders[:3] == [["p4d", "g5", "g6"], ["g5", "g6", "p4d"], ["g6", "p4d", "g5"]]
    runs = store.runs("resnet50-epoch")
    assert len(runs) == 9 and all(r.counts for r in runs)
    assert {r.metric for r in runs if r.arm.startswith("g5")} == {830.0}  # the last figure of the log
    assert {r.node for r in runs if r.arm.startswith("p4d")} == {"node-p4d"}
    p4d = next(r for r in runs if r.arm.startswith("p4d"))
    assert abs(p4d.cost - p4d.price_per_hour * 600 / 3600) < 1e-9  # billed node time
    analysis = runner.analysis()
    assert all(a.runs == 3 for a in analysis.arms)
    assert store.experiment("resnet50-epoch").state == "done"


def test_a_failed_run_is_retried_once_and_excluded(kube) -> None:
    text = EXAMPLE.replace("repeats = 3", "repeats = 1")
    runner, _actions, store = runner_on(kube, text)
    seen: set[str] = set()
    runner.tick()
    first = new_names(kube, seen)
    g5 = next(n for n in first if "-g5-" in n)
    g6 = next(n for n in first if "-g6-" in n)
    finish_all(kube, first, fail=frozenset({g5}), no_metric=frozenset({g6}))
    assert runner.tick()
    retries = new_names(kube, seen)
    assert sorted(retries) == sorted([g5[:-1] + "2", g6[:-1] + "2"])
    finish_all(kube, [r for r in retries if "-g5-" in r], fail=frozenset(retries))
    finish_all(kube, [r for r in retries if "-g6-" in r])
    assert not runner.tick()
    assert new_names(kube, seen) == []  # no third try
    runs = {r.job: r for r in store.runs(runner.spec.name)}
    assert runs[g5].state == "failed" and runs[g6].state == "failed" and "no samples/s" in runs[g6].message
    analysis = runner.analysis()
    by = {a.arm.instance_type: a for a in analysis.arms}
    assert by["g5.xlarge"].runs == 0 and by["g5.xlarge"].failed == 2
    assert by["g6.xlarge"].runs == 1 and by["g6.xlarge"].failed == 1 and by["g6.xlarge"].median == 780.0


def test_max_cost_stops_new_runs(kube) -> None:
    # Round 1 costs about $5.68 (a p4d run of 600 s is $5.46 of it); with $8 allowed, round 2 takes
    # g5 and g6 (cents each) and stops before its p4d run, which would pass the budget.
    runner, _actions, store = runner_on(kube, EXAMPLE.replace("max_cost = 200", "max_cost = 8"))
    seen: set[str] = set()
    runner.tick()
    finish_all(kube, new_names(kube, seen))
    assert runner.tick()  # g5 and g6 of round 2 are live
    second = new_names(kube, seen)
    assert sorted(n.split("-")[2] for n in second) == ["g5", "g6"]
    row = store.experiment(runner.spec.name)
    assert row.state == "budget" and "max_cost $8.00 reached" in row.message
    finish_all(kube, second)
    assert not runner.tick()
    assert new_names(kube, seen) == []
    assert sum(r.cost for r in store.runs(runner.spec.name)) <= 8


def test_a_denied_role_submits_nothing_and_is_audited(kube) -> None:
    class NoSubmit:
        recorded: list = []

        def admit(self, request) -> None:
            from gpuconsole.core.ops.actions import ActionError
            raise ActionError(f"auditors cannot {request.kind.value}")

        def record(self, result) -> None:
            self.recorded.append(result)

    guard = NoSubmit()
    runner, _actions, _store = runner_on(kube, log=ActionLog(guard=guard))
    import pytest

    from gpuconsole.core.ops.actions import ActionDenied
    with pytest.raises(ActionDenied):
        runner.tick()
    assert submitted(kube.server, NS) == []
    assert guard.recorded and not guard.recorded[0].ok


def test_two_consoles_on_one_experiment_submit_each_run_once(kube) -> None:
    first, _a, store = runner_on(kube)
    backend = kube.backend(watch=False)
    second = ExperimentRunner(first.spec, JobOps(backend, first.clock, ActionLog()), ExperimentStore(),
                              lambda: backend.poll_jobs().jobs, source=EXAMPLE, owner="bo", clock=first.clock)
    first.tick()
    second.tick()  # the same round: the cluster says the Jobs exist, so they are followed, not failed
    assert len(submitted(kube.server, NS)) == 6 and len(kube.server.objects("Job")) == 3
    assert all(r.state == "pending" for r in second.store.runs(first.spec.name))
    finish_all(kube, [j["metadata"]["name"] for j in kube.server.objects("Job")])
    second.tick()  # round 1 read from the logs; round 2 submitted
    assert all(r.counts for r in second.store.runs(first.spec.name) if r.repeat == 1)
    assert len(store.runs(first.spec.name)) == 3


def test_runs_are_followed_through_the_watch(kube) -> None:
    from tests.kube_server import wait_until

    backend = kube.backend(watch=True)
    clock = FrozenClock(1_700_000_000.0)
    runner = ExperimentRunner(parse_text(EXAMPLE.replace("repeats = 3", "repeats = 1")), JobOps(backend, clock),
                              ExperimentStore(), lambda: backend.poll_jobs().jobs, source=EXAMPLE, clock=clock)
    runner.tick()
    names = [j["metadata"]["name"] for j in submitted(kube.server, NS)]
    wait_until(lambda: len(backend.poll_jobs().jobs) == 3)
    finish_all(kube, names)
    wait_until(lambda: not runner.tick())
    assert all(r.counts for r in runner.store.runs(runner.spec.name))


def test_an_arm_whose_price_nobody_knows_never_passes_max_cost(kube) -> None:
    """A price that cannot be known is NaN, not 0: with a cap, that arm's run is not submitted."""
    import math

    class NoG6Price(ArmPrices):
        def hourly(self, instance_type: str, market: str) -> float:
            return math.nan if instance_type.startswith("g6") else super().hourly(instance_type, market)

    backend = kube.backend(watch=False)
    clock = FrozenClock(1_700_000_000.0)
    store = ExperimentStore()
    runner = ExperimentRunner(parse_text(EXAMPLE), JobOps(backend, clock, ActionLog()), store,
                              lambda: backend.poll_jobs().jobs, source=EXAMPLE, prices=NoG6Price(), owner="ana",
                              clock=clock)
    runner.tick()
    names = [j["metadata"]["name"] for j in submitted(kube.server, NS)]
    assert names and not any("-g6-" in n for n in names)
    row = store.experiment(runner.spec.name)
    assert row.state == "budget" and "the price of" in row.message and "is unknown" in row.message
