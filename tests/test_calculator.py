"""The cost comparison calculator's arithmetic, checked against numbers worked out by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuconsole.core.money.calculator import (
    HOURS_PER_MONTH,
    P4D_WEEK,
    PRESETS,
    RESNET50,
    CalculatorError,
    CostInputs,
    by_key,
    compare,
    from_catalog,
    parse_period,
    problems,
    reproduces,
)
from gpuconsole.core.money.catalog import bundled_catalog

# A case small enough to follow with pencil and paper:
#   work 100 GPU-hours; cloud: 4 GPUs at $2/GPU-hour, speed 1, $10 extras a run;
#   spot 50% off, 6 interruptions a day of work, 1 h lost + 30 min restart each;
#   own: 2 GPUs, $43,800 over 12 months (8,760 h) at 50% (4,380 h of use) = $10/h, 1 kW × $0.20 = $0.20/h.
OWN_NUMBERS = CostInputs(
    gpu_hours=100.0, cloud_gpus=4, gpu_hour_price=2.0, cloud_extras=10.0,
    spot_discount_pct=50.0, interruptions_per_day=6.0, lost_hours=1.0, restart_minutes=30.0,
    own_gpus=2, own_hardware_usd=43_800.0, own_amortize_months=12.0, own_utilisation_pct=50.0,
    own_power_kw=1.0, kwh_usd=0.2,
)


def test_resnet50_preset_reproduces_the_guide_table_exactly():
    own, on_demand, spot = compare(PRESETS["resnet50"].inputs)
    assert (own.key, on_demand.key, spot.key) == ("own", "on-demand", "spot")
    assert (own.cost, own.hours) == (1200.0, 72.0)
    assert (on_demand.cost, on_demand.hours) == (350.0, 48.0)
    assert (spot.cost, spot.hours) == (120.0, 60.0)
    assert reproduces(PRESETS["resnet50"], (own, on_demand, spot))
    assert PRESETS["resnet50"].published == (("own", 1200.0, 72.0), ("on-demand", 350.0, 48.0), ("spot", 120.0, 60.0))


def test_resnet50_preset_arithmetic_step_by_step():
    # own: 576 GPU-h / (8 GPUs × 1.0) = 72 h;
    #      $160,600 over 60 × 730 h × 25% = 10,950 h of use → 72 h carry 160,600 × 72 / 10,950 = $1,056,
    #      plus 8 kW × $0.25 × 72 h = $144 → $1,200.
    # on-demand: 576 / (8 × 1.5) = 48 h; $0.78125 × 8 = $6.25/h × 48 h = $300, + $50 extras → $350.
    # spot: 2/day × 48 h / 24 = 4 interruptions; 48 + 4 × (2 h + 1 h) = 60 h;
    #       billed 48 + 4 × 2 = 56 h at $0.78125 × 20% × 8 = $1.25/h = $70, + $50 → $120.
    got = by_key(compare(RESNET50))
    assert 160_600 * 72 / (60 * HOURS_PER_MONTH * 0.25) == 1056.0
    assert got["own"].hourly == pytest.approx(1200 / 72, abs=1e-6)
    assert (got["on-demand"].hourly, got["on-demand"].billed_hours, got["on-demand"].extras) == (6.25, 48.0, 50.0)
    assert (got["spot"].interruptions, got["spot"].billed_hours, got["spot"].hourly) == (4.0, 56.0, 1.25)
    assert RESNET50.spot_price == 0.15625


def test_index_is_own_cost_times_time_over_cost_times_time():
    got = by_key(compare(RESNET50))
    assert got["own"].index == 1.0
    assert got["on-demand"].index == round(1200 * 72 / (350 * 48), 6) == 5.142857  # = 36/7
    assert got["spot"].index == 12.0  # 86,400 / 7,200
    for option in compare(OWN_NUMBERS):
        own = by_key(compare(OWN_NUMBERS))["own"]
        assert option.index == pytest.approx(own.cost * own.hours / (option.cost * option.hours), abs=1e-6)


def test_own_numbers_worked_by_hand():
    got = by_key(compare(OWN_NUMBERS))
    # own: 100 / 2 = 50 h × ($10 + $0.20) = $510.
    assert (got["own"].hours, got["own"].cost) == (50.0, 510.0)
    # on-demand: 100 / 4 = 25 h × $8/h = $200, + $10 = $210.
    assert (got["on-demand"].hours, got["on-demand"].cost) == (25.0, 210.0)
    # spot: 6 × 25 / 24 = 6.25 interruptions; 25 + 6.25 × 1.5 = 34.375 h;
    #       billed 25 + 6.25 = 31.25 h × $4/h = $125, + $10 = $135.
    assert (got["spot"].interruptions, got["spot"].hours, got["spot"].billed_hours) == (6.25, 34.375, 31.25)
    assert got["spot"].cost == 135.0
    assert got["on-demand"].index == round(510 * 50 / (210 * 25), 6)
    assert got["spot"].index == round(510 * 50 / (135 * 34.375), 6)


def test_a_spot_price_given_outright_overrides_the_discount():
    inputs = replace(OWN_NUMBERS, spot_gpu_hour_price=0.5)
    assert inputs.spot_price == 0.5
    # billed 31.25 h × 4 GPUs × $0.50 = $62.50, + $10.
    assert by_key(compare(inputs))["spot"].cost == 72.5


def test_no_interruptions_make_spot_as_fast_as_on_demand():
    got = by_key(compare(replace(OWN_NUMBERS, interruptions_per_day=0.0)))
    assert got["spot"].hours == got["on-demand"].hours == 25.0
    assert got["spot"].cost == 2.0 * 0.5 * 4 * 25 + 10


def test_catalog_price_per_gpu_hour_is_the_instance_price_over_its_gpus():
    catalog = bundled_catalog()
    chosen = from_catalog(catalog, "p4d.24xlarge", "eu-west-1", OWN_NUMBERS)
    assert chosen.gpu_hour_price == catalog.price("p4d.24xlarge", "eu-west-1") / 8 == 35.9186 / 8
    assert chosen.cloud_gpus == 8
    assert chosen.cloud_label == "p4d.24xlarge in eu-west-1"
    assert from_catalog(catalog, "g5.12xlarge", "us-east-1", OWN_NUMBERS, instances=3).cloud_gpus == 12
    # The example preset's price is the bundled catalog's, not a number typed in by hand.
    assert from_catalog(catalog, "p4d.24xlarge", "us-east-1", P4D_WEEK).gpu_hour_price == P4D_WEEK.gpu_hour_price
    with pytest.raises(CalculatorError, match="unknown instance type 'p9.huge'"):
        from_catalog(catalog, "p9.huge", "us-east-1", OWN_NUMBERS)
    with pytest.raises(CalculatorError, match=r"no price for p5e.48xlarge in us-east-1 \(priced in: us-east-2, us-west-2\)"):
        from_catalog(catalog, "p5e.48xlarge", "us-east-1", OWN_NUMBERS)


def test_every_preset_compares():
    for name, preset in PRESETS.items():
        options = compare(preset.inputs)
        assert [o.key for o in options] == ["own", "on-demand", "spot"], name
        assert all(o.cost > 0 and o.hours > 0 for o in options), name


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"gpu_hours": 0.0}, "gpu_hours", "must be more than 0, got 0"),
        ({"gpu_hours": float("nan")}, "gpu_hours", "must be a finite number"),
        ({"gpu_hours": 1e-9}, "gpu_hours", "too little work"),
        ({"cloud_gpus": 0}, "cloud_gpus", "whole number from 1"),
        ({"own_gpus": 2.5}, "own_gpus", "whole number from 1"),
        ({"gpu_hour_price": -1.0}, "gpu_hour_price", "must be more than 0, got -1"),
        ({"cloud_speed": 0.0}, "cloud_speed", "must be more than 0"),
        ({"cloud_extras": -5.0}, "cloud_extras", "must be 0 or more, got -5"),
        ({"spot_discount_pct": 100.0}, "spot_discount_pct", "from 0 to less than 100, got 100"),
        ({"spot_discount_pct": -1.0}, "spot_discount_pct", "from 0 to less than 100"),
        ({"spot_gpu_hour_price": 0.0}, "spot_gpu_hour_price", "must be more than 0"),
        ({"interruptions_per_day": -1.0}, "interruptions_per_day", "must be 0 or more"),
        ({"lost_hours": -0.5}, "lost_hours", "must be 0 or more"),
        ({"restart_minutes": float("inf")}, "restart_minutes", "finite"),
        ({"own_utilisation_pct": 0.0}, "own_utilisation_pct", "more than 0 and at most 100, got 0"),
        ({"own_utilisation_pct": 120.0}, "own_utilisation_pct", "at most 100, got 120"),
        ({"own_amortize_months": 0.0}, "own_amortize_months", "must be more than 0"),
        ({"own_hardware_usd": 1e13}, "own_hardware_usd", "must be at most"),
        ({"own_hardware_usd": 0.0, "own_power_kw": 0.0}, "own_hardware_usd", "would cost nothing"),
        ({"kwh_usd": "0.2"}, "kwh_usd", "expected a number"),
    ],
)
def test_bad_inputs_name_the_field_in_one_line(change, field, words):
    inputs = replace(OWN_NUMBERS, **change)
    with pytest.raises(CalculatorError) as caught:
        compare(inputs)
    assert caught.value.field == field
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
    if words != "too little work":
        assert field in problems(inputs)


def test_problems_lists_every_bad_field_at_once():
    found = problems(replace(OWN_NUMBERS, cloud_gpus=0, lost_hours=-1.0, own_utilisation_pct=0.0))
    assert set(found) == {"cloud_gpus", "lost_hours", "own_utilisation_pct"}
    assert problems(OWN_NUMBERS) == {}


def test_hardware_already_paid_for_costs_only_its_power():
    got = by_key(compare(replace(OWN_NUMBERS, own_hardware_usd=0.0)))
    assert got["own"].cost == 50 * 0.2


@pytest.mark.parametrize(("text", "months"), [("36", 36.0), ("18m", 18.0), ("3y", 36.0), ("2.5 years", 30.0),
                                               ("1 year", 12.0), ("24 months", 24.0), (".5y", 6.0)])
def test_amortisation_period_in_months_or_years(text, months):
    assert parse_period(text) == months


@pytest.mark.parametrize("text", ["", "3q", "-1y", "y", "1e3", "three years"])
def test_bad_amortisation_period(text):
    with pytest.raises(ValueError, match="expected months"):
        parse_period(text)
