"""Totals never add two currencies: a budget counts spend in its own currency, converts another
only through ``[money] rates``, and says which spend it leaves out."""

from __future__ import annotations

import pytest

from gpuconsole.core.money import budgets as rules
from gpuconsole.core.money.budget_config import parse_config
from gpuconsole.core.money.currency import convert, factor
from gpuconsole.model import Budget, BudgetPeriod, Instance, InstanceState, Market

NOW = 1_790_000_000.0
TAGS = (("Budget", "research"),)


def _inst(iid: str, price: float, currency: str) -> Instance:
    return Instance(iid, "t", "r", "z", Market.ON_DEMAND, InstanceState.RUNNING, NOW - 3600, price,
                    tags=TAGS, currency=currency, cloud="aws" if currency == "USD" else "alibaba")


FLEET = [_inst("i-0123456789abcdef0", 10.0, "USD"), _inst("i-bp000000000000000001", 100.0, "CNY")]
BUDGET = Budget("research", 1000.0, BudgetPeriod.DAILY, "tag:Budget=research")


def test_without_rates_the_other_currency_is_left_out_and_named():
    status = rules.evaluate(BUDGET, FLEET, NOW)
    assert status.burn_per_hour == pytest.approx(10.0)
    assert status.left_out == "leaves out 1 instance billed in CNY (no [money] rates for CNY)"


def test_with_rates_it_is_converted():
    status = rules.evaluate(BUDGET, FLEET, NOW, rates=(("CNY", 0.14),))
    assert status.burn_per_hour == pytest.approx(10.0 + 14.0) and status.left_out == ""
    cny = rules.evaluate(Budget("yuan", 1000.0, BudgetPeriod.DAILY, "all", currency="CNY"), FLEET, NOW)
    assert cny.burn_per_hour == pytest.approx(100.0) and "billed in USD" in cny.left_out


def test_factor_and_convert():
    assert factor("USD", "USD", {}) == 1.0 and factor("CNY", "USD", {}) is None
    assert factor("EUR", "CNY", {"EUR": 1.1, "CNY": 0.14}) == pytest.approx(1.1 / 0.14)
    counted, line = convert(FLEET, "USD", {"CNY": 0.14})
    assert [i.currency for i in counted] == ["USD", "USD"] and counted[1].price_per_hour == pytest.approx(14.0)
    assert line == ""


def test_money_table_and_budget_currency_from_the_config(tmp_path):
    text = ('[money]\nrates = { CNY = 0.14 }\n[[budgets]]\nname = "yuan"\namount = 5000\ncurrency = "CNY"\n')
    config = parse_config(text, tmp_path / "c.toml")
    assert config.rates == (("CNY", 0.14),) and config.budgets[0].currency == "CNY"
    with pytest.raises(ValueError, match=r"\[money\] key rates"):
        parse_config('[money]\nrates = { CNY = -1 }\n', tmp_path / "c.toml")
