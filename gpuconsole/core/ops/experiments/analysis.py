"""Per-arm results of an experiment, and which arm wins on cost, on time and on the index.

The statistics are the textbook ones, computed without SciPy (whose ``scipy.stats`` alone
weighs about 85 MB resident in a console that otherwise stays near 250 MB on a big fleet);
tests check each against SciPy's own answer:

* the 95 % confidence intervals of the median and the mean are the percentile bootstrap, drawn
  exactly as ``scipy.stats.bootstrap`` draws it (the same resamples from a generator seeded from
  the data, the same quantiles), so the same runs always give the same interval;
* whether the best arm beats the runner-up is Welch's t-test on the per-run figures at
  :data:`ALPHA`, its two-sided p-value the regularized incomplete beta function of mpmath
  (``I_x(df/2, 1/2)``, ``x = df / (df + t²)``, which is Student's t tail); where it does not,
  the runs each arm would need for an 80 % chance to see the observed difference come from the
  normal approximation of the two-sample test (the standard library's ``NormalDist``).

Cost per unit of work is ``price × time / work``: ``time`` is the seconds one run's work takes
(the work divided by a rate metric, the metric itself for wall time, else the run's wall time),
and the price is the node's $/h in a market. The calculator's price-performance index ranks
cost × time, lower first.
"""

from __future__ import annotations

import math
import statistics
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpuconsole.core.ops.experiments.pricing import ArmPrices
from gpuconsole.core.ops.experiments.runs import LOST_STATES, PENDING, RUNNING, SUCCEEDED, RunRecord
from gpuconsole.core.ops.experiments.spec import Arm, ExperimentSpec

ALPHA = 0.05
POWER = 0.80
CONFIDENCE = 0.95
RESAMPLES = 2000


def cost_per_unit(price_per_hour: float, seconds: float, work: float) -> float:
    """$ per unit of work: ``price × time / work`` (time in hours)."""
    return price_per_hour * (seconds / 3600.0) / work


def interval(values: Sequence[float], statistic: Callable[..., float] = np.median) -> tuple[float, float]:
    """The 95 % percentile-bootstrap interval of ``statistic`` over ``values`` (a point for
    fewer than two): :data:`RESAMPLES` resamples drawn at once from a generator seeded from the
    data, as ``scipy.stats.bootstrap(..., method="percentile")`` draws them."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (math.nan, math.nan)
    if data.size < 2 or np.all(data == data[0]):
        point = float(data[0])  # one value, or one value many times: its mean and median, exactly
        return (point, point)
    rng = np.random.default_rng(_seed(data))
    picks = rng.integers(0, data.size, (RESAMPLES, data.size))
    estimates = statistic(data[picks], axis=-1)
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(estimates, [tail, 1 - tail])
    return (float(low), float(high))


def welch_p_value(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sided p-value of Welch's t-test (unequal variances) of ``a`` against ``b``."""
    va, vb = float(np.var(a, ddof=1)) / a.size, float(np.var(b, ddof=1)) / b.size
    t = (float(np.mean(a)) - float(np.mean(b))) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    import mpmath  # pure Python, a few MB: only when an experiment is analysed

    return float(mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))


def _seed(data: np.ndarray) -> int:
    return zlib.crc32(np.round(data, 9).tobytes())


@dataclass(frozen=True, slots=True)
class ArmResult:
    """What one arm measured. Money in dollars, time in seconds, per ``work`` of the spec."""

    arm: Arm
    runs: int
    failed: int
    running: int
    pending: int
    spent: float
    median: float
    mean: float
    median_ci: tuple[float, float]
    mean_ci: tuple[float, float]
    seconds_per_work: float
    cost_per_work: float  # in the arm's own market
    cost_ci: tuple[float, float]
    on_demand_per_work: float
    spot_per_work: float
    price_per_hour: float
    to_fastest: float = math.nan
    to_cheapest: float = math.nan
    cost_samples: tuple[float, ...] = ()
    time_samples: tuple[float, ...] = ()

    @property
    def has_results(self) -> bool:
        return self.runs > 0


@dataclass(frozen=True, slots=True)
class Verdict:
    """Which arm wins on one criterion (lower is better) and whether the data settle it.

    Attributes:
        more_runs: where not significant, runs per arm that would likely settle it; None when
            the two arms measured the same so far (no number of runs would).
    """

    criterion: str
    winner: str
    runner_up: str
    p_value: float
    significant: bool
    more_runs: int | None

    def line(self) -> str:
        if not self.runner_up:
            return f"{self.criterion}: {self.winner or 'no result yet'}"
        if self.significant:
            p = "p<0.001" if self.p_value < 0.001 else f"p={self.p_value:.3f}"
            return f"{self.criterion}: {self.winner} (significant over {self.runner_up}, {p})"
        more = f"about {self.more_runs} more runs per arm would likely settle it" if self.more_runs else \
            "no difference seen"
        return f"{self.criterion}: {self.winner} (not significant over {self.runner_up}; {more})"


@dataclass(frozen=True, slots=True)
class Analysis:
    spec: ExperimentSpec
    arms: tuple[ArmResult, ...]
    verdicts: tuple[Verdict, ...]
    spent: float
    price_source: str

    def arm(self, key: str) -> ArmResult | None:
        return next((a for a in self.arms if a.arm.key == key), None)


