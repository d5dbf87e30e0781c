"""An experiment's result as JSON and CSV, the same for ``experiment show`` and the pane's export.

Numbers that are not known yet (an arm without a result) are ``null`` in JSON and empty in CSV,
never ``NaN``, so any JSON reader and any spreadsheet read them.
"""

from __future__ import annotations

import math
from typing import Any, TextIO

from gpuconsole.core.csv_cells import write_rows
from gpuconsole.core.ops.experiments.analysis import Analysis, ArmResult
from gpuconsole.core.ops.experiments.book import Progress


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6)
    if isinstance(value, tuple | list):
        return [_clean(v) for v in value]
    return value


ARM_FIELDS = ("runs", "failed", "running", "pending", "spent", "median", "mean", "median_ci", "mean_ci",
              "seconds_per_work", "cost_per_work", "cost_ci", "on_demand_per_work", "spot_per_work",
              "price_per_hour", "to_fastest", "to_cheapest")


def arm_json(a: ArmResult) -> dict[str, Any]:
    out: dict[str, Any] = {"arm": a.arm.key, "instance_type": a.arm.instance_type, "market": a.arm.market,
                           "gpus": a.arm.gpus or None, "mig_profile": a.arm.mig_profile or None}
    out.update({f: _clean(getattr(a, f)) for f in ARM_FIELDS})
    return out


def analysis_json(analysis: Analysis, progress: Progress) -> dict[str, Any]:
    spec = analysis.spec
    return {
        "name": spec.name, "state": progress.state, "namespace": spec.namespace,
        "results": progress.done, "planned": progress.planned, "spent": _clean(analysis.spent),
        "max_cost": spec.max_cost,
        "metric": {"unit": spec.metric.unit, "better": spec.metric.better, "wall_time": spec.metric.wall_time},
        "work": {"amount": spec.work.amount, "unit": spec.work.unit, "per": spec.work.label},
        "arms": [arm_json(a) for a in analysis.arms],
        "winners": [{"criterion": v.criterion, "winner": v.winner, "runner_up": v.runner_up,
                     "p_value": _clean(v.p_value), "significant": v.significant, "more_runs": v.more_runs}
                    for v in analysis.verdicts],
        "prices": analysis.price_source,
    }


def write_csv(analysis: Analysis, out: TextIO) -> None:
    """One row per arm; a text cell that would start a spreadsheet formula is written as text."""
    header = ["arm", "instance_type", "market", *[f for f in ARM_FIELDS if not f.endswith("_ci")],
              "median_ci_low", "median_ci_high", "cost_ci_low", "cost_ci_high"]

    def line(a: ArmResult) -> list[object]:
        row = arm_json(a)
        return [row["arm"], row["instance_type"], row["market"], *[row[f] for f in ARM_FIELDS if not f.endswith("_ci")],
                *(row["median_ci"] or [None, None]), *(row["cost_ci"] or [None, None])]

    write_rows(out, [header, *(line(a) for a in analysis.arms)])
