"""The budget book: which budgets there are, where each comes from, and what has fired.

Budgets come from three places; a name taken by an earlier one hides a later budget of that name:

* the demo's budgets (in the demo only, origin ``"demo"``), the sprint sized to the demo fleet;
* the configuration file (origin ``"config"``): shown and enforced, never changed from here;
* the Store (origin ``"store"``), or this session's memory when there is no Store, and always
  in the demo: budgets added in a demo are kept in memory only and never reach the Store, so a
  real session (or a cron ``budget check --enforce``) never sees them.

Adding and removing check where a budget comes from and write the Store; :class:`BudgetOps`
(:mod:`gpuconsole.core.ops.budget_ops`) runs both through the action path, which records them.

The book also keeps what has fired: one :data:`FiredKey` per notification or automatic action,
per threshold and period. It is read from the Store (``budget_fired``) and written back to it,
except in the demo, whose fired state stays in memory so a demo never silences a real
notification. :attr:`BudgetBook.lock` guards the book; its owner shares it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from msgspec.structs import replace

from gpuconsole.backends.base import BackendError, one_line
from gpuconsole.core.config import ConfigFile
from gpuconsole.core.money import budgets as rules
from gpuconsole.model import Budget, Instance

log = logging.getLogger(__name__)

FiredKey = tuple[str, str, str, float]  # (budget, threshold key, action, period start)


class BudgetStore(Protocol):
    """Where budgets and their fired state are saved (:class:`gpuconsole.core.fleet.store.Store`)."""

    def budgets(self) -> list[Budget]: ...

    def budget_fired(self) -> set[FiredKey]: ...

    def save_budget(self, budget: Budget, *, replace: bool = False) -> bool: ...

    def delete_budget(self, name: str) -> bool: ...

    def mark_budget_fired(self, budget: str, threshold: str, action: str, period_start: float, at: float) -> bool: ...


class BudgetBook:
    """The budgets of one console session and what they have fired.

    Args:
        config: the configuration file's budgets.
        demo_start: the demo's start; None outside the demo (no demo budgets).
        warn: told, in one line, about a problem the console works on through (saved budgets
            that cannot be read).

    Attributes:
        lock: guards the book (re-entrant; :class:`BudgetOps` holds it for its own state too).
        fired: the keys fired so far (notifications and automatic actions); change it only
            under :attr:`lock`.
    """

    def __init__(self, config: ConfigFile | None = None, *, demo_start: float | None = None,
                 warn: Callable[[str], None] = lambda _message: None) -> None:
        self.config = config or ConfigFile(None)
        self.lock = threading.RLock()
        self.fired: set[FiredKey] = set()
        self._warn = warn
        self._store: BudgetStore | None = None
        self._ready = False
        self._stored: dict[str, Budget] = {}
        self._demo_start = demo_start
        self._sprint: Budget | None = None

    # ------------------------------------------------------------------ the Store
    def attach(self, store: BudgetStore | None) -> None:
        """Read budgets and fired state from ``store`` (None: there will be none); the book is
        then :attr:`ready`.

        Blocking (SQLite). Budgets added while the Store was still opening are saved into it.
        """
        if self.demo:
            store = None  # a demo's budgets live and die with it: never read or written to the Store
        loaded: list[Budget] = []
        fired: set[FiredKey] = set()
        if store is not None:
            try:
                loaded = store.budgets()
                fired = store.budget_fired()
            except Exception as exc:  # noqa: BLE001 - the console works on without saved budgets
                self._warn(f"cannot read saved budgets: {one_line(exc)}")
        with self.lock:
            session_only = [b for name, b in self._stored.items() if name not in {x.name for x in loaded}]
            self._store = store
            self._stored = {b.name: replace(b, origin="store") for b in loaded}
            self._stored.update({b.name: b for b in session_only})
            if not self.demo:
                self.fired |= fired
            self._ready = True
        if store is not None:
            for budget in session_only:
                try:
                    store.save_budget(budget, replace=True)
                except Exception:  # noqa: BLE001 - it stays for the session
                    log.warning("could not save budget %s", budget.name, exc_info=True)

    @property
    def ready(self) -> bool:
        """Whether the Store is known (attached, or known to be missing): until then the fired
        state is unknown, and nothing may fire."""
        return self._ready

    def remember(self, key: FiredKey, clock: Callable[[], float]) -> None:
        """Save a fired key in the Store, fired at ``clock()`` (not for the demo, whose fired
        state stays in memory)."""
        store = self._store
        if store is None or self.demo:
            return
        try:
            store.mark_budget_fired(*key, clock())
        except Exception:  # noqa: BLE001 - in memory it still holds for this session
            log.warning("could not record a fired budget action", exc_info=True)

    # ------------------------------------------------------------------ the demo
    @property
    def demo(self) -> bool:
        return self._demo_start is not None

    def set_demo(self, start: float) -> None:
        """Switch to the demo: demo budgets, and budgets and fired state in memory only (the
        real session's saved budgets are left behind in the Store, untouched)."""
        with self.lock:
            self._demo_start = start
            self._sprint = None
            self.fired = set()
            self._store = None
            self._stored = {}

    def size_sprint(self, instances: Sequence[Instance]) -> None:
        """Size the demo's sprint budget to the demo fleet, at its first reading with instances."""
        with self.lock:
            if self._demo_start is not None and self._sprint is None and instances:
                self._sprint = rules.size_sprint(rules.DEMO_SPRINT, instances, self._demo_start)

    # ------------------------------------------------------------------ reading
    def budgets(self) -> tuple[Budget, ...]:
        """Demo budgets (in the demo), then the configuration file's, then the Store's; a name
        already taken by an earlier source hides a later budget of that name."""
        with self.lock:
            demo: tuple[Budget, ...] = ()
            if self._demo_start is not None:
                demo = tuple(self._sprint if b is rules.DEMO_SPRINT and self._sprint else b for b in rules.DEMO_BUDGETS)
            out: dict[str, Budget] = {}
            for budget in (*demo, *self.config.budgets, *self._stored.values()):
                out.setdefault(budget.name, budget)
            return tuple(out.values())

    def get(self, name: str) -> Budget | None:
        return next((b for b in self.budgets() if b.name == name), None)

    # ------------------------------------------------------------------ changing
    def check_add(self, budget: Budget, *, replace: bool = False) -> tuple[Budget, Budget | None]:
        """The budget to save (origin ``"store"``) and the saved one it replaces, if any.

        Raises:
            rules.BudgetError: invalid, or the name is taken (by the configuration file or the
                demo, or by a saved budget without ``replace``); one line.
        """
        rules.validate(budget)
        existing = self.get(budget.name)
        if existing is not None and existing.origin != "store":
            raise rules.BudgetError(self._not_here(existing, "changed"))
        if existing is not None and not replace:
            raise rules.BudgetError(f"budget {budget.name} exists: remove it first, or replace it")
        return _as_store(budget), existing

    def save(self, budget: Budget, *, replace: bool, existing: Budget | None) -> str:
        """Save a budget :meth:`check_add` returned; one line saying what was done.

        Raises:
            BackendError: the Store failed, or the name was taken meanwhile (one line).
        """
        store = self._store
        if store is not None:
            try:
                saved = store.save_budget(budget, replace=replace)
            except Exception as exc:  # noqa: BLE001 - StoreError, sqlite errors: one line
                raise BackendError(f"cannot save budget {budget.name}: {one_line(exc)}") from exc
            if not saved:
                raise BackendError(f"budget {budget.name} exists: remove it first, or replace it")
        with self.lock:
            self._stored[budget.name] = budget
        where = ("" if store is not None else " (kept for this demo session only: nothing is saved)" if self.demo
                 else " (kept for this session only: no database)")
        return f"{'replaced' if existing else 'added'} budget {describe(budget)}{where}"

    def remove(self, name: str) -> str:
        """Delete a saved budget and forget what it fired; one line saying what was done.

        Raises:
            BackendError: a budget of the configuration file or the demo, an unknown name, or the
                Store failed (one line).
        """
        existing = self.get(name)
        if existing is None:
            raise BackendError(f"no budget named {name}")
        if existing.origin != "store":
            raise BackendError(self._not_here(existing, "removed"))
        store = self._store
        if store is not None:
            try:
                store.delete_budget(name)
            except Exception as exc:  # noqa: BLE001
                raise BackendError(f"cannot remove budget {name}: {one_line(exc)}") from exc
        with self.lock:
            self._stored.pop(name, None)
            self.fired = {k for k in self.fired if k[0] != name}
        return f"removed budget {name}"

    def _not_here(self, budget: Budget, verb: str) -> str:
        if budget.origin in ("config", "login"):  # the file's (plan only on a shared machine)
            where = self.config.path or "the configuration file"
            return (f"budget {budget.name} is declared in the config file {where}: "
                    f"it cannot be {verb} from the console; edit the file")
        return f"budget {budget.name} is a demo budget: it cannot be {verb}"


def describe(budget: Budget) -> str:
    """``research: $1,000 monthly, scope tag:Budget=research, thresholds 80:notify 100:notify+stop-all, automatic``."""
    text = (f"{budget.name}: {rules.usd(budget.amount)} {rules.describe_period(budget)}, scope {budget.scope}, "
            f"thresholds {' '.join(rules.format_threshold(t) for t in budget.thresholds)}")
    return text + (", automatic" if budget.automatic else "")


def _as_store(budget: Budget) -> Budget:
    return budget if budget.origin == "store" else replace(budget, origin="store")
