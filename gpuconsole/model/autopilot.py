"""What the console shows of each autopilot rule: its live figures, last decision, cooldown.
"""

from __future__ import annotations

from gpuconsole.model.value import Value


class AutopilotRuleStatus(Value):
    """One rule as the Autopilot pane lists it, at the snapshot's moment."""

    name: str
    kind: str  # "scale", "idle-stop", "spot-recover"
    scope: str
    condition: str  # the thresholds in words, e.g. "out: gpu_util > 80 for 10m · in: gpu_util < 20 for 30m"
    origin: str = "config"  # "config", "db" or "demo"
    figures: tuple[tuple[str, float], ...] = ()  # the live figures the last decision read
    thresholds: tuple[tuple[str, str], ...] = ()  # (figure, "> 80 for 10m") of each comparison
    decision: str = ""  # the last decision's verb: launch, stop, wait, none, blocked, paused…
    reason: str = ""
    decided_at: float | None = None
    acted: str = ""  # what the rule last did, and when
    acted_at: float | None = None
    cooldown_left_s: float = 0.0  # until the next action is possible
    paused: bool = False
    paused_reason: str = ""
