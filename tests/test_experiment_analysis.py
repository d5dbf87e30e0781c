"""The analysis of known samples: SciPy's own intervals, winners, significance, cost per unit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from gpuconsole.core.ops.experiments.analysis import (
    RESAMPLES,
    _seed,
    analyse,
    cost_per_unit,
    interval,
    runs_to_settle,
    welch_p_value,
)
from gpuconsole.core.ops.experiments.pricing import ArmPrices
from gpuconsole.core.ops.experiments.runs import EVICTED, FAILED, SUCCEEDED, RunRecord
from gpuconsole.core.ops.experiments.spec import parse_text
from tests.test_experiment_spec import EXAMPLE

SPEC = parse_text(EXAMPLE)
PRICES = ArmPrices()


def runs_of(arm_index: int, metrics: list[float], *, state: str = SUCCEEDED) -> list[RunRecord]:
    arm = SPEC.arms[arm_index]
    return [RunRecord(SPEC.name, arm.key, i + 1, 1, f"{arm.key}-{i}", state=state, start=0.0, end=100.0,
                      metric=m, market=arm.market, price_per_hour=PRICES.hourly(arm.instance_type, arm.market),
                      cost=1.0)
            for i, m in enumerate(metrics)]


def test_intervals_are_the_librarys_own() -> None:
    data = [812.0, 790.5, 830.25, 801.0, 845.5]
    ours = interval(data, np.median)
    theirs = stats.bootstrap((np.asarray(data),), np.median, n_resamples=RESAMPLES, confidence_level=0.95,
                             method="percentile", rng=np.random.default_rng(_seed(np.asarray(data, dtype=float))))
    assert ours == (theirs.confidence_interval.low, theirs.confidence_interval.high)
    assert ours[0] <= float(np.median(data)) <= ours[1] and ours[0] < ours[1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=0.5, max_value=5_000.0), min_size=2, max_size=12))
@example(data=[2731.2760062188054] * 3)  # three times one value: its mean, not a sum divided by three
def test_intervals_of_the_mean_are_the_librarys_own_too(data: list[float]) -> None:
    ours = interval(data, np.mean)
    array = np.asarray(data, dtype=float)
    if np.all(array == array[0]):
        assert ours == (data[0], data[0])
        return
    theirs = stats.bootstrap((array,), np.mean, n_resamples=RESAMPLES, confidence_level=0.95,
                             method="percentile", rng=np.random.default_rng(_seed(array)))
    assert ours == pytest.approx((theirs.confidence_interval.low, theirs.confidence_interval.high), rel=1e-12)


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=10_000.0), min_size=2, max_size=10),
       st.lists(st.floats(min_value=1.0, max_value=10_000.0), min_size=2, max_size=10))
def test_welchs_p_value_is_scipys(a: list[float], b: list[float]) -> None:
    left, right = np.asarray(a), np.asarray(b)
    if np.var(left) == 0 and np.var(right) == 0:
        return  # analyse never tests two arms that both measured one value
    theirs = float(stats.ttest_ind(left, right, equal_var=False).pvalue)
    assert welch_p_value(left, right) == pytest.approx(theirs, rel=1e-9, abs=1e-300)


def test_the_console_never_imports_scipy() -> None:
    """scipy.stats alone is about 85 MB resident: an experiment is analysed without it."""
    import subprocess
    import sys

    code = ("import sys; from gpuconsole.core.ops.experiments.analysis import analyse;"
            "from gpuconsole.core.ops.experiments.runs import RunRecord;"
            "from gpuconsole.core.ops.experiments.spec import parse_text;"
            "from tests.test_experiment_spec import EXAMPLE; spec = parse_text(EXAMPLE);"
            "runs = [RunRecord(spec.name, arm.key, k + 1, 1, f'{arm.key}-{k}', state='succeeded', start=0.0,"
            " end=100.0, metric=m * (i + 1)) for i, arm in enumerate(spec.arms) for k, m in enumerate([800.0, 790.0, 830.0])];"
            "result = analyse(spec, runs); assert result.verdicts[1].p_value == result.verdicts[1].p_value;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_one_sample_is_a_point_and_none_is_nan() -> None:
    assert interval([5.0]) == (5.0, 5.0)
    assert all(math.isnan(x) for x in interval([]))


def test_a_clear_winner_is_significant() -> None:
    runs = runs_of(0, [2900.0, 2950.0, 2880.0]) + runs_of(1, [820.0, 835.0, 810.0]) + runs_of(2, [780.0, 790.0, 770.0])
    result = analyse(SPEC, runs, PRICES)
    by = {v.criterion: v for v in result.verdicts}
    assert by["time"].winner == SPEC.arms[0].key and by["time"].significant and by["time"].p_value < 0.05
    # g6 on spot: 0.35 × $0.805/h at ~780 samples/s is the cheapest epoch.
    assert by["cost"].winner == SPEC.arms[2].key and by["cost"].significant
    fastest = result.arm(SPEC.arms[0].key)
    assert fastest is not None and fastest.to_fastest == 1.0 and fastest.to_cheapest > 1.0


def test_overlapping_arms_are_not_significant_and_say_how_many_more_runs() -> None:
    spec = parse_text(EXAMPLE.replace('instance_type = "p4d.24xlarge"', 'instance_type = "g6.xlarge"'))
    g6 = lambda i, ms: [RunRecord(spec.name, spec.arms[i].key, k + 1, 1, f"j{i}{k}", state=SUCCEEDED, start=0.0,  # noqa: E731
                                  end=1.0, metric=m) for k, m in enumerate(ms)]
    runs = g6(0, [780.0, 800.0, 760.0]) + g6(1, [20.0, 21.0, 22.0]) + g6(2, [5.0, 6.0, 5.5])
    result = analyse(spec, runs, PRICES)
    time_verdict = next(v for v in result.verdicts if v.criterion == "time")
    assert time_verdict.winner == spec.arms[0].key  # g6 on-demand, faster than g5 here
    assert time_verdict.significant
    close = g6(0, [780.0, 800.0, 760.0]) + g6(1, [790.0, 770.0, 775.0])
    result = analyse(spec, close, PRICES)
    time_verdict = next(v for v in result.verdicts if v.criterion == "time")
    assert not time_verdict.significant and time_verdict.p_value > 0.05
    assert time_verdict.more_runs is not None and time_verdict.more_runs >= 1
    assert "more runs per arm would likely settle it" in time_verdict.line()


def test_runs_to_settle_follows_the_normal_approximation() -> None:
    a, b = np.array([10.0, 11.0, 12.0]), np.array([11.0, 12.0, 13.0])
    sd = math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert runs_to_settle(a, b) == math.ceil(2 * (z * sd / 1.0) ** 2) - 3
    assert runs_to_settle(a, a.copy()) is None


def test_failed_and_evicted_runs_never_count() -> None:
    runs = runs_of(1, [820.0, 830.0]) + runs_of(1, [10.0], state=FAILED) + runs_of(1, [5.0], state=EVICTED)
    arm = analyse(SPEC, runs, PRICES).arm(SPEC.arms[1].key)
    assert arm is not None and arm.runs == 2 and arm.failed == 2 and arm.median == 825.0
    assert arm.spent == 4.0  # lost runs were still billed


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=50_000.0), min_size=1, max_size=6),
       st.sampled_from(range(3)))
def test_cost_per_unit_is_price_times_time_over_work(rates: list[float], arm_index: int) -> None:
    arm = SPEC.arms[arm_index]
    result = analyse(SPEC, runs_of(arm_index, rates), PRICES).arm(arm.key)
    assert result is not None
    price = PRICES.hourly(arm.instance_type, arm.market)
    seconds = float(np.median([SPEC.work.amount / r for r in rates]))
    assert result.seconds_per_work == pytest.approx(seconds)
    # per unit of work: price × time / work
    assert result.cost_per_work / SPEC.work.amount == pytest.approx(price * (seconds / 3600.0) / SPEC.work.amount)
    assert cost_per_unit(price, seconds, SPEC.work.amount) == pytest.approx(price * seconds / 3600.0 / SPEC.work.amount)
    assert result.on_demand_per_work >= result.spot_per_work
