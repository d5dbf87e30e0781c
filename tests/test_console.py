"""The Console facade: composition, cache across restarts, costs and budgets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpuconsole.core.money import budgets, costs
from gpuconsole.model import (
    Budget,
    BudgetPeriod,
    Instance,
    InstanceState,
    Market,
    Severity,
    SourceKind,
    SourceState,
    Threshold,
    ThresholdBasis,
)
from tests.helpers import START, demo_console, wait_for


def test_console_opens_with_last_known_state_after_restart(tmp_path):
    db = tmp_path / "cache.db"
    first = demo_console(db=db)
    first.start()
    wait_for(lambda: all(s.state is SourceState.LIVE for s in first.snapshot.sources))
    before = first.snapshot
    first.close()

    again = demo_console(db=db)  # not started: nothing has been polled yet
    snap = again.snapshot
    assert {g.uuid for g in snap.gpus} == {g.uuid for g in before.gpus}
    assert {j.uid for j in snap.jobs} == {j.uid for j in before.jobs}
    assert {i.instance_id for i in snap.instances} == {i.instance_id for i in before.instances}
    assert all(s.state is SourceState.STALE and s.error == "cached" for s in snap.sources)
    again.close()


def test_cached_demo_data_never_shows_in_a_real_session(tmp_path):
    db = tmp_path / "cache.db"
    demo = demo_console(db=db)
    demo.start()
    wait_for(lambda: all(s.state is SourceState.LIVE for s in demo.snapshot.sources))
    demo.close()
    real = demo_console(db=db, demo=False)
    assert not real.snapshot.gpus and not real.snapshot.jobs and not real.snapshot.instances
    real.close()


def test_answers_that_change_no_state_are_composed_into_one_snapshot(monkeypatch):
    """Three sources answering one after another make one snapshot once all three have answered,
    not three; one that answers alone is composed after a while; a source that comes up or fails
    is shown at once."""
    from gpuconsole.backends.base import BackendError
    from gpuconsole.core.fleet import coalescer as module

    monkeypatch.setattr(module, "COALESCE_S", 60.0)  # no composition comes by the clock unless asked below
    console = demo_console()  # not started: the test polls each source itself
    seen = []
    console.subscribe(seen.append)
    runners = list(console.hub.runners.values())
    try:
        for runner in runners:  # each first answer changes a state: composed at once
            runner.run_once(runner._poll_fn())
        assert len(seen) == len(runners) and all(s.state is SourceState.LIVE for s in seen[-1].sources)
        for runner in runners[:-1]:  # the next answers change none
            runner.run_once(runner._poll_fn())
        assert len(seen) == len(runners) and console.coalescer.pending, "waiting for the last source"
        runners[-1].run_once(runners[-1]._poll_fn())
        assert len(seen) == len(runners) + 1 and not console.coalescer.pending, "all answered: composed at once"
        composed = seen[-1]
        assert composed.gpus is console.hub.reading(SourceKind.GPUS).gpus
        assert composed.jobs is console.hub.reading(SourceKind.JOBS).jobs
        assert composed.instances[0].instance_id == console.hub.reading(SourceKind.CLOUD).instances[0].instance_id

        monkeypatch.setattr(module, "COALESCE_S", 0.2)
        runners[0].run_once(runners[0]._poll_fn())  # alone this time: composed after the wait
        assert len(seen) == len(runners) + 1
        wait_for(lambda: len(seen) == len(runners) + 2, timeout=10)
        assert seen[-1].gpus is console.hub.reading(SourceKind.GPUS).gpus

        def down():
            raise BackendError("the GPU source is down")

        console.hub.runners[SourceKind.GPUS].run_once(down)
        assert len(seen) == len(runners) + 3 and seen[-1].source(SourceKind.GPUS).state is SourceState.ERROR
        monkeypatch.setattr(module, "COALESCE_S", 60.0)
        runners[-1].run_once(runners[-1]._poll_fn())  # pending when the console stops: never composed
        assert console.coalescer.pending
    finally:
        console.close()
    assert not console.coalescer.pending


def test_the_first_results_of_a_started_console_make_one_snapshot(monkeypatch):
    """As polling starts, every source's first result waits for the others': one composition of
    the whole fleet (and one repaint), not one per source; a source still waiting when half an
    interval has gone by is left to a later snapshot, which shows it at once."""
    from gpuconsole.core.fleet import coalescer as module

    monkeypatch.setattr(module, "COALESCE_S", 60.0)  # no composition comes by the clock
    console = demo_console(interval=1000.0)  # one poll each: the first results alone
    seen = []
    console.subscribe(seen.append)
    try:
        console.start(open_store=False)
        wait_for(lambda: seen and all(s.state is SourceState.LIVE for s in seen[-1].sources), timeout=30)
        assert len(console.hub.runners) >= 3
        # (the console's own checks may publish meanwhile: no snapshot shows some sources and not others)
        assert all(len({s.state for s in snap.sources}) == 1 for snap in seen)
        assert seen[-1].jobs is console.hub.reading(SourceKind.JOBS).jobs
    finally:
        console.close()

    monkeypatch.setattr(module, "COALESCE_S", 0.2)
    console = demo_console(faults="gpus:hang", timeout=30.0, interval=1000.0)
    seen = []
    console.subscribe(seen.append)
    try:
        console.start(open_store=False)
        wait_for(lambda: seen, timeout=30)  # composed by the clock, without the GPUs
        first = seen[0]
        assert first.source(SourceKind.GPUS).state is SourceState.CONNECTING
        assert all(s.state is SourceState.LIVE for s in first.sources if s.kind is not SourceKind.GPUS)
        monkeypatch.setattr(module, "COALESCE_S", 60.0)  # from here on, only a state change composes
        console.hub.runners[SourceKind.GPUS].source.sim.faults.release()
        wait_for(lambda: seen[-1].source(SourceKind.GPUS).state is SourceState.LIVE, timeout=30)
    finally:
        console.close()


def test_a_snapshot_works_out_each_instances_spend_once_per_window(monkeypatch):
    """The day's, the month's and every budget's spend ask the same instances again (the fleet
    budget is the month's spend); within one snapshot each is billed once per window."""
    console = demo_console()
    console.start()
    wait_for(lambda: all(s.state is SourceState.LIVE for s in console.snapshot.sources))
    console.stop()
    billed = []
    real = costs._instance_spend
    monkeypatch.setattr(costs, "_instance_spend", lambda i, start, now: billed.append((i.instance_id, start, now))
                        or real(i, start, now))
    snap = console.compose()
    console.close()
    assert billed and len(billed) == len(set(billed)), "no instance billed twice for one window"
    assert any(b.budget.scope == "all" and b.budget.period is BudgetPeriod.MONTHLY for b in snap.budgets)
    now = snap.taken_at
    assert snap.spend_month == pytest.approx(costs.spend(snap.instances, costs.month_start(now), now))
    fleet = next(b for b in snap.budgets if b.budget.scope == "all" and b.budget.period is BudgetPeriod.MONTHLY)
    assert fleet.spent == pytest.approx(snap.spend_month)


