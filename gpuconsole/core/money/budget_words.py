"""Budgets in words: the scope, threshold, period, date and amount a user writes, read and
written back, and the check that a budget may be saved. Every error is one line.

Thresholds are written ``PCT[f]:ACTION[+ACTION]`` (``80:notify``, ``100:notify+stop-all``); an
``f`` puts the threshold on the forecast, and a bare percentage means ``PCT:notify``.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from gpuconsole.model import Budget, BudgetAction, BudgetPeriod, Threshold, ThresholdBasis

MAX_PERCENT = 1000.0
MAX_AMOUNT = 100_000_000.0  # $100 million: beyond any GPU budget; above it is a typo (or 1e309)
AMOUNT_RULE = f"more than $0 and at most ${MAX_AMOUNT:,.0f}"
# A Kubernetes namespace is an RFC 1123 label; the job form checks namespaces with this same rule.
NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAMESPACE_MAX = 63
NAMESPACE_RULE = f"a namespace is a lowercase RFC 1123 label (a-z, 0-9, '-', at most {NAMESPACE_MAX})"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
ACTION_WORDS = ", ".join(a.value for a in BudgetAction)
THRESHOLD_SYNTAX = "PCT[f]:ACTION[+ACTION], e.g. 80:notify, 100:notify+stop-all or 100f:notify"


class BudgetError(ValueError):
    """Bad budget input (a threshold, scope, period, date or amount); the message is one line."""


class ScopeError(BudgetError):
    """A scope string that is not ``all``, ``tag:Key=Value`` or ``namespace:NS``."""


def namespace_problem(name: str) -> str | None:
    """Why ``name`` is not a Kubernetes namespace (one line), or None when it is one."""
    if not name:
        return "required"
    if len(name) > NAMESPACE_MAX or not NAMESPACE_RE.match(name):
        return NAMESPACE_RULE
    return None


def amount_problem(amount: float) -> str | None:
    """Why ``amount`` cannot be a budget's limit (one line), or None when it can."""
    if not math.isfinite(amount) or not 0 < amount <= MAX_AMOUNT:
        return f"must be {AMOUNT_RULE}"
    return None


def parse_amount(text: str) -> float:
    """``"$25,000"`` → ``25000.0``. Raises :class:`BudgetError` with one line: not a number,
    not finite (``1e309``, ``nan``), not more than $0 or more than :data:`MAX_AMOUNT`."""
    words = text.strip().replace(",", "").lstrip("$").strip()
    try:
        amount = float(words)
    except ValueError:
        raise BudgetError(f"expected a number of dollars, got {text.strip()!r}") from None
    problem = amount_problem(amount)
    if problem is not None:
        raise BudgetError(f"{problem}, got {text.strip()}")
    return amount


def parse_scope(scope: str) -> tuple[str, str, str]:
    """Split a scope into (kind, key, value). Raises :class:`ScopeError` with a one-line message,
    also for a ``namespace:`` that is not a Kubernetes namespace (the job form's rule)."""
    kind, key, value = scope_parts(scope)
    if kind == "namespace" and (problem := namespace_problem(key)) is not None:
        raise ScopeError(f"bad budget scope {scope!r}: {problem}")
    return kind, key, value


def scope_parts(scope: str) -> tuple[str, str, str]:
    """:func:`parse_scope` without the namespace rule: how spend is counted for a budget saved
    before the rule (a bad namespace matches no job, so such a budget counts nothing)."""
    if scope == "all":
        return ("all", "", "")
    kind, _, rest = scope.partition(":")
    if kind == "tag" and "=" in rest and rest.split("=", 1)[0]:
        key, value = rest.split("=", 1)
        return ("tag", key, value)
    if kind == "namespace" and rest:
        return ("namespace", rest, "")
    raise ScopeError(f"bad budget scope {scope!r}: use all, tag:Key=Value or namespace:NAME")


def parse_threshold(text: str) -> Threshold:
    """``"100:notify+stop-all"`` → ``Threshold(100, ACTUAL, (NOTIFY, STOP_ALL))``; ``"100f:notify"``
    is on the forecast; ``"80"`` alone means ``80:notify``.

    Raises:
        BudgetError: one line naming what is wrong.
    """
    raw = text.strip()
    head, sep, tail = raw.partition(":")
    head = head.strip().lower()
    basis = ThresholdBasis.ACTUAL
    if head.endswith("f"):
        basis, head = ThresholdBasis.FORECAST, head[:-1]
    head = head.rstrip("%").strip()
    try:
        percent = float(head)
    except ValueError:
        raise BudgetError(f"bad threshold {text!r}: use {THRESHOLD_SYNTAX}") from None
    if not math.isfinite(percent) or not 0 < percent <= MAX_PERCENT:
        raise BudgetError(f"bad threshold {text!r}: the percentage must be more than 0 and at most {MAX_PERCENT:g}")
    if not sep:
        return Threshold(percent, basis, (BudgetAction.NOTIFY,))
    actions: list[BudgetAction] = []
    for word in tail.split("+"):
        word = word.strip().lower()
        try:
            action = BudgetAction(word)
        except ValueError:
            what = f"unknown action {word!r}" if word else "an empty action"
            raise BudgetError(f"bad threshold {text!r}: {what} (actions: {ACTION_WORDS})") from None
        if action not in actions:
            actions.append(action)
    return Threshold(percent, basis, tuple(actions))