def seconds_for_work(spec: ExperimentSpec, run: RunRecord) -> float | None:
    """Seconds the spec's work took in ``run``."""
    if run.metric is None:
        return None
    if spec.metric.is_rate:
        return spec.work.amount / run.metric if run.metric > 0 else None
    if spec.metric.wall_time:
        return run.metric
    return run.seconds


def analyse(spec: ExperimentSpec, runs: Sequence[RunRecord], prices: ArmPrices | None = None) -> Analysis:
    """Per-arm figures and the verdicts, from the runs recorded so far."""
    prices = prices or ArmPrices()
    results = [_arm_result(spec, arm, [r for r in runs if r.arm == arm.key and r.repeat > 0], prices)
               for arm in spec.arms]
    done = [a for a in results if a.has_results]
    if done:
        fastest = min(a.seconds_per_work for a in done)
        cheapest = min(a.cost_per_work for a in done)
        results = [_with_ratios(a, fastest, cheapest) for a in results]
    verdicts = (
        _verdict("cost", [(a.arm.key, a.cost_samples) for a in results]),
        _verdict("time", [(a.arm.key, a.time_samples) for a in results]),
        _verdict("index", [(a.arm.key, tuple(c * t / 3600.0 for c, t in zip(a.cost_samples, a.time_samples, strict=True)))
                           for a in results]),
    )
    return Analysis(spec, tuple(results), verdicts, sum(r.cost for r in runs), prices.source)


def _with_ratios(a: ArmResult, fastest: float, cheapest: float) -> ArmResult:
    if not a.has_results:
        return a
    return replace(a, to_fastest=a.seconds_per_work / fastest if fastest else math.nan,
                   to_cheapest=a.cost_per_work / cheapest if cheapest else math.nan)


def _arm_result(spec: ExperimentSpec, arm: Arm, runs: list[RunRecord], prices: ArmPrices) -> ArmResult:
    good = [r for r in runs if r.counts]
    metrics = [float(r.metric) for r in good if r.metric is not None]
    seconds = [s for r in good if (s := seconds_for_work(spec, r)) is not None]
    price = prices.hourly(arm.instance_type, arm.market)
    costs = [cost_per_unit(price, s, 1.0) for s in seconds]  # per run's work
    nan = math.nan
    median_time = float(np.median(seconds)) if seconds else nan
    return ArmResult(
        arm=arm, runs=len(good),
        failed=sum(1 for r in runs if r.state in LOST_STATES or (r.state == SUCCEEDED and r.metric is None)),
        running=sum(1 for r in runs if r.state == RUNNING),
        pending=sum(1 for r in runs if r.state == PENDING),
        spent=sum(r.cost for r in runs),
        median=float(np.median(metrics)) if metrics else nan,
        mean=float(np.mean(metrics)) if metrics else nan,
        median_ci=interval(metrics, np.median), mean_ci=interval(metrics, np.mean),
        seconds_per_work=median_time,
        cost_per_work=cost_per_unit(price, median_time, 1.0) if seconds else nan,
        cost_ci=interval(costs, np.median),
        on_demand_per_work=cost_per_unit(prices.on_demand(arm.instance_type), median_time, 1.0) if seconds else nan,
        spot_per_work=cost_per_unit(prices.spot_price(arm.instance_type), median_time, 1.0) if seconds else nan,
        price_per_hour=price, cost_samples=tuple(costs), time_samples=tuple(seconds),
    )


def _verdict(criterion: str, samples: list[tuple[str, tuple[float, ...]]]) -> Verdict:
    """The arm with the lowest median of ``criterion``, tested against the next one."""
    ranked = sorted(((float(np.median(s)), key, s) for key, s in samples if s), key=lambda t: t[0])
    if not ranked:
        return Verdict(criterion, "", "", math.nan, False, None)
    best = ranked[0]
    if len(ranked) == 1:
        return Verdict(criterion, best[1], "", math.nan, False, None)
    second = ranked[1]
    a, b = np.asarray(best[2]), np.asarray(second[2])
    p_value = math.nan
    if a.size >= 2 and b.size >= 2 and (np.var(a) > 0 or np.var(b) > 0):
        p_value = welch_p_value(a, b)
    significant = not math.isnan(p_value) and p_value < ALPHA
    more = None if significant else runs_to_settle(a, b)
    return Verdict(criterion, best[1], second[1], p_value, significant, more)


def runs_to_settle(a: np.ndarray, b: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """More runs per arm for a ``power`` chance of seeing the observed difference at ``alpha``.

    n = 2 ((z₁₋α/₂ + z_power) / d)², d the difference in means over the pooled deviation.
    None when the means are equal.
    """
    diff = abs(float(np.mean(a)) - float(np.mean(b)))
    if diff == 0:
        return None
    spread = math.sqrt((float(np.var(a, ddof=1)) if a.size > 1 else 0.0) / 2
                       + (float(np.var(b, ddof=1)) if b.size > 1 else 0.0) / 2)
    have = min(a.size, b.size)
    if spread == 0:
        return max(2 - have, 1)
    normal = statistics.NormalDist()
    z = normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)
    need = math.ceil(2 * (z * spread / diff) ** 2)
    return max(need - have, 1)
