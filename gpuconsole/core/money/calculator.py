"""The cost comparison calculator: own server vs cloud on-demand vs cloud spot for one training run.

Pure arithmetic, no I/O: the CLI (``gpuconsole cost compare``) and the console's calculator
screen call :func:`compare` with the same :class:`CostInputs`, so both show the same numbers.

The model, hours are wall-clock hours and money is US dollars:

* Work ``W`` is measured in GPU-hours of a *reference GPU* (say, what one run takes on your own
  server's GPUs). Each option runs ``g`` GPUs at ``speed`` times the reference, so its compute
  time is ``W / (g × speed)``.
* **On-demand**: ``time = run = W / (g_cloud × cloud_speed)``;
  ``cost = price × g_cloud × run + extras`` (``price`` per GPU-hour; ``extras`` per run:
  storage, data transfer).
* **Spot**: the same run on spot capacity at ``price × (1 − discount)`` per GPU-hour (or a spot
  price given outright). Interruptions come at ``rate`` per day of work, so a run sees
  ``n = rate × run / 24`` of them; each loses ``lost`` hours of work (redone, and billed) and
  waits ``restart`` minutes for capacity before training resumes (no instance runs, nothing
  billed). ``time = run + n × (lost + restart / 60)``;
  ``cost = spot price × g_cloud × (run + n × lost) + extras``.
* **Own server**: ``time = W / (g_own × own_speed)``. Each hour of use carries the hardware's
  depreciation over the hours it is actually used, plus its electricity:
  ``cost = time × (hardware / (months × 730 × utilisation) + kW × $/kWh)``
  (730 hours in an average month, 8,760 in a year).
* **Price-performance index** of an option, relative to the own server:
  ``index = (1 / cost × 1 / time) / (1 / cost_own × 1 / time_own)
  = (cost_own × time_own) / (cost × time)``: work per dollar times speed; the own server is
  1.00 and higher is better.

Results are rounded to six decimals, so inputs chosen to give round numbers give exactly those
numbers (the ``resnet50`` preset reproduces the deployment guide's table: $1,200 / 72 h,
$350 / 48 h, $120 / 60 h).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from gpuconsole.core.money.currency import BASE, factor

if TYPE_CHECKING:
    from gpuconsole.core.money.catalog import Catalog

HOURS_PER_MONTH = 730.0  # 8,760 hours a year / 12
INDEX_FORMULA = "index = (own cost × own time) / (cost × time)"
INDEX_MEANING = "work per dollar × speed, relative to the own server (1.00); higher is better"

OWN, ON_DEMAND, SPOT = "own", "on-demand", "spot"
OPTION_NAMES = {OWN: "Own server", ON_DEMAND: "Cloud on-demand", SPOT: "Cloud spot"}

MAX_MONEY = 1e12  # anything above is a typo, not a GPU budget
MAX_COUNT = 1_000_000
_DECIMALS = 6


class CalculatorError(ValueError):
    """An input the calculator cannot use; ``field`` names it, the message is one line."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{LABELS.get(field, field)}: {message}")
        self.field = field
        self.reason = message


@dataclass(frozen=True, slots=True)
class CostInputs:
    """Everything one comparison needs. Percentages are 0–100; money is US dollars.

    Attributes:
        gpu_hours: the work, in GPU-hours of the reference GPU.
        cloud_gpus: GPUs the cloud run uses (on-demand and spot alike).
        cloud_speed: one cloud GPU's speed relative to the reference GPU.
        gpu_hour_price: on-demand price of one cloud GPU for one hour.
        cloud_extras: per run, paid by both cloud options (storage, data transfer).
        spot_discount_pct: spot's discount on the on-demand price, when ``spot_gpu_hour_price``
            is None.
        spot_gpu_hour_price: a spot price per GPU-hour given outright (overrides the discount).
        interruptions_per_day: spot interruptions per 24 hours of work.
        lost_hours: work lost per interruption (the time since the last checkpoint).
        restart_minutes: per interruption, until training runs again (waiting for capacity,
            relaunching); not billed.
        own_gpus: GPUs in the own server.
        own_speed: one own GPU's speed relative to the reference GPU.
        own_hardware_usd: the own server's purchase price.
        own_amortize_months: the period the purchase is written off over.
        own_utilisation_pct: the share of that period the server does useful work.
        own_power_kw: its power draw while working (with cooling, if you pay for it).
        kwh_usd: the electricity price.
        cloud_label: where the cloud price came from (``p4d.24xlarge in us-east-1``), for display.
    """

    gpu_hours: float
    cloud_gpus: int
    gpu_hour_price: float
    own_gpus: int
    own_hardware_usd: float
    own_power_kw: float
    cloud_speed: float = 1.0
    cloud_extras: float = 0.0
    spot_discount_pct: float = 70.0
    spot_gpu_hour_price: float | None = None
    interruptions_per_day: float = 1.0
    lost_hours: float = 0.5
    restart_minutes: float = 10.0
    own_speed: float = 1.0
    own_amortize_months: float = 36.0
    own_utilisation_pct: float = 50.0
    kwh_usd: float = 0.15
    cloud_label: str = ""

    @property
    def spot_price(self) -> float:
        """The spot price per GPU-hour: given outright, else the on-demand price less the discount."""
        if self.spot_gpu_hour_price is not None:
            return self.spot_gpu_hour_price
        return self.gpu_hour_price * (100.0 - self.spot_discount_pct) / 100.0


