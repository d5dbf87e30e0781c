"""The cost engine: billing as EC2 bills, attribution, forecasts — every number worked by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from gpuconsole.backends.sim.world import SimWorld
from tests.showcase import START
from gpuconsole.core.money import costs
from gpuconsole.core.money.costs import billed_cost
from gpuconsole.model import (
    BillingSpan,
    Budget,
    BudgetPeriod,
    CronJob,
    Gpu,
    Instance,
    InstanceState,
    Job,
    JobState,
    Market,
    MigMode,
    MigSlice,
)

# $3.60/h is a tenth of a cent a second, so seconds read straight off the dollars.
P = 3.6
CENT_PER_S = P / 3600.0


def span(start: float, end: float | None, price: float = P) -> BillingSpan:
    return BillingSpan(start, end, price)


# --------------------------------------------------------------------------- billing


def test_a_short_run_is_billed_a_minute():
    assert billed_cost([span(100, 130)], 0, 1000) == pytest.approx(60 * CENT_PER_S)


def test_partial_seconds_are_dropped():
    assert billed_cost([span(100, 161.5)], 0, 1000) == pytest.approx(61 * CENT_PER_S)
    assert billed_cost([span(100, 161.999)], 0, 1000) == pytest.approx(61 * CENT_PER_S)
    assert billed_cost([span(0.1, 61.1)], 0, 1000) == pytest.approx(61 * CENT_PER_S), "float noise is not a lost second"


def test_a_stop_and_start_begins_a_new_minimum():
    # 30 s, a gap, 100 s: 60 + 100
    assert billed_cost([span(0, 30), span(100, 200)], 0, 1000) == pytest.approx(160 * CENT_PER_S)
    # two 10 s runs: two minimums
    assert billed_cost([span(0, 10), span(500, 510)], 0, 1000) == pytest.approx(120 * CENT_PER_S)


def test_touching_spans_are_one_run():
    # pending 20 s then running 20 s: one 40 s run, one minimum
    assert billed_cost([span(0, 20), span(20, 40)], 0, 1000) == pytest.approx(60 * CENT_PER_S)
    # order does not matter
    assert billed_cost([span(20, 40), span(0, 20)], 0, 1000) == pytest.approx(60 * CENT_PER_S)


def test_spot_price_change_mid_run():
    assert billed_cost([span(0, 1800, 1.0), span(1800, 3600, 2.0)], 0, 3600) == pytest.approx(0.5 + 1.0)
    # a short run across a change: 20 s at $1, 20 s at $2, and the rest of the minute at the last price
    assert billed_cost([span(0, 20, 1.0), span(20, 40, 2.0)], 0, 1000) == pytest.approx((20 * 1 + 40 * 2) / 3600)


def test_window_clipping():
    assert billed_cost([span(0, 3600)], 1800, 2700) == pytest.approx(900 * CENT_PER_S)
    assert billed_cost([span(0, 3600)], 5000, 6000) == 0.0
    # the minimum belongs to the run's first minute: a window sees its part of that minute
    assert billed_cost([span(100, 130)], 0, 130) == pytest.approx(30 * CENT_PER_S)
    assert billed_cost([span(100, 130)], 130, 1000) == pytest.approx(30 * CENT_PER_S)
    assert billed_cost([span(100, 130)], 160, 1000) == 0.0


def test_open_span_runs_to_the_window_end():
    assert billed_cost([span(0, None)], 0, 90.7) == pytest.approx(90 * CENT_PER_S)
    assert billed_cost([span(0, 50), span(50, None, 7.2)], 0, 100) == pytest.approx((50 * P + 50 * 7.2) / 3600)
    assert billed_cost([span(500, None)], 0, 400) == 0.0, "not started yet within the window"


def test_per_millisecond_billing_has_no_minimum():
    assert billed_cost([span(0, 30)], 0, 1000, per_ms=True) == pytest.approx(30 * CENT_PER_S)
    assert billed_cost([span(0, 0.0305, 3600.0)], 0, 1, per_ms=True) == pytest.approx(0.030)
    assert billed_cost([span(0, 10), span(20, 30)], 0, 100, per_ms=True) == pytest.approx(20 * CENT_PER_S)


def test_empty_and_inverted_windows():
    assert billed_cost([], 0, 100) == 0.0
    assert billed_cost([span(0, 100)], 100, 0) == 0.0


@given(
    runs=st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 400), st.sampled_from([0.5, 1.0, 3.6])),
                  min_size=1, max_size=6),
    cut=st.integers(0, 7000),
)
def test_windows_add_up(runs, cut):
    spans, t = [], 0
    for gap, length, price in runs:
        t += gap
        spans.append(span(t, t + length, price))
        t += length
    whole = billed_cost(spans, 0, 10_000)
    assert billed_cost(spans, 0, cut) + billed_cost(spans, cut, 10_000) == pytest.approx(whole)


def _instance(**kw) -> Instance:
    fields = dict(instance_id="i-1", instance_type="p4d.24xlarge", region="us-east-1", availability_zone="us-east-1a",
                  market=Market.ON_DEMAND, state=InstanceState.RUNNING, launch_time=0.0, price_per_hour=8.0,
                  gpus=8, node="n1")
    fields.update(kw)
    return Instance(**fields)


def test_instance_spend_uses_billing_spans():
    inst = _instance(billing=(span(0, 3600, 8.0), span(7200, None, 8.0)), accrued_cost=999.0)
    assert costs.instance_spend(inst, 0, 10800) == pytest.approx(16.0)  # the stopped hour is free
    assert costs.instance_spend(inst, 3600, 10800) == pytest.approx(8.0)
    # without spans: the approximation (price × overlap, capped at what it accrued)
    assert costs.instance_spend(replace(inst, billing=()), 0, 10800) == pytest.approx(24.0)


def test_simulated_billing_agrees_with_accrued_cost():
    world = SimWorld(seed=7, start=START)
    world.step(120)
    instances = world.cloud_reading().instances
    assert instances and all(i.billing for i in instances)
    for inst in instances:
        assert inst.billing == tuple(sorted(inst.billing, key=lambda s: s.start)), "oldest first"
        assert all(s.end is not None for s in inst.billing[:-1])
        assert (inst.billing[-1].end is None) == inst.state.billed, "only a billed instance has an open span"
        assert billed_cost(inst.billing, 0, world.now) == pytest.approx(inst.accrued_cost, abs=0.01), inst.name
    stopped_once = [i for i in instances if i.name == "dev-a10g-01"][0]
    assert len(stopped_once.billing) == 5  # pending, running, stopping | pending, running
    assert stopped_once.billing[2].end < stopped_once.billing[3].start


def test_simulated_spot_price_change_splits_the_span():
    world = SimWorld(seed=7, start=START)
    spot = [i for i in world.cloud_reading().instances if i.market is Market.SPOT and i.state.billed][0]
    world.step(10)
    world.set_spot_price(spot.instance_type, spot.availability_zone, spot.price_per_hour * 2)
    world.step(3600)
    inst = [i for i in world.cloud_reading().instances if i.instance_id == spot.instance_id][0]
    if not inst.state.billed:
        pytest.skip("interrupted in the hour")  # never with this seed, kept honest for others
    change = START + 10
    assert inst.billing[-2].end == change and inst.billing[-1] == BillingSpan(change, None, spot.price_per_hour * 2)
    assert inst.price_per_hour == spot.price_per_hour * 2
    assert billed_cost(inst.billing, 0, world.now) == pytest.approx(inst.accrued_cost, abs=0.01)
    assert costs.instance_spend(inst, START, world.now) == pytest.approx(
        spot.price_per_hour * 10 / 3600 + 2 * spot.price_per_hour * 3600 / 3600)


def test_simulated_stop_terminate_and_launch_keep_agreeing():
    world = SimWorld(seed=11, start=START)
    on_demand = [i for i in world.cloud_reading().instances if i.market is Market.ON_DEMAND][0]
    world.stop_instance(on_demand.instance_id)
    launched = world.launch_instance("g5.xlarge", "us-east-1a")
    world.step(30)
    world.terminate_instance(launched.instance_id)  # after 30 s: billed a minute by the rules, 30 s by the sim
    world.step(600)
    now = world.now
    for inst in world.cloud_reading().instances:
        assert billed_cost(inst.billing, 0, now) == pytest.approx(inst.accrued_cost, abs=0.05), inst.name
    gone = [i for i in world.cloud_reading().instances if i.instance_id == launched.instance_id][0]
    assert billed_cost(gone.billing, 0, now) == pytest.approx(60 * 1.006 / 3600)


# --------------------------------------------------------------------------- attribution


def _gpu(uuid: str, node: str = "n1", mig: tuple[MigSlice, ...] = ()) -> Gpu:
    return Gpu(uuid, node, 0, "A100", 0.0, 0, 81920, 30, 60.0, 400.0,
               MigMode.ENABLED if mig else MigMode.DISABLED, mig)


HOUR = 3600.0


def test_per_gpu_splits_an_instance_over_its_node_gpus():
    inst = _instance(price_per_hour=8.0, billing=(span(0, None, 8.0),))
    other = _instance(instance_id="i-2", node="n2", price_per_hour=1.0, gpus=1, billing=(span(0, None, 1.0),))
    gpus = [_gpu(f"GPU-{k}") for k in range(4)] + [_gpu("GPU-x", node="n2"), _gpu("GPU-orphan", node="n9")]
    lines = costs.per_gpu([inst, other], gpus, 0, HOUR)
    by_key = {line.key: line for line in lines}
    assert set(by_key) == {"GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-x"}
    assert by_key["GPU-0"].amount == pytest.approx(2.0) and by_key["GPU-0"].per_hour == pytest.approx(2.0)
    assert by_key["GPU-x"].amount == pytest.approx(1.0)
    assert lines[-1].key == "GPU-x", "most expensive first"
    stopped = replace(inst, state=InstanceState.STOPPED, billing=(span(0, 1800, 8.0),))
    assert costs.per_gpu([stopped], gpus[:4], 0, HOUR)[0].per_hour == 0.0


def test_per_mig_slice_by_compute_share():
    slices = (MigSlice("MIG-a", "GPU-0", 1, 0, "3g.40gb", 40960), MigSlice("MIG-b", "GPU-0", 2, 0, "2g.20gb", 20480),
              MigSlice("MIG-c", "GPU-0", 3, 0, "1g.10gb", 10240))
    gpus = [_gpu("GPU-0", mig=slices), _gpu("GPU-1")]
    inst = _instance(price_per_hour=14.0, gpus=2, billing=(span(0, None, 14.0),))  # $7 per GPU-hour
    by_key = {line.key: line for line in costs.per_mig_slice([inst], gpus, 0, 2 * HOUR)}
    assert set(by_key) == {"MIG-a", "MIG-b", "MIG-c"}
    assert by_key["MIG-a"].amount == pytest.approx(14.0 * 3 / 7)  # $14 for the GPU over 2 h
    assert by_key["MIG-b"].per_hour == pytest.approx(2.0)
    assert by_key["MIG-c"].amount == pytest.approx(2.0)
    assert costs.mig_share("3g.40gb") == pytest.approx(3 / 7)
    assert costs.mig_share("1c.3g.40gb") == pytest.approx(1 / 7)
    assert costs.mig_share("7g.80gb") == 1.0
    assert costs.mig_share(None) == 1.0 and costs.mig_share("weird") == 1.0


def _job(name: str, ns: str = "nlp", **kw) -> Job:
    fields = dict(uid=f"uid-{name}", name=name, namespace=ns, state=JobState.RUNNING, created=0.0, gpus=1, node="n1",
                  started=0.0)
    fields.update(kw)
    return Job(**fields)


def test_per_job_and_per_namespace():
    inst = _instance(price_per_hour=32.0, gpus=8)  # $4 per GPU-hour
    jobs = [
        _job("train", gpus=2, started=0.0, finished=1800.0, state=JobState.SUCCEEDED),  # 2 × 0.5 h × 4 = 4
        _job("eval", gpus=1, mig_profile="3g.40gb", started=0.0),  # 3/7 × 1 h × 4, still running
        _job("late", ns="vision", gpus=4, started=3000.0),  # 4 × 600 s × 4 / 3600 = 2.667
        _job("early", ns="vision", gpus=1, started=-3600.0, finished=-1800.0, state=JobState.FAILED),  # outside
        _job("queued", state=JobState.PENDING, started=None, node=None),
        _job("homeless", node="gone"),
    ]
    by_key = {line.key: line for line in costs.per_job(jobs, [inst], 0, HOUR)}
    assert set(by_key) == {"nlp/train", "nlp/eval", "vision/late", "vision/early"}
    assert by_key["nlp/train"].amount == pytest.approx(4.0) and by_key["nlp/train"].per_hour == 0.0
    assert by_key["nlp/eval"].amount == pytest.approx(4 * 3 / 7) and by_key["nlp/eval"].per_hour == pytest.approx(12 / 7)
    assert by_key["vision/late"].amount == pytest.approx(8 / 3) and by_key["vision/late"].per_hour == pytest.approx(16.0)
    assert by_key["vision/early"].amount == 0.0
    ns = {line.key: line for line in costs.per_namespace(jobs, [inst], 0, HOUR)}
    assert ns["nlp"].amount == pytest.approx(4.0 + 12 / 7) and ns["vision"].amount == pytest.approx(8 / 3)
    assert ns["vision"].dimension == "namespace" and ns["vision"].per_hour == pytest.approx(16.0)


def test_per_tag_with_untagged():
    a = _instance(instance_id="i-a", tags=(("Owner", "alice"),), billing=(span(0, None, 8.0),))
    b = _instance(instance_id="i-b", tags=(("Owner", "alice"),), price_per_hour=2.0, billing=(span(0, 1800, 2.0),),
                  state=InstanceState.STOPPED)
    c = _instance(instance_id="i-c", price_per_hour=1.0, billing=(span(0, None, 1.0),))
    lines = costs.per_tag([a, b, c], "Owner", 0, HOUR)
    assert [(line.dimension, line.key) for line in lines] == [("tag:Owner", "alice"), ("tag:Owner", "(untagged)")]
    assert lines[0].amount == pytest.approx(9.0) and lines[0].per_hour == pytest.approx(8.0)
    assert lines[1].amount == pytest.approx(1.0) and lines[1].per_hour == pytest.approx(1.0)


# --------------------------------------------------------------------------- forecasts

NOW = datetime(2026, 11, 16, 14, 0, tzinfo=UTC).timestamp()
HOURS_LEFT = 14 * 24 + 10  # to 1 December 00:00 UTC


def test_month_end_forecast_from_the_burn_rate():
    assert costs.month_end_forecast(1000.0, 10.0, NOW) == pytest.approx(1000 + 10 * HOURS_LEFT)


def test_month_end_forecast_blends_in_history():
    day = [(NOW - 86400, 500.0), (NOW - 43200, 740.0), (NOW, 980.0)]  # $20/h over a day: half the blend
    assert costs.month_end_forecast(1000.0, 10.0, NOW, day) == pytest.approx(1000 + 15 * HOURS_LEFT)
    half_day = [(NOW - 43200, 740.0), (NOW, 980.0)]  # a quarter
    assert costs.month_end_forecast(1000.0, 10.0, NOW, half_day) == pytest.approx(1000 + 12.5 * HOURS_LEFT)
    last_month = [(NOW - 40 * 86400, 0.0), (NOW - 20 * 86400, 99999.0)]
    assert costs.month_end_forecast(1000.0, 10.0, NOW, last_month) == pytest.approx(1000 + 10 * HOURS_LEFT)


def _cron(schedule: str, **kw) -> CronJob:
    fields = dict(uid="cj", name="nightly", namespace="nlp", schedule=schedule, created=0.0, gpus=2)
    fields.update(kw)
    return CronJob(**fields)


def test_cronjob_monthly_cost():
    assert costs.cronjob_runs(_cron("0 2 * * *"), NOW, NOW + 30 * 86400) == 30
    assert costs.cronjob_monthly_cost(_cron("0 2 * * *"), 3600, 4.0, NOW) == pytest.approx(30 * 1 * 2 * 4.0)
    assert costs.cronjob_monthly_cost(_cron("*/15 * * * *", gpus=1), 600, 6.0, NOW) == pytest.approx(2880 * 1.0)
    mig = _cron("0 */6 * * *", gpus=1, mig_profile="1g.10gb")
    assert costs.cronjob_monthly_cost(mig, 1800, 7.0, NOW) == pytest.approx(120 * 0.5 * 1.0)
    assert costs.cronjob_monthly_cost(_cron("0 2 * * *", suspended=True), 3600, 4.0, NOW) == 0.0
    # Mondays at 09:00: 16 Nov 2026 is a Monday, 14:00 is past it — 4 more within 30 days
    assert costs.cronjob_runs(_cron("0 9 * * 1"), NOW, NOW + 30 * 86400) == 4


def test_cronjob_breaks_budget():
    nightly = _cron("0 2 * * *")  # $8 a run, $240 in 30 days
    monthly = Budget("team", 200.0)
    assert costs.cronjob_breaks_budget(nightly, 3600, 4.0, monthly, NOW) == (
        "CronJob nlp/nightly (0 2 * * *) alone costs $240 in 30 days (30 runs), over budget team's $200")
    assert costs.cronjob_breaks_budget(nightly, 3600, 4.0, replace(monthly, amount=300.0), NOW) is None
    daily = Budget("daily", 5.0, period=BudgetPeriod.DAILY)
    assert "in a day (1 runs)" in (costs.cronjob_breaks_budget(nightly, 3600, 4.0, daily, NOW) or "")
    custom = Budget("sprint", 50.0, period=BudgetPeriod.CUSTOM, starts=NOW - 86400, ends=NOW + 5 * 86400)
    assert costs.cronjob_breaks_budget(nightly, 3600, 4.0, custom, NOW) is None  # 5 runs, $40


def test_cronjob_schedules_kubernetes_accepts():
    assert costs.cronjob_runs(_cron("@hourly"), NOW, NOW + 86400) == 24
    assert costs.cronjob_runs(_cron("CRON_TZ=UTC 0 2 * * *"), NOW, NOW + 7 * 86400) == 7
    with pytest.raises(ValueError, match="nlp/nightly: bad schedule"):
        costs.cronjob_runs(_cron("0 0 30 2 *"), NOW, NOW + 86400)


def _runs_one_by_one(schedule: str, start: float, end: float) -> int:
    from cronsim import CronSim

    runs = 0
    for when in CronSim(schedule, datetime.fromtimestamp(start, UTC)):
        if when.timestamp() > end:
            return runs
        runs += 1
    return runs


@settings(deadline=None, max_examples=40)
@given(
    schedule=st.sampled_from(["*/3 * * * *", "*/7 3-5 * * *", "0 9 * * 1", "0 0 L * *", "30 1 1,15 * *",
                              "15 */2 * 2,3 *", "59 23 31 * *", "0 0 * * 1-5"]),
    start_min=st.integers(0, 400 * 1440),
    length_min=st.integers(1, 31 * 1440),
)
def test_runs_are_counted_as_one_by_one(schedule, start_min, length_min):
    start = NOW + 60.0 * start_min
    end = start + 60.0 * length_min
    assert costs.cronjob_runs(_cron(schedule), start, end) == _runs_one_by_one(schedule, start, end)
