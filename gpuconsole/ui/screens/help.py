"""``?``: the keys of the screen and pane the user is on, readable at 80×24.

The list is made from the bindings themselves (the screen's, the pane's and the app's), so a
key added to a pane is in the help without anyone writing it down twice. A binding's
``tooltip`` is its longer description here; its footer label stands in where it has none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.actions import parse
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuconsole.ui.registry import BY_ID, PANES, load
from gpuconsole.ui.widgets.pane_tabs import PaneTabs

# Keys that belong to no binding of a pane, screen or the app: the tables' own.
GENERAL: list[tuple[str, str]] = [
    ("↑ ↓ pgup pgdn", "move in a table (j k g G too, as in less and k9s)"),
    ("enter", "details of the selected row"),
]
PALETTE_WORDS = "command palette: every action, find a GPU, job or instance"

Section = tuple[str, list[tuple[str, str]]]
NONE_OF_ITS_OWN = [("", "no keys of its own")]


class HelpScreen(ModalScreen[None]):
    """Key bindings. Any of ``esc``, ``q`` or ``?`` closes it.

    The keys listed are those of the screen under it (a form, the GPU detail view) or, on the
    main screen, of the pane on screen, then the app's own.
    """

    CSS_PATH = "help.tcss"

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        # Read what is under the help while it is still on top (the focus, the screen stack);
        # outside a running app there is nothing to read yet, and compose reads it instead.
        self.sections: list[Section] | None = None
        try:
            self.sections = key_sections(self.app, self)
        except RuntimeError:  # no active app (NoActiveAppError): made outside one, read in compose
            self.sections = None

    def compose(self) -> ComposeResult:
        sections = self.sections if self.sections is not None else key_sections(self.app, self)
        width = max((len(key) for _, rows in sections for key, _ in rows), default=1)
        parts: list[Text | Table] = []
        for n, (title, rows) in enumerate(sections):
            parts.append(Text(("\n" if n else "") + title, style="bold underline"))
            table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=False)
            table.add_column(style="bold", no_wrap=True, min_width=width)
            table.add_column()
            for key, what in rows:
                table.add_row(key, what)
            parts.append(table)
        with VerticalScroll(id="help-box") as box:
            box.border_title = "gpuconsole keys"
            box.border_subtitle = "esc to close"
            yield Static(Group(*parts), id="help-keys")


# Longer words for the app's own keys (the app's bindings carry only their footer labels); a
# key is listed because it is bound, never because it is named here.
APP_WORDS: dict[str, str] = {
    "show_pane": " · ".join(spec.short_title for spec in PANES),
    "cycle_pane": "next / previous pane",
    "filter": "filter the current table; enter keeps it, esc clears",
    "refresh": "poll every source now",
    "next_theme": "next theme (dark, light, contrast)",
    "demo": "switch to the demo when a backend is not set up",
    "help": "the keys of this pane or screen (this help)",
    "cost_calculator": "cost comparison: own server vs on-demand vs spot",
    "quit_key": "quit",
    "command_line": "command line: :gpus :jobs :cronjobs :ns NAME :ctx NAME :q",
    "quit": "quit, even while typing in a field",
}


def key_sections(app: Any, helper: object = None) -> list[Section]:
    """(title, [(keys, what they do)]) for the screen under ``helper`` (the help screen), the
    pane on screen when that is the main screen, and the app: every binding with words."""
    stack = [s for s in app.screen_stack if s is not helper]
    under = stack[-1] if stack else None
    display = getattr(app, "get_key_display", None)
    sections: list[Section] = []
    taken: set[str] = set()  # keys a nearer binding takes: the app's binding of that key does not run
    if under is not None and len(stack) > 1:
        sections.append((title_of(under), rows_of(_bindings(under), taken, display) or NONE_OF_ITS_OWN))
    else:
        pane = getattr(app, "current_pane", None)
        if pane is not None:
            sections.append((f"{pane_title(app, stack)} pane", rows_of(_bindings(pane), taken, display) or NONE_OF_ITS_OWN))
            for title, screen in screens_opened_from(getattr(app, "active_pane", "")):
                sections.append((title, rows_of(_bindings(screen, own_only=True), set(), display)))
    # Over a dialog (a modal screen) only the app's priority keys reach the app, as in Textual.
    modal = under is not None and len(stack) > 1 and bool(getattr(under, "is_modal", False))
    app_bindings = [b for b in _bindings(app)
                    if (b.priority or (b.key not in taken and not modal)) and _allowed(app, b)]
    rows = rows_of(app_bindings, set(), display, APP_WORDS)
    if not modal:
        palette = Binding(getattr(app, "COMMAND_PALETTE_BINDING", "ctrl+p"), "command_palette", "Palette")
        rows += [*GENERAL, (_key_display(palette.key, palette, display), PALETTE_WORDS)]
    sections.append(("Everywhere", rows))
    return [(title, rows) for title, rows in sections if rows]


def screens_opened_from(pane_id: str) -> list[tuple[str, type]]:
    """The views a pane opens whose keys the help lists beside the pane's (their keys come from
    their bindings): the GPU detail view from the GPUs pane."""
    spec = BY_ID.get(pane_id)
    return [(heading, load(cls)) for heading, cls in spec.opens] if spec is not None else []


def rows_of(bindings: Iterable[Binding], taken: set[str], display: Any = None,
            words_of: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """One row per action: the keys of bindings that run the same action (``1`` … ``6``,
    ``T`` / ``K``) share a row. Keys are added to ``taken``; a binding without words is left out.

    The words are the binding's tooltip, else ``words_of[action]``, else its footer label.
    """
    rows: list[tuple[list[str], list[str]]] = []
    names: list[str] = []
    for binding in bindings:
        keys = [k.strip() for k in binding.key.split(",")]
        taken.update(keys)
        if not binding.description or binding.system:
            continue
        _, name, _ = parse(binding.action)
        words = binding.tooltip or (words_of or {}).get(name) or binding.description
        shown = [_key_display(k, binding, display) for k in keys]
        if names and names[-1] == name and (words in rows[-1][1] or not binding.tooltip):
            rows[-1][0].extend(shown)
            if words not in rows[-1][1]:
                rows[-1][1].append(words)
            continue
        names.append(name)
        rows.append((shown, [words]))
    return [(" ".join(dict.fromkeys(keys)), " · ".join(words)) for keys, words in rows]


_NAMED_KEYS = {"question_mark": "?", "slash": "/", "dollar_sign": "$", "escape": "esc"}


def _key_display(key: str, binding: Binding, display: Any) -> str:
    """The key as the footer prints it (``?``, ``^s``, ``esc``)."""
    if binding.key_display:
        return binding.key_display
    if display is None:
        return _NAMED_KEYS.get(key, key)
    return str(display(Binding(key, binding.action, binding.description)))


def _bindings(node: object, *, own_only: bool = False) -> list[Binding]:
    """The bindings of ``node`` (an instance or a class) and its bases, nearest first; a key
    bound twice keeps the nearer binding (as Textual does). ``own_only``: gpuconsole's classes
    only, not Textual's (focus and copy keys, noise in a view listed from its pane)."""
    seen: set[str] = set()
    out: list[Binding] = []
    for cls in (node if isinstance(node, type) else type(node)).__mro__:
        if own_only and not cls.__module__.startswith("gpuconsole."):
            continue
        for item in cls.__dict__.get("BINDINGS", ()):
            binding = item if isinstance(item, Binding) else Binding(*item)
            if binding.key in seen:
                continue
            seen.add(binding.key)
            out.append(binding)
    return out


def _allowed(app: Any, binding: Binding) -> bool:
    """Whether the app would run ``binding`` now (over a form, 1 … 6 and / do nothing)."""
    _, name, params = parse(binding.action)
    return app.check_action(name, params) is not False


def title_of(screen: object) -> str:
    """``GpuDetailScreen`` → ``GPU detail``, ``BudgetForm`` → ``Budget form``."""
    words = re.findall(r"[A-Z][a-z0-9]*", type(screen).__name__.removesuffix("Screen")) or ["This", "screen"]
    first, *rest = words
    text = " ".join([first, *(w.lower() for w in rest)])
    return re.sub(r"\bGpu\b", "GPU", text)


def pane_title(app: Any, stack: list[Any]) -> str:
    """The title of the pane on screen as its tab shows it (``GPUs``)."""
    active = getattr(app, "active_pane", "")
    try:
        tabs = stack[0].query_one(PaneTabs) if stack else None
    except NoMatches:
        tabs = None
    if tabs is not None and active in tabs.panes:
        return tabs.panes[active].tab_title
    return str(active).capitalize() or "This"