LABELS: dict[str, str] = {
    "gpu_hours": "GPU-hours of work",
    "cloud_gpus": "cloud GPUs",
    "gpu_hour_price": "on-demand $/GPU-hour",
    "own_gpus": "own GPUs",
    "own_hardware_usd": "own hardware $",
    "own_power_kw": "own power kW",
    "cloud_speed": "cloud speed",
    "cloud_extras": "cloud extras $/run",
    "spot_discount_pct": "spot discount %",
    "spot_gpu_hour_price": "spot $/GPU-hour",
    "interruptions_per_day": "interruptions/day",
    "lost_hours": "lost work h",
    "restart_minutes": "restart minutes",
    "own_speed": "own speed",
    "own_amortize_months": "amortisation months",
    "own_utilisation_pct": "utilisation %",
    "kwh_usd": "$/kWh",
    "cloud_label": "cloud price source",
}
"""Each input's short name, as error messages and the calculator screen say it."""


@dataclass(frozen=True, slots=True)
class Option:
    """One way to run the work, priced.

    Attributes:
        key: ``own``, ``on-demand`` or ``spot``.
        cost: dollars for the whole run.
        hours: wall-clock hours until the run is done.
        index: price-performance relative to the own server (see :data:`INDEX_FORMULA`).
        billed_hours: hours paid for (own server: hours of use).
        hourly: dollars per billed hour, for all the option's GPUs (without extras).
        interruptions: expected spot interruptions during the run (0 for the others).
        extras: the per-run extras included in ``cost``.
    """

    key: str
    cost: float
    hours: float
    index: float
    billed_hours: float
    hourly: float
    interruptions: float = 0.0
    extras: float = 0.0

    @property
    def name(self) -> str:
        return OPTION_NAMES[self.key]


# ---------------------------------------------------------------------------- checking inputs

_POSITIVE = ("gpu_hours", "gpu_hour_price", "cloud_speed", "own_speed", "own_amortize_months")
_NON_NEGATIVE = ("cloud_extras", "interruptions_per_day", "lost_hours", "restart_minutes",
                 "own_hardware_usd", "own_power_kw", "kwh_usd")
_COUNTS = ("cloud_gpus", "own_gpus")


