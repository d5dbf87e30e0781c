"""Money needs a deliberate key: nothing typed before a confirmation was on screen confirms it.

A fast typist's keys are delivered in order (:mod:`gpuconsole.ui.typeahead`), so a second
``ctrl+n`` typed with the first would reach the Review step and launch what the user never saw.
A screen or step that confirms a spend or a destruction calls :func:`shown_now` as it is
shown: the keys still held from the burst are dropped, with a note. Its confirming key then asks
:func:`deliberate`, which refuses a key typed before that moment (read by the terminal in the
same burst, but handed out after the screen came up) and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuconsole.ui.typeahead import now

SHOWN = "_gpuconsole_shown_at"


def shown_now(node: Any, what: str, say: Callable[[str], object] | None = None) -> None:
    """``node`` (a confirmation screen as it mounts, a wizard's confirming step as it is
    switched to) is being shown: the keys typed ahead of it are dropped (said with ``say``,
    else a notification), and only a key typed from now on may confirm ``what``."""
    setattr(node, SHOWN, now())
    app = node.app
    gate = getattr(app, "typeahead", None)
    dropped = gate.drop_held() if gate is not None else 0
    if dropped:
        keys = f"{dropped} key{'s' if dropped != 1 else ''}"
        _say(app, say, f"{keys} typed ahead of {what} dropped: only a key pressed with it on screen confirms it.")


def _say(app: Any, say: Callable[[str], object] | None, words: str) -> None:
    (say or (lambda text: app.notify(text, severity="warning", timeout=6)))(words)


def typed_before_shown(app: Any, node: Any) -> bool:
    """Whether the key being handled was typed before ``node`` was shown."""
    gate = getattr(app, "typeahead", None)
    key = gate.key if gate is not None else None
    if key is None:
        return False  # a click, or code: nothing was typed ahead
    shown = getattr(node, SHOWN, None)
    return shown is None or key.time < shown


def deliberate(app: Any, node: Any, what: str, say: Callable[[str], object] | None = None) -> bool:
    """True when the key confirming ``what`` was pressed with ``node`` on screen; otherwise say
    why nothing was done (``say``, else a notification) and drop the rest of the burst."""
    if not typed_before_shown(app, node):
        return True
    app.typeahead.drop_held()
    _say(app, say, f"Nothing was done: {what} needs a key pressed with it on screen; press it again.")
    return False
