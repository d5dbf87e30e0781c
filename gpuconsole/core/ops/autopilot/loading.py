"""Where the autopilot's rules and state live: ``[[rules]]`` in the config file, rules added
with ``rule add`` in the autopilot's database, and that database's path."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from gpuconsole.core.config import ConfigError, parse_toml, read_config_text
from gpuconsole.core.ops.autopilot.rules import PLAN_ONLY, Rule, RuleError, rule_from_table, rules_from_tables
from gpuconsole.core.ops.autopilot.state import AutopilotState
from gpuconsole.core.paths import default_db_path

STATE_ENV = "GPUCONSOLE_AUTOPILOT_DB"


def state_path() -> Path:
    """``$GPUCONSOLE_AUTOPILOT_DB``, else ``autopilot.db`` beside the cache database."""
    override = os.environ.get(STATE_ENV)
    return Path(override).expanduser() if override else default_db_path().parent / "autopilot.db"


def config_rules(config: Path | str | None) -> tuple[Rule, ...]:
    """The ``[[rules]]`` of the configuration file. Raises :class:`RuleError` (one line)."""
    try:
        path, text = read_config_text(config)
        data: dict[str, Any] = parse_toml(text, path) if text is not None else {}
    except ConfigError as exc:
        raise RuleError(str(exc)) from None
    if "rules" not in data:
        return ()
    return rules_from_tables(data["rules"], where=f"{path}: ")


def console_rules(config: Path | str | None, state: AutopilotState, *, demo: bool,
                  site_config: Path | None = None) -> tuple[Rule, ...]:
    """What the console runs: the configured rules (in a demo whose file has none, the demo's),
    then the ones added to the database; a rule added in the demo joins the demo's.

    ``site_config``: on a shared machine (site settings exist), the site's config file. Rules that
    act by themselves then come only from it and from ``rule add`` (admin, MFA, audited): the
    rules of a login's own file are kept, plan only (:data:`~.rules.PLAN_ONLY`), since no one
    reviewed them and they would act as the automation identity.
    """
    if site_config is not None and not demo:
        site = tuple(r for r in config_rules(site_config)) if Path(site_config).is_file() else ()
        names = {r.name for r in site}
        mine = tuple(dataclasses.replace(r, origin=PLAN_ONLY) for r in config_rules(config) if r.name not in names)
        if not _same_file(config, site_config):
            return _with_added((*site, *mine), state)
    rules = config_rules(config)
    if demo and not rules:
        from gpuconsole.core.ops.autopilot.demo import DEMO_RULES

        rules = tuple(rule_from_table(t, origin="demo", where="demo: ") for t in DEMO_RULES)
    return _with_added(rules, state)


def _same_file(config: Path | str | None, site_config: Path) -> bool:
    path, _text = read_config_text(config)
    try:
        return Path(path).resolve() == Path(site_config).resolve()
    except OSError:
        return False


def all_rules(config: Path | str | None, state: AutopilotState) -> tuple[Rule, ...]:
    """The file's rules, then the database's; a name used twice is an error."""
    return _with_added(config_rules(config), state)


def _with_added(declared: tuple[Rule, ...], state: AutopilotState) -> tuple[Rule, ...]:
    rules = list(declared)
    names = {r.name for r in rules}
    for table in state.added_rules():
        rule = rule_from_table(table, origin="db", where="database: ")
        if rule.name in names:
            raise RuleError(f"database: rule {rule.name!r} key name: the config file declares it too")
        rules.append(rule)
    return tuple(rules)