def test_snapshot_sums_spend_and_alerts():
    console = demo_console()
    console.start()
    wait_for(lambda: all(s.state is SourceState.LIVE for s in console.snapshot.sources))
    snap = console.snapshot
    console.close()
    assert snap.demo
    # Every instance whose compute bills now, an Azure VM stopped but not deallocated among them.
    assert any(i.state is InstanceState.STOPPED and i.bills_now for i in snap.instances)
    assert snap.burn_per_hour == pytest.approx(sum(i.price_per_hour for i in snap.instances if i.bills_now))
    assert 0 < snap.spend_today <= snap.spend_month
    assert [b.budget.name for b in snap.budgets] == [b.name for b in budgets.DEMO_BUDGETS]
    severities = [a.severity for a in snap.alerts]
    order = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    assert severities == sorted(severities, key=order.get), "most severe first"


def _instance(state=InstanceState.RUNNING, launch=0.0, price=10.0, accrued=1e9, tags=()) -> Instance:
    return Instance(
        instance_id="i-0123456789abcdef0",
        instance_type="p4de.24xlarge",
        region="us-east-1",
        availability_zone="us-east-1a",
        market=Market.ON_DEMAND,
        state=state,
        launch_time=launch,
        price_per_hour=price,
        gpus=8,
        accrued_cost=accrued,
        node="ip-10-0-0-1.ec2.internal",
        tags=tags,
    )


