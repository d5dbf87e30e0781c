"""A measured arm as the cost calculator's cloud inputs: its speed and its prices, with their source.

The calculator asks for one cloud GPU's speed relative to a reference GPU and a price per
GPU-hour. From an experiment, the reference is the file's first arm (the one the others are
compared with), a GPU's speed is the arm's work per second divided by the GPUs it used, and the
prices are the arm's node price per hour, on-demand and spot, divided by those GPUs. Every other
input (the work, the own server) stays what the calculator had, so a preset is never changed:
only the fields filled here differ, and ``cloud_label`` says where they came from.
"""

from __future__ import annotations

import math
from dataclasses import replace


from gpuconsole.core.money.calculator import CostInputs
from gpuconsole.core.ops.experiments.analysis import Analysis, ArmResult
from gpuconsole.core.ops.experiments.pricing import ArmPrices


class NotMeasured(ValueError):
    """The arm has no result yet; the message is one line."""


def per_gpu_rate(analysis: Analysis, arm: ArmResult) -> float:
    gpus = max(analysis.spec.arm_gpus(arm.arm), 1)
    return analysis.spec.work.amount / arm.seconds_per_work / gpus


def measured_inputs(analysis: Analysis, arm_key: str, base: CostInputs, prices: ArmPrices | None = None) -> CostInputs:
    """``base`` with the cloud speed, GPU count and prices of the measured arm ``arm_key``.

    Raises:
        NotMeasured: the arm or the reference arm has no result yet.
    """
    prices = prices or ArmPrices()
    arm = analysis.arm(arm_key)
    reference = analysis.arms[0] if analysis.arms else None
    if arm is None or not arm.has_results or math.isnan(arm.seconds_per_work):
        raise NotMeasured(f"{arm_key}: no result yet to use")
    if reference is None or not reference.has_results:
        raise NotMeasured(f"the reference arm {analysis.spec.arms[0].title} has no result yet")
    gpus = max(analysis.spec.arm_gpus(arm.arm), 1)
    speed = per_gpu_rate(analysis, arm) / per_gpu_rate(analysis, reference)
    on_demand = prices.on_demand(arm.arm.instance_type) / gpus
    spot = prices.spot_price(arm.arm.instance_type) / gpus
    label = (f"measured: {arm.arm.title} in {analysis.spec.name}, speed vs {reference.arm.title}")
    return replace(base, cloud_speed=round(speed, 4), cloud_gpus=gpus, gpu_hour_price=round(on_demand, 5),
                   spot_gpu_hour_price=round(spot, 5), cloud_label=label)
