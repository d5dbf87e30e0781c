"""The panes: id → (title, number key). The order is the tab order.

``SHORT_TITLES``: the names the tab strip uses when the full ones do not fit (80 columns).
"""

from __future__ import annotations

PANES: dict[str, tuple[str, str]] = {
    "overview": ("Overview", "1"),
    "gpus": ("GPUs", "2"),
    "jobs": ("Jobs", "3"),
    "instances": ("Instances", "4"),
    "budgets": ("Budgets", "5"),
    "audit": ("Audit", "6"),
    "autopilot": ("Autopilot", "7"),
    "experiments": ("Exps", "8"),
}

SHORT_TITLES: dict[str, str] = {"autopilot": "Auto"}