def test_periods_are_utc_calendar_periods():
    now = datetime(2026, 2, 14, 15, 30, tzinfo=UTC).timestamp()
    assert costs.day_start(now) == datetime(2026, 2, 14, tzinfo=UTC).timestamp()
    assert costs.month_start(now) == datetime(2026, 2, 1, tzinfo=UTC).timestamp()
    assert costs.month_end(now) == datetime(2026, 3, 1, tzinfo=UTC).timestamp()


def test_running_instance_costs_its_overlap_with_the_period():
    now = START
    day = costs.day_start(now)
    inst = _instance(launch=day - 86400 * 3)
    assert costs.instance_spend(inst, day, now) == pytest.approx(10.0 * (now - day) / 3600)
    launched_today = _instance(launch=now - 1800)
    assert costs.instance_spend(launched_today, day, now) == pytest.approx(5.0)


def test_stopped_instance_costs_only_if_it_ran_in_the_period():
    now = START
    day = costs.day_start(now)
    old = _instance(state=InstanceState.STOPPED, launch=day - 86400 * 5, accrued=999.0)
    assert costs.instance_spend(old, day, now) == 0.0
    recent = _instance(state=InstanceState.TERMINATED, launch=now - 7200, accrued=12.5)
    assert costs.instance_spend(recent, day, now) == pytest.approx(12.5)


def test_budget_scope_thresholds_and_forecast():
    now = START
    month = costs.month_start(now)
    nlp = _instance(launch=month, price=100.0, tags=(("Project", "nlp"),))
    other = _instance(launch=month, price=50.0, tags=(("Project", "vision"),))
    hours = (now - month) / 3600
    budget = Budget(name="nlp", amount=100.0 * hours * 1.2, scope="tag:Project=nlp")
    status = budgets.evaluate(budget, [nlp, other], now)
    assert status.spent == pytest.approx(100.0 * hours)
    assert status.burn_per_hour == pytest.approx(100.0)
    assert status.forecast == pytest.approx(100.0 * (costs.month_end(now) - month) / 3600)
    crossed = {(t.percent, t.basis) for t in status.crossed}
    assert crossed == {(50.0, ThresholdBasis.ACTUAL), (80.0, ThresholdBasis.ACTUAL), (100.0, ThresholdBasis.FORECAST)}
    assert "heading for" in budgets.describe_crossing(status)


def test_daily_budget_and_bad_scope():
    now = START
    daily = Budget(name="d", amount=1.0, period=BudgetPeriod.DAILY, thresholds=(Threshold(100.0),))
    status = budgets.evaluate(daily, [_instance(launch=now - 86400 * 10)], now)
    assert status.percent > 100
    assert "over its limit" in budgets.describe_crossing(status)
    with pytest.raises(budgets.ScopeError, match="use all, tag:Key=Value or namespace:NAME"):
        budgets.parse_scope("team=nlp")


def test_store_opened_in_background_seeds_the_cache_and_reports_a_rebuilt_file(tmp_path):
    from gpuconsole.core.fleet.store import Store

    db = tmp_path / "cache.db"
    first = demo_console(db=db)
    first.start()
    wait_for(lambda: all(s.state is SourceState.LIVE for s in first.snapshot.sources))
    first.close()

    # Every source hangs, so only the cache can fill the snapshot.
    console = demo_console(faults="gpus:hang,jobs:hang,cloud:hang")
    console.cache.opener = lambda: Store(db)  # what the full-screen console does
    assert console.store is None and not console.snapshot.gpus
    console.start()
    wait_for(lambda: console.store is not None and bool(console.snapshot.gpus))
    console.hub.runners[SourceKind.GPUS].source.sim.faults.release()
    console.close()

    db.write_bytes(b"this is not a database" * 100)
    broken = demo_console()
    broken.cache.opener = lambda: Store(db)
    broken.start()
    wait_for(lambda: any(a.source == "cache" for a in broken.snapshot.alerts))
    assert any("rebuilt" in a.message for a in broken.snapshot.alerts)
    broken.close()


def test_a_store_that_cannot_open_becomes_an_alert_not_a_crash():
    console = demo_console()

    def refuse():
        raise OSError("disk I/O error\nsecond line")

    console.cache.opener = refuse
    console.start()
    wait_for(lambda: any(a.source == "cache" for a in console.snapshot.alerts))
    alert = next(a for a in console.snapshot.alerts if a.source == "cache")
    assert alert.message == "no cache or history: disk I/O error"
    assert alert.severity is Severity.WARNING
    console.close()