def format_threshold(threshold: Threshold) -> str:
    """The words :func:`parse_threshold` reads back: ``100f:notify+stop-spot``."""
    return f"{threshold_key(threshold)}:{'+'.join(a.value for a in threshold.actions)}"


def threshold_key(threshold: Threshold) -> str:
    """The percentage and basis without the actions (``80``, ``100f``): what "fired" is keyed by."""
    return f"{threshold.percent:g}{'f' if threshold.basis is ThresholdBasis.FORECAST else ''}"


def parse_period(text: str) -> BudgetPeriod:
    try:
        return BudgetPeriod(text.strip().lower())
    except ValueError:
        raise BudgetError(f"bad period {text!r}: use monthly, daily or custom") from None


def parse_date(text: str, *, end: bool = False) -> float:
    """An ISO date or date-time as POSIX seconds (UTC unless it names a zone).

    A bare date is midnight UTC; with ``end`` it is the midnight after, so ``--to 2026-11-30``
    includes the whole of that day.
    """
    raw = text.strip()
    try:
        if len(raw) == 10:
            day = datetime.fromisoformat(raw).replace(tzinfo=UTC)
            return day.timestamp() + (86400.0 if end else 0.0)
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BudgetError(f"bad date {text!r}: use YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def format_date(ts: float) -> str:
    d = datetime.fromtimestamp(ts, UTC)
    if (d.hour, d.minute, d.second) == (0, 0, 0):
        return d.strftime("%Y-%m-%d")
    return d.strftime("%Y-%m-%dT%H:%MZ")


def describe_period(budget: Budget) -> str:
    """``monthly``, ``daily``, ``2026-11-01 to 2026-11-30`` (inclusive) or ``from 2026-11-16T14:00Z (cumulative)``."""
    if budget.period is not BudgetPeriod.CUSTOM:
        return budget.period.value
    start = format_date(budget.starts) if budget.starts is not None else "the beginning"
    if budget.ends is None:
        return f"from {start} (cumulative)"
    end = format_date(budget.ends)
    if len(end) == 10:  # ends at midnight: name the last whole day, as --to takes it
        end = format_date(budget.ends - 86400.0)
    return f"{start} to {end}"


def validate(budget: Budget) -> Budget:
    """``budget`` if a user may save it. Raises :class:`BudgetError` with one line otherwise."""
    if not NAME_RE.match(budget.name):
        raise BudgetError(f"bad budget name {budget.name!r}: letters, digits, '.', '_' and '-', at most 64")
    if (problem := amount_problem(budget.amount)) is not None:
        raise BudgetError(f"bad amount {budget.amount:g} for budget {budget.name}: {problem}")
    parse_scope(budget.scope)
    if not budget.thresholds:
        raise BudgetError(f"budget {budget.name} has no thresholds: give at least one, e.g. 80:notify")
    for t in budget.thresholds:
        if not 0 < t.percent <= MAX_PERCENT or not t.actions:
            raise BudgetError(f"bad threshold {format_threshold(t)} for budget {budget.name}")
    if budget.period is BudgetPeriod.CUSTOM:
        if budget.starts is None:
            raise BudgetError(f"budget {budget.name}: a custom period needs a start date")
        if budget.ends is not None and budget.ends <= budget.starts:
            raise BudgetError(f"budget {budget.name}: the period ends before it starts")
    elif budget.starts is not None or budget.ends is not None:
        raise BudgetError(f"budget {budget.name}: start and end dates are for custom periods only")
    if budget.webhook:
        url = budget.webhook
        local = any(url.startswith(f"http://{h}") and url[len(f"http://{h}"):][:1] in ("", ":", "/") for h in _LOCAL_HOSTS)
        if not (url.startswith("https://") or local):
            raise BudgetError(f"bad webhook {url!r}: use an https:// URL (http:// only to localhost)")
    if "\n" in budget.notify_command or "\0" in budget.notify_command:
        raise BudgetError("bad notify command: one line, please")
    return budget
