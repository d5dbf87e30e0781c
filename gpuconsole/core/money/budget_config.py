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
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuconsole.core.config import ConfigError, ConfigFile, parse_toml, read_config_text
from gpuconsole.core.money import budgets as rules
from gpuconsole.model import DEFAULT_THRESHOLDS, Budget, BudgetPeriod

BUDGET_KEYS = ("name", "amount", "period", "scope", "thresholds", "automatic", "notify_command", "webhook",
               "starts", "ends")


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
    return ConfigFile(path, tuple(out))


def budget_from_table(table: Mapping[str, Any], where: str) -> Budget:
    """One ``[[budgets]]`` table as a :class:`Budget` (origin ``"config"``)."""
    for key in table:
        if key not in BUDGET_KEYS:
            raise ConfigError(f"{where} key {key}: unknown key (known: {', '.join(BUDGET_KEYS)})")

    def fail(key: str, problem: str) -> ConfigError:
        name = table.get("name")
        label = f"{where} ({name})" if isinstance(name, str) and name else where
        return ConfigError(f"{label} key {key}: {problem}")

    name = table.get("name")
    if not isinstance(name, str) or not name:
        raise fail("name", "every budget needs a name")
    amount = table.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount) or amount <= 0:
        raise fail("amount", f"expected a number of dollars more than 0, got {amount!r}")
    fields: dict[str, Any] = {"name": name, "amount": float(amount), "origin": "config"}
    for key in ("scope", "notify_command", "webhook", "period"):
        if key in table:
            if not isinstance(table[key], str):
                raise fail(key, f"expected a string, got {table[key]!r}")
            fields[key] = table[key]
    if "automatic" in table:
        if not isinstance(table["automatic"], bool):
            raise fail("automatic", f"expected true or false, got {table['automatic']!r}")
        fields["automatic"] = table["automatic"]
    try:
        if "scope" in fields:
            rules.parse_scope(fields["scope"])
    except rules.BudgetError as exc:
        raise fail("scope", str(exc)) from None
    try:
        period = rules.parse_period(fields.pop("period", "custom" if "starts" in table else "monthly"))
    except rules.BudgetError as exc:
        raise fail("period", str(exc)) from None
    fields["period"] = period
    for key in ("starts", "ends"):
        if key in table:
            try:
                fields[key] = _moment(table[key], end=key == "ends")
            except (rules.BudgetError, TypeError) as exc:
                raise fail(key, str(exc)) from None
    if "thresholds" in table:
        words = table["thresholds"]
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
            raise fail("thresholds", 'expected a list of strings, e.g. ["80:notify", "100:notify+stop-all"]')
        try:
            fields["thresholds"] = tuple(rules.parse_threshold(w) for w in words)
        except rules.BudgetError as exc:
            raise fail("thresholds", str(exc)) from None
    else:
        fields["thresholds"] = DEFAULT_THRESHOLDS
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