def problems(inputs: CostInputs) -> dict[str, str]:
    """Every input that cannot be used, by field name, each with a one-line reason (empty: fine)."""
    found: dict[str, str] = {}
    for f in fields(inputs):
        value = getattr(inputs, f.name)
        if f.name == "cloud_label" or (value is None and f.name == "spot_gpu_hour_price"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            found[f.name] = f"expected a number, got {value!r}"
        elif not math.isfinite(value):
            found[f.name] = f"must be a finite number, got {value}"
        elif f.name in _COUNTS:
            if value != int(value) or not 1 <= value <= MAX_COUNT:
                found[f.name] = f"must be a whole number from 1 to {MAX_COUNT:,}, got {_num(value)}"
        elif value > MAX_MONEY:
            found[f.name] = f"must be at most {MAX_MONEY:,.0f}, got {_num(value)}"
        elif f.name in _POSITIVE and not value > 0:
            found[f.name] = f"must be more than 0, got {_num(value)}"
        elif f.name in _NON_NEGATIVE and value < 0:
            found[f.name] = f"must be 0 or more, got {_num(value)}"
    if "spot_discount_pct" not in found and not 0 <= inputs.spot_discount_pct < 100:
        found["spot_discount_pct"] = f"must be from 0 to less than 100, got {_num(inputs.spot_discount_pct)}"
    if "own_utilisation_pct" not in found and not 0 < inputs.own_utilisation_pct <= 100:
        found["own_utilisation_pct"] = f"must be more than 0 and at most 100, got {_num(inputs.own_utilisation_pct)}"
    spot = inputs.spot_gpu_hour_price
    if spot is not None and "spot_gpu_hour_price" not in found and not spot > 0:
        found["spot_gpu_hour_price"] = f"must be more than 0, got {_num(spot)}"
    if not found and inputs.own_hardware_usd == 0 and inputs.own_power_kw * inputs.kwh_usd == 0:
        found["own_hardware_usd"] = "the own server would cost nothing: give its price or its power and electricity price"
    return found


def check(inputs: CostInputs) -> None:
    """Raise :class:`CalculatorError` for the first unusable input, in the fields' order."""
    found = problems(inputs)
    if found:
        name, message = next(iter(found.items()))
        raise CalculatorError(name, message)


def _num(value: float) -> str:
    return f"{value:g}"


# ---------------------------------------------------------------------------- the comparison


def _tidy(value: float) -> float:
    """Six decimals: binary fractions of cents and seconds are noise, not information."""
    return round(value, _DECIMALS) + 0.0


def compare(inputs: CostInputs) -> tuple[Option, ...]:
    """Own server, cloud on-demand and cloud spot for the same work, in that order.

    Raises:
        CalculatorError: an input cannot be used (see :func:`problems`).
    """
    check(inputs)
    w = inputs.gpu_hours
    extras = inputs.cloud_extras

    own_hours = w / (inputs.own_gpus * inputs.own_speed)
    use_hours = inputs.own_amortize_months * HOURS_PER_MONTH * inputs.own_utilisation_pct / 100.0
    power = inputs.own_power_kw * inputs.kwh_usd
    own_cost = inputs.own_hardware_usd * own_hours / use_hours + power * own_hours

    run = w / (inputs.cloud_gpus * inputs.cloud_speed)
    od_hourly = inputs.gpu_hour_price * inputs.cloud_gpus
    od_cost = od_hourly * run + extras

    interruptions = inputs.interruptions_per_day * run / 24.0
    spot_hours = run + interruptions * (inputs.lost_hours + inputs.restart_minutes / 60.0)
    spot_billed = run + interruptions * inputs.lost_hours
    spot_hourly = inputs.spot_price * inputs.cloud_gpus
    spot_cost = spot_hourly * spot_billed + extras

    base = _tidy(own_cost) * _tidy(own_hours)

    if base == 0 or _tidy(run) == 0 or _tidy(od_cost) == 0 or _tidy(spot_cost) == 0:
        raise CalculatorError("gpu_hours", f"too little work to compare, got {_num(w)}")

    def option(key: str, cost: float, hours: float, billed: float, hourly: float,
               count: float = 0.0, extra: float = 0.0) -> Option:
        cost, hours = _tidy(cost), _tidy(hours)
        return Option(key, cost, hours, _tidy(base / (cost * hours)), _tidy(billed), _tidy(hourly),
                      _tidy(count), _tidy(extra))

    return (
        option(OWN, own_cost, own_hours, own_hours, own_cost / own_hours),
        option(ON_DEMAND, od_cost, run, run, od_hourly, extra=extras),
        option(SPOT, spot_cost, spot_hours, spot_billed, spot_hourly, interruptions, extras),
    )


def by_key(options: tuple[Option, ...]) -> dict[str, Option]:
    return {o.key: o for o in options}


# ---------------------------------------------------------------------------- presets


@dataclass(frozen=True, slots=True)
class Preset:
    """Named inputs, with the table they are meant to reproduce (if any).

    Attributes:
        title: what the preset selector shows.
        source: where the numbers come from.
        published: ``(option key, cost, hours)`` rows of the source's table, which
            :func:`compare` reproduces exactly from ``inputs``.
    """

    title: str
    source: str
    inputs: CostInputs
    published: tuple[tuple[str, float, float], ...] = ()


RESNET50 = CostInputs(
    # 8 reference GPUs (the own server's) for 72 hours.
    gpu_hours=576.0,
    # The cloud: 8 GPUs, each 1.5× the reference, at $0.78125 per GPU-hour ($6.25/h for the 8),
    # plus $50 a run for storage and data transfer.
    cloud_gpus=8,
    cloud_speed=1.5,
    gpu_hour_price=0.78125,
    cloud_extras=50.0,
    # Spot: 80% off; 2 interruptions a day of work, each losing 2 h of work and 60 min to restart.
    spot_discount_pct=80.0,
    interruptions_per_day=2.0,
    lost_hours=2.0,
    restart_minutes=60.0,
    # The own server: 8 GPUs for $160,600 over 60 months at 25% utilisation, 8 kW at $0.25/kWh.
    own_gpus=8,
    own_speed=1.0,
    own_hardware_usd=160_600.0,
    own_amortize_months=60.0,
    own_utilisation_pct=25.0,
    own_power_kw=8.0,
    kwh_usd=0.25,
    cloud_label="deployment guide",
)

P4D_WEEK = CostInputs(
    # 8 A100s for 100 hours, measured on the own server's A100s.
    gpu_hours=800.0,
    # p4d.24xlarge in us-east-1 from the bundled catalog: $32.77248/h ÷ 8 GPUs.
    cloud_gpus=8,
    gpu_hour_price=4.09656,
    cloud_extras=100.0,
    spot_discount_pct=65.0,
    interruptions_per_day=1.0,
    lost_hours=0.5,
    restart_minutes=15.0,
    own_gpus=8,
    own_hardware_usd=150_000.0,
    own_amortize_months=36.0,
    own_utilisation_pct=60.0,
    own_power_kw=6.5,
    kwh_usd=0.15,
    cloud_label="p4d.24xlarge in us-east-1",
)

PRESETS: dict[str, Preset] = {
    "resnet50": Preset(
        "ResNet-50 (deployment guide)",
        "the deployment guide's cost model table for a ResNet-50 training run",
        RESNET50,
        published=((OWN, 1200.0, 72.0), (ON_DEMAND, 350.0, 48.0), (SPOT, 120.0, 60.0)),
    ),
    "p4d-a100": Preset(
        "8×A100, 800 GPU-h (p4d)",
        "p4d.24xlarge on-demand price in us-east-1 from the bundled catalog; own-server numbers are an example",
        P4D_WEEK,
    ),
}
"""The calculator's presets by name (``--preset NAME``)."""


def reproduces(preset: Preset, options: tuple[Option, ...]) -> bool:
    """Whether ``options`` give exactly the costs and times of the preset's published table."""
    found = by_key(options)
    return bool(preset.published) and all(
        key in found and found[key].cost == cost and found[key].hours == hours
        for key, cost, hours in preset.published
    )


# ---------------------------------------------------------------------------- catalog and parsing


def from_catalog(catalog: Catalog, instance_type: str, region: str, base: CostInputs, *,
                 instances: int = 1, rates: Mapping[str, float] | None = None) -> CostInputs:
    """``base`` with the cloud price and GPU count of ``instances`` × ``instance_type`` in ``region``.

    The price per GPU-hour is the type's on-demand price in the region divided by its GPU count,
    in US dollars: a type billed in another currency (an Alibaba Cloud account in CNY) is converted
    through ``rates`` (``[money] rates``), and refused without one, never taken as dollars.

    Raises:
        CalculatorError: the catalog has no such type, or no price for it in that region.
    """
    itype = catalog.get(instance_type)
    if itype is None:
        raise CalculatorError("cloud_label", f"unknown instance type {instance_type!r}")
    if itype.gpu_count < 1:
        raise CalculatorError("cloud_label", f"{instance_type} has no GPUs")
    price = catalog.price(instance_type, region)
    if price is None:
        where = ", ".join(r for r in catalog.regions() if catalog.price(instance_type, r) is not None)
        raise CalculatorError("cloud_label", f"no price for {instance_type} in {region} (priced in: {where or 'none'})")
    if instances < 1:
        raise CalculatorError("cloud_gpus", f"must be 1 or more instances, got {instances}")
    label = f"{instance_type} in {region}"
    if itype.currency and itype.currency != BASE:
        rate = factor(itype.currency, BASE, rates or {})
        if rate is None:
            raise CalculatorError("cloud_label", f"{instance_type} is priced in {itype.currency}: set [money] rates "
                                                 f"for {itype.currency} to compare it in US dollars")
        label = f"{label} ({itype.currency} {price:,.2f}/h at {rate:g} USD each)"
        price *= rate
    return replace(base, gpu_hour_price=price / itype.gpu_count, cloud_gpus=itype.gpu_count * instances,
                   cloud_label=label)


_PERIOD = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(m|mo|months?|y|yr|years?)?\s*$", re.IGNORECASE)


def parse_period(text: str) -> float:
    """An amortisation period in months: ``36``, ``36m``, ``3y``, ``2.5 years``.

    Raises:
        ValueError: not a period; the message is one line.
    """
    match = _PERIOD.match(text)
    if not match:
        raise ValueError(f"expected months (36, 36m) or years (3y), got {text!r}")
    value = float(match.group(1))
    unit = (match.group(2) or "m").lower()
    return value * 12.0 if unit.startswith("y") else value
