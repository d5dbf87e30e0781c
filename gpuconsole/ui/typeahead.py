"""The type-ahead gate: typed keys are handed out one at a time, each once the one before has
been handled.

Textual gives a key to the widget focused when the app reads it, and the app reads a burst (a
fast typist over SSH, one ``tmux send-keys``) before the first key of it has run its binding:
in ``/qwen`` the ``q`` went to the table, not to the filter that ``/`` opens, and quit. So a key
is handed out only once the one before has been through every widget on its way (and what it
posted to them, such as ``Input.Submitted``, too), and a screen being pushed has mounted and
focused its first field: it then goes where the key before sent the focus.

Text typed into a field goes in whole: the printable keys held behind one for a text field
(a paste without bracketed paste, 2,000 characters at once) are handed to it as one paste, so
the field changes once, not once a character, each a filter pass and a frame (a 2,000-character
paste into the Jobs filter held the next key back for seconds). Only keys that would have gone
to that field anyway are joined: plain characters (no modifier, no binding that outranks the
field) while an ``Input`` that takes any text has the focus; a field with a length limit or a
character restriction gets them one by one, as typed, so it keeps each allowed one.

Esc is Esc: over SSH a bare Esc and the key typed right after it arrive together and read as
Alt and that key (``/bert`` then ``Esc 4`` left ``filter: bert¢``). An Alt key that nothing
on screen binds is handed out as Esc, then the key.

This is the one module that reads private Textual names (a node's pending callbacks, which have
no public accessor, and the terminal's escape sequence table, from which the macOS Option-digit
glyphs are dropped so Esc and a digit stay two keys); ``tests/test_ui_house.py`` names the
Textual version they were checked against.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable

from textual import _ansi_sequences, events
from textual.app import App, ScreenStackError
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input

CHECKED_WITH_TEXTUAL = "8.2.8"  # the version whose private names below (see the docstring) were read
# A typed key waits for the one before it; one whose handling never ends (its widget went away with
# it) stops holding the others back after this long.
STUCK_S = 3.0
PASSES = 3  # times a key's way is followed while handling it leaves messages on it


# Esc then a digit, read by Textual as the glyph a macOS terminal sends for Option and that digit.
OPTION_GLYPHS = tuple(f"\x1b{c}" for c in "§1234567890-=")
for _sequence in OPTION_GLYPHS:
    _ansi_sequences.ANSI_SEQUENCES_KEYS.pop(_sequence, None)


def esc_then_key(event: events.Key, bound: frozenset[str] | set[str]) -> list[events.Key]:
    """``event`` as it was typed: an Alt key that nothing in ``bound`` takes is Esc, then the
    key (both stamped with the time the terminal read them)."""
    name, character = event.key, event.character
    if not name.startswith("alt+") or name in bound or len(character or "") != 1 or not character.isprintable():
        return [event]
    out = [events.Key("escape", "\x1b"), events.Key(name.removeprefix("alt+"), character)]
    for key in out:
        key.time = event.time
    return out


def plain_character(event: object) -> bool:
    """Whether ``event`` is one printable character typed without a modifier (``a``, ``Q``,
    ``space``, ``plus``), which a focused text field inserts."""
    if not isinstance(event, events.Key) or "+" in event.key:
        return False
    character = event.character
    return character is not None and len(character) == 1 and character.isprintable()


def takes_any_text(field: Input) -> bool:
    """Whether ``field`` inserts a run of characters as it would insert them one by one: no
    length limit and no restriction that could refuse a whole run but keep some of it."""
    return not field.max_length and not field.restrict and field.type == "text"


def now() -> float:
    """The clock Textual stamps a message's ``time`` with (its ``_time.get_time``)."""
    return time.perf_counter() if sys.platform == "win32" else time.monotonic()


def busy(node: MessagePump) -> bool:
    """Whether ``node`` has messages or callbacks waiting."""
    return node.message_queue_size > 0 or bool(node._next_callbacks)  # noqa: SLF001 - no public accessor


class _Booting:
    """Held keys wait on this while the console is being built."""

    def __repr__(self) -> str:
        return "<booting>"


BOOTING = _Booting()


