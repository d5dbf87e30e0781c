"""The key line at the bottom of every screen: Textual's ``Footer``, but when the keys do not
all fit it drops whole entries from the right (keeping the help key), never half a word.

At 80 columns a pane with seven keys showed ``r Refr`` before the palette key; now the entries
that fit are shown whole and ``?`` (every key, with what it does) stays.

It is rebuilt only when what it shows would change: a pane switch or a focus change announces
new bindings several times in one frame, and most leave the line as it is. Its entries are
made in their final style (Textual's own start compact, then learn the footer is not: two
style passes each, a few milliseconds a rebuild).
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.screen import Screen
from textual.widgets import Footer

KEPT = ("help",)  # actions whose key is shown while there is room for anything
PALETTE_CLASS = "-command-palette"


def is_key(entry: Widget) -> bool:
    """A footer entry for one key (Textual's ``FooterKey``: a key and its description)."""
    return hasattr(entry, "key_display") and hasattr(entry, "description") and hasattr(entry, "action")


def entry_width(key: Any, compact: bool) -> int:
    """The cells ``key`` takes in the footer, margins included (as Textual's CSS lays it out)."""
    if compact:
        return cell_len(key.key_display) + (1 + cell_len(key.description) if key.description else 0) + 1
    return 1 + cell_len(key.key_display) + 1 + (cell_len(key.description) + 1 if key.description else 0)


class KeyFooter(Footer):
    """A footer whose entries are whole or absent."""

    _pending = False
    _shown: tuple[Any, ...] | None = None

    def compose(self) -> ComposeResult:
        self._shown = self._signature()
        entries = list(super().compose())
        for entry in entries:  # made as they will be shown (bound to the footer's), before they are mounted
            if is_key(entry) and not entry.has_class(PALETTE_CLASS):
                entry.set_reactive(type(entry).compact, self.compact)
                entry.set_class(self.compact, "-compact", update=False)
        room = self.size.width or self.app.size.width
        palette = [e for e in entries if e.has_class(PALETTE_CLASS)]
        keys = [e for e in entries if is_key(e) and e not in palette]
        others = [e for e in entries if not is_key(e)]
        if others:  # groups of keys: laid out as Textual does, whole
            yield from entries
            return
        for entry in palette:
            room -= entry_width(entry, self.compact) + 1  # its left border
        yield from self._fitting(keys, room)
        yield from palette

    def _fitting(self, keys: list[Any], room: int) -> list[Widget]:
        widths = {id(k): entry_width(k, self.compact) for k in keys}
        kept = [k for k in keys if k.action in KEPT]
        room -= sum(widths[id(k)] for k in kept)
        shown: list[Any] = []
        for key in keys:
            if key in kept:
                shown.append(key)
            elif widths[id(key)] <= room:
                shown.append(key)
                room -= widths[id(key)]
            else:
                room = -1  # the first that does not fit ends the line: the order stays the order of importance
        return list(shown)

    def _signature(self) -> tuple[Any, ...] | None:
        """What the line would show: the bindings, their states and the room."""
        if not self._bindings_ready or not self.is_attached:
            return None
        shown = tuple((binding.key, binding.action, binding.description, enabled, tooltip)
                      for (_node, binding, enabled, tooltip) in self.screen.active_bindings.values() if binding.show)
        return shown, self.size.width, self.compact

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._rebuild_soon()

    def on_resize(self, event: events.Resize) -> None:
        self._rebuild_soon()  # the room is part of what it shows: a new width rebuilds it, a new height not

    def _rebuild_soon(self) -> None:
        if not self._pending:
            self._pending = True
            self.call_after_refresh(self._rebuild)

    async def _rebuild(self) -> None:
        self._pending = False
        if self.is_attached and self._signature() != self._shown:
            await self.recompose()
