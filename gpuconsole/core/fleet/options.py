"""Everything that shapes a console session, as the command line (or a test) fills it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpuconsole.core.fleet.sources import SourceOptions

if TYPE_CHECKING:
    from gpuconsole.core.access.guard import Guard


@dataclass
class ConsoleOptions:
    """Everything that shapes a console session (the CLI fills it from flags)."""

    sources: SourceOptions = field(default_factory=SourceOptions)
    db_path: Path | None = None
    no_db: bool = False  # --no-db: nothing is kept on disk (cache, experiments) beyond this process
    interval: float = 1.0
    timeout: float = 5.0
    clock: Callable[[], float] = time.time
    use_cache: bool = True
    config_path: Path | None = None  # --config; None: $GPUCONSOLE_CONFIG or the user config dir
    cost_explorer_calls: int = 4  # Cost Explorer requests a day at most (each is billed); 0: none
    act_on_budgets: bool = True  # notify and run automatic budget actions as snapshots show them due
    read_only: bool = False  # --read-only: every change is denied, to everyone
    automation: bool = False  # it acts by itself (autopilot run, budget check --enforce): AWS as [aws.roles] automation
    guard: Guard | None = None  # who may act, and the audit log; None: the files of this home
