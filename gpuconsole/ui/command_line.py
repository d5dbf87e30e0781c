"""The ``:`` command line, as in k9s: ``:gpus``, ``:jobs``, ``:cronjobs``, ``:nodes``, ``:ns
team-a``, ``:ctx prod``, ``:theme light``, ``:q``.

The pane words come from the pane declarations (:data:`gpuconsole.ui.registry.PANES`), so a new
pane is a new command without anyone writing it here. ``tab`` (or ``→``) takes the completion
shown after the cursor; ``enter`` runs the line; ``esc`` closes it. A line that is no command
is one line on screen, naming the commands there are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.binding import Binding
from textual.suggester import SuggestFromList
from textual.widgets import Input

from gpuconsole.ui.registry import PANES

TAKES_A_NAME = ("ns", "ctx", "theme")  # followed by a name: ":ns team-a"
PLAIN = ("q", "quit", "help")


@dataclass(frozen=True)
class Command:
    """What a line asks for: ``pane`` (and its ``view``), or ``verb`` with ``arg``."""

    verb: str
    arg: str = ""
    pane: str = ""
    view: str = ""


def pane_words() -> dict[str, tuple[str, str]]:
    """``:word`` → (pane id, view) for every pane and every view a pane declares."""
    out: dict[str, tuple[str, str]] = {}
    for spec in PANES:
        for word in spec.words:
            out.setdefault(word, (spec.id, ""))
        for word, view in spec.views:
            out.setdefault(word, (spec.id, view))
    return out


def completions() -> list[str]:
    return [*pane_words(), *(f"{verb} " for verb in TAKES_A_NAME), *PLAIN]


class CommandError(ValueError):
    """A line that is not a command: the message is one line naming what there is."""


def parse(line: str) -> Command | None:
    """The command a line names (a leading ``:`` is allowed), None for an empty line."""
    words = line.strip().removeprefix(":").split()
    if not words:
        return None
    verb, rest = words[0].lower(), " ".join(words[1:])
    panes = pane_words()
    if verb in panes and not rest:
        pane, view = panes[verb]
        return Command("show", pane=pane, view=view)
    if verb in TAKES_A_NAME:
        if verb != "ns" and not rest:
            raise CommandError(f":{verb} needs a name, e.g. :{verb} {'prod' if verb == 'ctx' else 'light'}")
        return Command(verb, rest)
    if verb in PLAIN and not rest:
        return Command(verb)
    known = " ".join(f":{w}" for w in (*panes, *TAKES_A_NAME, "q"))
    raise CommandError(f"no command :{' '.join(words)[:40]}; there are {known}")


class CommandLine(Input):
    """One line at the foot of the screen, opened with ``:``."""

    BINDINGS = [
        Binding("escape", "close", "Close", show=False),
        Binding("tab", "complete", "Complete", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(placeholder="command: gpus jobs cronjobs nodes ns NAME ctx NAME theme NAME q",
                         suggester=SuggestFromList(completions(), case_sensitive=False), **kwargs)
        self.can_focus = False  # hidden until ":": never the widget the screen focuses first

    def open(self) -> None:
        self.value = ""
        self.display = self.can_focus = True
        self.focus()

    def action_close(self) -> None:
        self.value = ""
        self.display = self.can_focus = False
        pane = getattr(self.app, "current_pane", None)
        if pane is not None:
            pane.focus_body()

    def action_complete(self) -> None:
        """Take the completion shown after the cursor (what ``→`` at the end of the line does)."""
        self.cursor_position = len(self.value)
        self.action_cursor_right()
