"""Prometheus alerting rules for the alerts the console raises, on the metrics it serves.

For teams that let Prometheus (and Alertmanager) decide: ``gpuconsole metrics rules`` prints
these as a rules file. Each rule reads only the families of :mod:`.metrics`, so a figure that
is unknown (no sample) never fires a rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

GROUP = "gpuconsole"
DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h|d|w|y))+$")


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One alerting rule: a name, a PromQL condition held ``hold`` long, and its words."""

    name: str
    expr: str
    hold: str
    severity: str
    summary: str
    description: str


RULES = (
    AlertRule("GpuconsoleIdleGpuCost", "gpuconsole_idle_gpu_cost_dollars_per_hour > 0", "10m", "warning",
              "Billed GPUs are idle",
              'Billed GPUs have done nothing for 10 minutes, costing ${{ printf "%.2f" $value }}/h.'),
    AlertRule("GpuconsoleBudgetForecastOverLimit",
              "gpuconsole_budget_forecast_dollars > gpuconsole_budget_limit_dollars", "15m", "warning",
              "Budget {{ $labels.budget }} is heading over its limit",
              'Budget {{ $labels.budget }} is forecast at ${{ printf "%.0f" $value }} by the end of its period.'),
    AlertRule("GpuconsoleBudgetSpentOverLimit",
              "gpuconsole_budget_spent_dollars >= gpuconsole_budget_limit_dollars", "1m", "critical",
              "Budget {{ $labels.budget }} is spent",
              'Budget {{ $labels.budget }} has spent ${{ printf "%.0f" $value }}, its limit or more.'),
    AlertRule("GpuconsolePendingGpus", "gpuconsole_pending_gpus > 0", "1h", "warning",
              "Jobs have waited an hour for GPUs",
              'Pending jobs have asked for GPUs for an hour; {{ printf "%.0f" $value }} GPU(s) wanted now.'),
    AlertRule("GpuconsoleJobsPending", "gpuconsole_jobs_pending > 0", "10m", "info",
              "Jobs of {{ $labels.namespace }} are pending",
              "{{ $value }} job(s) of namespace {{ $labels.namespace }} have been pending for 10 minutes or more."),
    AlertRule("GpuconsoleSourceDown", "gpuconsole_source_up == 0", "5m", "warning",
              "The {{ $labels.source }} source is down",
              "The {{ $labels.source }} source ({{ $labels.backend }}) has not answered for 5 minutes."),
    AlertRule("GpuconsoleAutopilotActionFailed",
              'increase(gpuconsole_autopilot_actions_total{outcome!="ok"}[15m]) > 0', "0s", "warning",
              "Autopilot rule {{ $labels.rule }} could not act",
              "A {{ $labels.action }} of autopilot rule {{ $labels.rule }} ended {{ $labels.outcome }} "
              "in the last 15 minutes."),
    AlertRule("GpuconsoleCriticalAlert", 'gpuconsole_alerts_active{severity="critical"} > 0', "5m", "critical",
              "The console shows a critical {{ $labels.kind }} alert",
              "{{ $value }} critical {{ $labels.kind }} alert(s) for 5 minutes: see gpuconsole snapshot."),
)


def check_duration(text: str) -> str:
    """``text`` if it is a Prometheus duration (``0s``, ``90s``, ``1h30m``); else ValueError."""
    if not DURATION.match(text):
        raise ValueError(f"not a Prometheus duration: {text!r} (e.g. 0s, 5m, 1h30m)")
    return text


def rules_document(hold: str | None = None) -> str:
    """The rules file (YAML) for ``promtool check rules`` and a Prometheus' ``rule_files``;
    with ``hold``, every rule's ``for`` is that instead (``0s`` to try them at once)."""
    rules = [{"alert": r.name, "expr": r.expr, "for": hold or r.hold, "labels": {"severity": r.severity},
              "annotations": {"summary": r.summary, "description": r.description}} for r in RULES]
    body = yaml.safe_dump({"groups": [{"name": GROUP, "rules": rules}]}, sort_keys=False, width=1000,
                          allow_unicode=True)
    return "# Alerting rules for the metrics of `gpuconsole metrics` (printed by `gpuconsole metrics rules`).\n" + body
