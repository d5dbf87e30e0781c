"""A form's draft: what was typed in a form closed with esc comes back when it opens again.

Each form keeps one draft on the app, in memory (never on disk: a draft may hold a name or a
figure nobody meant to keep), under its own name. A form that was saved forgets its draft; one
closed without a change keeps nothing.
"""

from __future__ import annotations

import weakref
from typing import Any

from textual.widgets import Checkbox, Input, Select, TextArea

FIELDS = (Input, Select, Checkbox, TextArea)
_DRAFTS: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()  # app → drafts


def values(form: Any) -> dict[str, Any]:
    """Every field of ``form`` by id: its text, choice or tick."""
    out: dict[str, Any] = {}
    for widget in form.query("*"):
        if isinstance(widget, FIELDS) and widget.id:
            out[widget.id] = widget.text if isinstance(widget, TextArea) else widget.value
    return out


def _drafts(form: Any) -> dict[str, dict[str, Any]]:
    return _DRAFTS.setdefault(form.app, {})


def keep(form: Any, name: str, defaults: dict[str, Any]) -> None:
    """Keep what ``form`` holds as the draft ``name``, unless nothing differs from ``defaults``."""
    now = values(form)
    if now != defaults:
        _drafts(form)[name] = now
    else:
        _drafts(form).pop(name, None)


def restore(form: Any, name: str, unless_changed_from: dict[str, Any] | None = None) -> bool:
    """Put the draft ``name`` back into ``form``'s fields; whether there was one. A field whose
    value already differs from ``unless_changed_from`` (typed before the draft came) keeps it."""
    draft = _drafts(form).get(name)
    if not draft:
        return False
    now = values(form) if unless_changed_from is not None else {}
    for widget in form.query("*"):
        if unless_changed_from is not None and widget.id in now and now[widget.id] != unless_changed_from.get(widget.id):
            continue
        if isinstance(widget, FIELDS) and widget.id in draft:
            if isinstance(widget, TextArea):
                widget.text = draft[widget.id]
            else:
                widget.value = draft[widget.id]
    return True


def forget(form: Any, name: str) -> None:
    _drafts(form).pop(name, None)
