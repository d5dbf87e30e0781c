"""Changes to the rules themselves (add, remove, pause, resume), through the one action path.

The command line and the Autopilot pane call these, so a rule added from either is checked the
same way (admins only), validated the same way, and audited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpuconsole.core.ops.actions import ActionKind, ActionLog, ActionRequest, ActionResult, run_action
from gpuconsole.core.ops.autopilot.rules import Rule, RuleError, rule_from_table
from gpuconsole.core.ops.autopilot.state import AutopilotState


def add_rule(state: AutopilotState, table: Mapping[str, Any], existing: Sequence[Rule], log: ActionLog,
             clock: Callable[[], float] = time.time) -> ActionResult:
    """Check ``table`` and keep it in the database as a rule.

    Raises:
        RuleError: the table is not a valid rule, or its name is taken (one line; nothing audited,
            nothing changed).
        ActionError: denied (audited).
    """
    rule = rule_from_table(table, origin="db")
    if rule.name in {r.name for r in existing}:
        raise RuleError(f"rule {rule.name!r} key name: a rule of that name exists already")

    def do() -> str:
        state.add_rule(rule.name, dict(table))
        return f"added rule {rule.name} ({rule.kind}, {rule.scope.text()})"

    request = ActionRequest(ActionKind.RULE_ADD, rule.name, params=(("kind", rule.kind), ("scope", rule.scope.text())))
    return run_action(request, do, log, clock)


def remove_rule(state: AutopilotState, rule: Rule, log: ActionLog, clock: Callable[[], float] = time.time) -> ActionResult:
    """Remove a rule added to the database. Raises :class:`RuleError` for a config file's rule."""
    if rule.origin != "db":
        raise RuleError(f"rule {rule.name!r} is declared in the config file: remove it there")

    def do() -> str:
        state.remove_rule(rule.name)
        return f"removed rule {rule.name}"

    return run_action(ActionRequest(ActionKind.RULE_REMOVE, rule.name, confirmation="yes"), do, log, clock)


def set_paused(state: AutopilotState, rule: Rule, paused: bool, log: ActionLog,
               clock: Callable[[], float] = time.time) -> ActionResult:
    """Pause or resume a rule (a resume also clears its failure count)."""
    kind = ActionKind.RULE_PAUSE if paused else ActionKind.RULE_RESUME

    def do() -> str:
        state.set_paused(rule.name, paused, "paused by a user")
        return f"{'paused' if paused else 'resumed'} rule {rule.name}"

    return run_action(ActionRequest(kind, rule.name), do, log, clock)
