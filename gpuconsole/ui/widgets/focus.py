"""Moving the focus now, before the keys already typed are handed out.

``Widget.focus()`` only asks for the focus: the move happens once the app has handled what is
already in its queue. A key typed right after the key that opened a field is in that queue, so it
would still go to the widget that had the focus (a table, whose bindings then run: ``q`` quits).
:func:`focus_now` moves the focus in the handler that shows the field.
"""

from __future__ import annotations

from textual.dom import NoScreen
from textual.widget import Widget


def focus_now(widget: Widget) -> None:
    """Give ``widget`` the focus at once; where it can't take it yet (not on a screen, or not
    focusable at the moment) ask for it as ``widget.focus()`` does."""
    try:
        screen = widget.screen
    except NoScreen:
        widget.focus()
        return
    if widget.focusable:
        screen.set_focus(widget)
    else:
        widget.focus()