def test_compose_is_a_function_of_its_readings_services_and_time():
    """The same readings and services at a chosen moment make the same figures; the Console
    holds nothing compose needs."""
    from gpuconsole.core.fleet.compose import Readings, compose

    console = demo_console()
    try:
        console.hub.poll_once()
        readings = console.readings()
        now = console.clock() + 3600
        later = compose(readings, console.services, now)
        assert later.taken_at == now
        assert later.gpus is readings.gpus.gpus and later.jobs is readings.jobs.jobs
        assert later.spend_today == pytest.approx(compose(readings, console.services, now).spend_today)
        empty = compose(Readings(None, None, None, ()), console.services, now)
        assert empty.gpus == () and empty.jobs == () and empty.instances == () and empty.sources == ()
    finally:
        console.close()


def test_idle_time_counts_to_when_the_gpus_were_read_not_to_when_the_snapshot_is_made():
    """A GPU reading from before a 31-minute pause says nothing of the 31 minutes: none of its
    idle GPUs is waste until a reading taken after them shows them still idle."""
    from msgspec.structs import replace

    from gpuconsole.core.fleet.compose import Readings, compose

    console = demo_console()
    try:
        console.hub.poll_once()
        readings = console.readings()
        first = readings.gpus.taken_at
        assert compose(readings, console.services, first).idle == ()
        stale = compose(readings, console.services, first + 31 * 60)
        assert stale.idle == ()
        fresh = replace(readings.gpus, taken_at=first + 31 * 60)
        later = compose(Readings(fresh, readings.jobs, readings.cloud, readings.sources), console.services,
                        first + 31 * 60)
        assert later.idle and all(w.idle_since == first for w in later.idle)
    finally:
        console.close()


def test_the_consoles_own_alerts_come_first_and_the_order_is_by_severity():
    from gpuconsole.core.fleet.alerts import HOT_GPU_C, derive_alerts
    from gpuconsole.model import Alert, FleetSnapshot, Gpu

    now = START
    hot = Gpu(uuid="GPU-1", node="n1", index=0, name="H100", utilization=90.0, memory_used_mib=1, memory_total_mib=80,
              temperature_c=HOT_GPU_C, power_w=300.0, power_limit_w=700.0)
    snap = FleetSnapshot(taken_at=now, gpus=(hot,))
    own = Alert(Severity.INFO, "cache", "no cache or history: disk full", now)
    budget = Alert(Severity.CRITICAL, "budget", "team over its limit", now)
    alerts = derive_alerts(snap, [own], (budget,)).alerts
    assert [a.message for a in alerts] == ["team over its limit", f"1 GPU(s) at or above {HOT_GPU_C} °C",
                                           "no cache or history: disk full"]


def test_periodic_jobs_run_at_start_wake_on_demand_and_stop_together():
    import threading

    from gpuconsole.core.fleet.periodic import PeriodicJob, PeriodicJobs

    runs = {"now": 0, "later": 0}
    ran = threading.Event()

    def count(name):
        def run():
            runs[name] += 1
            ran.set()
            if name == "now" and runs[name] == 2:
                raise RuntimeError("a failing run is logged, and the job goes on")
        return run

    jobs = PeriodicJobs()
    jobs.start(PeriodicJob("now", 3600, count("now"), wakeable=True))
    jobs.start(PeriodicJob("later", 3600, count("later"), at_start=False))
    assert jobs.names == ("now", "later")
    wait_for(lambda: runs["now"] == 1)
    jobs.wake()  # only the wakeable one runs early
    wait_for(lambda: runs["now"] == 2)
    jobs.wake()
    wait_for(lambda: runs["now"] == 3)
    assert runs["later"] == 0
    threads = [t for t in threading.enumerate() if t.name in ("now", "later")]
    assert len(threads) == 2
    jobs.stop()
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()
    assert runs["later"] == 0, "stopped before its first time came"


def test_a_started_console_runs_its_named_jobs_and_stop_ends_them():
    import threading

    console = demo_console()
    console.start()
    try:
        assert "key-hygiene" in console.periodic.names
        assert any(t.name == "key-hygiene" for t in threading.enumerate())
    finally:
        console.close()
    wait_for(lambda: not any(t.name == "key-hygiene" for t in threading.enumerate()), timeout=10)
