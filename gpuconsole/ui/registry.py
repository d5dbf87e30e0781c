"""Every pane, declared once: the app's number keys, the pane strip, the help, the palette and
the CSS list are all built from :data:`PANES`.

Adding a pane is one module (its class), one ``.tcss`` beside it and one line here. The class
is named by its import path and imported only when the panes are built, so the console's first
frame is painted before any pane's code (and the core's) is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class PaneSpec:
    """One pane: ``id`` (its container, ``#<id>-pane``), ``title`` (help, palette, the key's
    label), ``tab`` (the strip's label), ``short`` (the strip's label when the strip does not
    fit, at 80 columns), ``key`` (the number key), ``cls`` (``module:Class``), ``css`` (its
    stylesheet, relative to ``gpuconsole/ui``), ``opens`` (the views it opens whose keys
    the help lists beside its own: (heading, ``module:Class``)) and ``views`` (``:`` command
    words that open one of its views: (word, view))."""

    id: str
    title: str
    key: str
    cls: str
    tab: str = ""
    short: str = ""
    css: str = ""
    opens: tuple[tuple[str, str], ...] = ()
    views: tuple[tuple[str, str], ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        """The ``:`` commands that show the pane: its id and its titles, in lower case."""
        return tuple(dict.fromkeys(w.lower() for w in (self.id, self.tab_title, self.short_title)))

    @property
    def tab_title(self) -> str:
        return self.tab or self.title

    @property
    def short_title(self) -> str:
        return self.short or self.tab_title

    @property
    def css_path(self) -> str:
        return self.css or f"panes/{self.id}.tcss"


def _pane(pane_id: str, title: str, key: str, cls: str, **more: object) -> PaneSpec:
    return PaneSpec(pane_id, title, key, f"gpuconsole.ui.panes.{pane_id}:{cls}", **more)  # type: ignore[arg-type]


PANES: tuple[PaneSpec, ...] = (  # the tab order
    _pane("overview", "Overview", "1", "OverviewPane"),
    _pane("gpus", "GPUs", "2", "GpusPane",
          opens=(("GPU detail view (enter on a GPU)", "gpuconsole.ui.screens.gpu_detail:GpuDetailScreen"),),
          views=(("procs", "procs"), ("processes", "procs"))),
    _pane("jobs", "Jobs", "3", "JobsPane", views=(("cronjobs", "cron"), ("nodes", "nodes"), ("queues", "queues"))),
    _pane("instances", "Instances", "4", "InstancesPane", short="Inst"),
    _pane("budgets", "Budgets", "5", "BudgetsPane"),
    _pane("audit", "Audit", "6", "AuditPane"),
    _pane("autopilot", "Autopilot", "7", "AutopilotPane", short="Auto"),
    _pane("experiments", "Experiments", "8", "ExperimentsPane", tab="Exps"),
    _pane("services", "Services", "9", "ServicesPane", short="Svc",
          opens=(("Service view (enter on a service)", "gpuconsole.ui.panes.service_view:ServiceScreen"),)),
)

BY_ID: dict[str, PaneSpec] = {spec.id: spec for spec in PANES}


def load(dotted: str) -> type:
    """The class named ``module:Class``."""
    module, _, name = dotted.partition(":")
    return getattr(import_module(module), name)  # type: ignore[no-any-return]


def pane_class(pane_id: str) -> type[Any]:
    """The class of a pane (a :class:`~gpuconsole.ui.panes.base.Pane`), imported now, not when
    this module loads."""
    return load(BY_ID[pane_id].cls)


def import_panes() -> None:
    """Import every pane's code (the boot thread does it, so no pane imports on its first key)."""
    for spec in PANES:
        pane_class(spec.id)
