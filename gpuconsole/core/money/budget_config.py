"""Budgets declared in the configuration file, next to those added in the console.

Where the file is and how it is read is :mod:`gpuconsole.core.config`; this module turns its
``[[budgets]]`` tables into budgets. Each table declares one budget::

    [[budgets]]
    name = "research"
    amount = 1000            # US dollars
    period = "monthly"       # monthly, daily or custom (custom needs starts; ends is optional)
    scope = "tag:Budget=research"
    thresholds = ["80:notify", "100:notify+stop-all"]
    automatic = true         # stop actions run without asking
    notify_command = "notify-send gpuconsole \\"$GPUCONSOLE_MESSAGE\\""
    webhook = "https://hooks.example.com/gpu"
    # starts = 2026-11-01    # custom periods: TOML dates or ISO strings, UTC
    # ends = 2026-11-30      # a date is inclusive: the period ends at the following midnight

Budgets from the file have origin ``"config"``: the console shows and enforces them but cannot
remove them. Every problem is one :class:`~gpuconsole.core.config.ConfigError` line naming the
file and the key.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from gpuconsole.core.config import ConfigError, ConfigFile, parse_toml, read_config_text
from gpuconsole.core.config_decode import TableError, decode_table, fields_of
from gpuconsole.core.money import budgets as rules
from gpuconsole.model import DEFAULT_THRESHOLDS, Budget, BudgetPeriod


class BudgetTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[budgets]]`` table as written (a key left out is None: the budget's default)."""

    name: Annotated[str, msgspec.Meta(min_length=1, description="a budget name",
                                      extra={"missing": "every budget needs a name"})]
    amount: Annotated[float, msgspec.Meta(gt=0, description="a number of dollars more than 0")]
    currency: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}$", description="a currency code such as USD")] | None = None
    period: str | None = None
    scope: str | None = None
    thresholds: Annotated[list[str], msgspec.Meta(
        min_length=1, description='a list of strings, e.g. ["80:notify", "100:notify+stop-all"]')] | None = None
    automatic: bool | None = None
    notify_command: str | None = None
    webhook: str | None = None
    starts: Any = None  # a TOML date or date-time, or an ISO string
    ends: Any = None


BUDGET_KEYS = fields_of(BudgetTable)


def load_config(explicit: Path | str | None = None, env: Mapping[str, str] = os.environ) -> ConfigFile:
    """Read and check the configuration file (see :func:`gpuconsole.core.config.config_path`).

    Raises:
        ConfigError: unreadable, not TOML, or a bad key (one line naming the file and the key).
    """
    path, text = read_config_text(explicit, env)
    if text is None:
        return ConfigFile(None)
    return parse_config(text, path)


def parse_config(text: str, path: Path) -> ConfigFile:
    """The budgets a configuration text declares. Raises :class:`ConfigError`."""
    data = parse_toml(text, path)
    tables = data.get("budgets", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{path}: key budgets: write each budget as a [[budgets]] table")
    out: list[Budget] = []
    seen: set[str] = set()
    for n, table in enumerate(tables, 1):
        budget = budget_from_table(table, f"{path}: [[budgets]] #{n}")
        if budget.name in seen:
            raise ConfigError(f"{path}: [[budgets]] #{n} key name: budget {budget.name!r} is declared twice")
        seen.add(budget.name)
        out.append(budget)
    return ConfigFile(path, tuple(out), money_rates(data.get("money"), path))


PLAN_ONLY = "login"  # the origin of an automatic budget of a login's own file on a shared machine
PLAN_ONLY_NOTE = ("plan only: on a shared machine a budget acts by itself only from the site config or "
                  "`budget add --automatic` (admin, MFA, audited)")


def plan_only(config: ConfigFile) -> ConfigFile:
    """``config`` (a login's own file on a shared machine) with its automatic budgets made plan
    only: they evaluate and show what they would do, and wait for a user (origin ``login``)."""
    budgets = tuple(msgspec.structs.replace(b, automatic=False, origin=PLAN_ONLY) if b.automatic else b
                    for b in config.budgets)
    return ConfigFile(config.path, budgets, config.rates)


class MoneyTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The ``[money]`` table: what one unit of each currency is worth in US dollars."""

    rates: dict[Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}$")], Annotated[float, msgspec.Meta(gt=0)]] = {}


def money_rates(table: Any, path: Path) -> tuple[tuple[str, float], ...]:
    if table is None:
        return ()
    try:
        given = decode_table(table, MoneyTable)
    except TableError as exc:
        raise ConfigError(f"{path}: [money] key {exc.key or 'money'}: {exc.problem}") from None
    return tuple(sorted(given.rates.items()))


def budget_from_table(table: Mapping[str, Any], where: str) -> Budget:
    """One ``[[budgets]]`` table as a :class:`Budget` (origin ``"config"``)."""
    raw_name = table.get("name")
    label = f"{where} ({raw_name})" if isinstance(raw_name, str) and raw_name else where

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{label} key {key}: {problem}")

    try:
        given = decode_table(dict(table), BudgetTable)
    except TableError as exc:
        raise ConfigError(f"{where if exc.unknown else label} key {exc.key or 'budgets'}: {exc.problem}") from None
    fields: dict[str, Any] = {"name": given.name, "amount": given.amount, "origin": "config"}
    fields.update({key: value for key in ("scope", "notify_command", "webhook", "automatic", "currency")
                   if (value := getattr(given, key)) is not None})
    try:
        if given.scope is not None:
            rules.parse_scope(given.scope)
    except rules.BudgetError as exc:
        raise fail("scope", str(exc)) from None
    try:
        fields["period"] = rules.parse_period(
            given.period if given.period is not None else "custom" if given.starts is not None else "monthly")
    except rules.BudgetError as exc:
        raise fail("period", str(exc)) from None
    for key in ("starts", "ends"):
        if (value := getattr(given, key)) is not None:
            try:
                fields[key] = _moment(value, end=key == "ends")
            except (rules.BudgetError, TypeError) as exc:
                raise fail(key, str(exc)) from None
    try:
        fields["thresholds"] = (tuple(rules.parse_threshold(w) for w in given.thresholds)
                                if given.thresholds is not None else DEFAULT_THRESHOLDS)
    except rules.BudgetError as exc:
        raise fail("thresholds", str(exc)) from None
    budget = Budget(**fields)
    try:
        return rules.validate(budget)
    except rules.BudgetError as exc:
        key = _key_of(str(exc), budget)
        raise fail(key, str(exc)) from None


def _moment(value: Any, *, end: bool) -> float:
    """A TOML date, date-time or ISO string as POSIX seconds (UTC when no zone is given)."""
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    if isinstance(value, dt.date):
        midnight = dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp()
        return midnight + (86400.0 if end else 0.0)
    if isinstance(value, str):
        return rules.parse_date(value, end=end)
    raise TypeError(f"expected a date, got {value!r}")


def _key_of(message: str, budget: Budget) -> str:
    """Which key a validation message of :func:`gpuconsole.core.money.budgets.validate` is about."""
    if message.startswith("bad budget name"):
        return "name"
    for key, words in (("webhook", "bad webhook"), ("notify_command", "bad notify command"), ("thresholds", "threshold")):
        if message.startswith(words) or words in message.split(":", 1)[0]:
            return key
    if budget.period is not BudgetPeriod.CUSTOM:
        return "period"
    return "starts" if budget.starts is None else "ends"