class TypeAhead:
    """Holds the keys typed while the one before is being handled, for one app.

    ``dispatch`` hands one key to the app the way Textual would (``App.on_event``); ``booting``
    says whether the console is still being built (held keys then wait for :meth:`done`
    ``(BOOTING)``).
    """

    def __init__(self, app: App[object], dispatch: Callable[[events.Event], Awaitable[None]],
                 booting: Callable[[], bool]) -> None:
        self.app = app
        self._dispatch = dispatch
        self._booting = booting
        self._typed: deque[events.Key | events.Paste] = deque()
        # the key being handled, the screen being waited for, or BOOTING while the console is built
        self._typing: object | None = BOOTING if booting() else None
        self._since = 0.0
        self._timer: Timer | None = None
        self.last_key_at = 0.0  # time.monotonic() when the terminal last sent a key

    @property
    def held(self) -> int:
        """How many typed keys wait."""
        return len(self._typed)

    @property
    def key(self) -> events.Key | events.Paste | None:
        """The typed key being handled now (None: what runs was not started by a key)."""
        typing = self._typing
        return typing if isinstance(typing, (events.Key, events.Paste)) else None

    def drop_held(self) -> int:
        """Forget the keys typed ahead (they would have reached a confirmation); how many."""
        dropped = len(self._typed)
        self._typed.clear()
        return dropped

    async def take(self, event: events.Key | events.Paste) -> None:
        """A key the terminal sent: handle it now, or hold it behind the one being handled."""
        self.last_key_at = time.monotonic()
        if isinstance(event, events.Key) and event.key.startswith("alt+"):
            try:
                bound = set(self.app.screen.active_bindings)
            except ScreenStackError:
                bound = set()
            self._typed.extend(esc_then_key(event, bound))
        else:
            self._typed.append(event)
        if self._typing is None:
            await self._next_key()
        elif self._timer is None:
            self._timer = self.app.set_timer(STUCK_S, self._stuck)

    async def done(self, what: object) -> None:
        """``what`` (a key, a screen, :data:`BOOTING`) has been handled: the next key goes."""
        if self._typing is what:
            self._typing = None
            await self._next_key()

    async def _next_key(self) -> None:
        app = self.app
        while self._typing is None and self._typed:
            try:
                screen = app.screen
            except ScreenStackError:  # closing
                self._typed.clear()
                return
            if not screen.is_mounted:
                # A screen is being pushed: its keys wait until it has composed and focused.
                self._begin(screen)
                if screen.call_later(self._screen_ready, screen):
                    return
                self._typing = None
                continue
            event = self._typed.popleft()
            if isinstance(event, events.Key) and self._typed:
                event = self._typed_text(event)
            self._begin(event)
            await self._dispatch(event)  # priority bindings, else to the focused widget
            if self._typing is not event:
                continue  # given up on while it was handled (see _stuck)
            path: tuple[MessagePump, ...] = (app,)
            if event.is_forwarded:
                target = app.focused or app.screen
                path = tuple(target.ancestors_with_self)
            self._follow(event, path, 0, PASSES)
            return

    def _typed_text(self, first: events.Key) -> events.Key | events.Paste:
        """``first`` and the plain characters held behind it as one paste into the focused text
        field, when they would all have been typed into it; else ``first`` alone."""
        held = self._typed
        if not (plain_character(first) and plain_character(held[0])):
            return first
        field = self.app.focused
        if not isinstance(field, Input) or not takes_any_text(field):
            return first
        try:
            outranking = {key for key, active in self.app.screen.active_bindings.items() if active.binding.priority}
        except ScreenStackError:
            return first
        if first.key in outranking:
            return first
        characters = [first.character or ""]
        while held and plain_character(held[0]) and held[0].key not in outranking:
            characters.append(held.popleft().character or "")  # type: ignore[union-attr]
        if len(characters) == 1:
            return first
        text = events.Paste("".join(characters))
        text.time = first.time  # the first key's: a confirmation asks when the typing began
        return text

    def _begin(self, what: object) -> None:
        self._typing = what
        self._since = now()

    def _follow(self, event: object, path: tuple[MessagePump, ...], at: int, passes: int) -> None:
        """Runs in the task of ``path[at - 1]`` once that node has handled what was queued before
        this call (the key, when the key went there): go on to the next node; at the end, once
        more along the way if handling the key posted messages to it (``Input.Submitted``, a
        focus request), then to the next key."""
        if self._typing is not event:
            return
        while at < len(path):
            node = path[at]
            at += 1
            if node.call_later(self._follow, event, path, at, passes):
                return
        if passes > 1 and any(busy(node) for node in path):
            self._follow(event, path, 0, passes - 1)
            return
        self.app.call_later(self.done, event)

    def _screen_ready(self, screen: object) -> None:
        # In the screen's task: it has mounted. Its on_mount may have asked for the focus (in the
        # app's queue), so the next key goes after that.
        self.app.call_later(self.done, screen)

    async def _stuck(self) -> None:
        """Keys are held: if the key (or screen) they wait for has not been done for too long,
        stop waiting for it."""
        self._timer = None
        if not self._typed:
            return
        if self._typing is not None:
            waited = now() - self._since
            if waited < STUCK_S or self._composing(self._typing):
                self._timer = self.app.set_timer(max(STUCK_S - waited, 0.25), self._stuck)
                return
            self._typing = None
        await self._next_key()
        if self._typed and self._timer is None:
            self._timer = self.app.set_timer(STUCK_S, self._stuck)

    def _composing(self, what: object) -> bool:
        """Whether ``what`` is the screen on top, still being composed (a slow machine may take
        seconds): the keys typed for it keep waiting, however long that takes."""
        try:
            if what is BOOTING:
                return self._booting()
            app = self.app
            return isinstance(what, Screen) and what is app.screen and not what.is_mounted and what.is_running
        except ScreenStackError:
            return False
