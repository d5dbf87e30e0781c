"""One way to run a change from the UI.

:func:`run_action` is the only code that pushes a confirmation for a change, asks for an MFA
code and starts the worker that makes it: a pane describes the change as an :class:`Action`
(what it is, the call, the confirmation it needs) and hands it over. The result, or the reason
it was refused, is one notification; then every source is polled again.

The worker runs on the pane that asked, so an error nobody expected still reaches the screen
(:mod:`gpuconsole.ui.worker_errors`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionResult
from gpuconsole.model import SourceKind, SourceState

if TYPE_CHECKING:
    from textual.dom import DOMNode


@dataclass(frozen=True)
class Confirm:
    """The question asked before a change (see :class:`~gpuconsole.ui.screens.confirm.ConfirmScreen`):
    ``typed`` is the word the user must type, ``targets`` every target, one line each, and
    ``cancelled`` what is said when the user backs out (nothing when empty)."""

    title: str
    prompt: str
    details: str = ""
    typed: str | None = None
    targets: tuple[str, ...] = ()
    total: str = ""
    cancelled: str = ""


@dataclass(frozen=True)
class Action:
    """A change: ``call`` gets the confirmation's answer (None when none was asked) and returns
    the core's :class:`ActionResult`; ``what`` names it in the MFA prompt and in a refusal
    (``what: reason``, or the reason alone when ``prefix`` is False). ``kind`` and ``params``
    are what the core checks MFA for; ``refused`` the errors said in one line; ``say`` replaces
    the notification (a pane that keeps its own status line)."""

    what: str
    call: Callable[[str | None], ActionResult | str]
    kind: ActionKind | None = None
    params: tuple[tuple[str, str], ...] = ()
    confirm: Confirm | None = None
    refused: tuple[type[Exception], ...] = (ActionError,)
    prefix: bool = True
    group: str = "action"
    say: Callable[[str], None] | None = None
    refresh: bool = True


def batch(verb: str, noun: str, changes: Sequence[tuple[str, Callable[[str | None], ActionResult | str]]],
          after: Callable[[], object] | None = None,
          refused: tuple[type[Exception], ...] = (ActionError,)) -> Callable[[str | None], str]:
    """One call that makes each of ``changes`` (name, call) in turn, for the rows a user tagged:
    it says how many were made, and the first refusal in full (one refused target never stops
    the others); ``after`` runs once all were tried (in the worker)."""

    def call(answer: str | None) -> str:
        made, said = 0, []
        for name, change in changes:
            try:
                result = change(answer)
            except refused as exc:
                said.append(f"{name}: {exc}")
                continue
            if isinstance(result, ActionResult) and not result.ok:
                said.append(f"{name}: {result.message}")
            else:
                made += 1
        if after is not None:
            after()
        words = f"{verb} {noun}: {made} of {len(changes)} done"
        if said:
            words += f"; {len(said)} refused ({said[0]}{'; …' if len(said) > 1 else ''})"
        return words

    return call


def run_action(node: DOMNode, action: Action) -> None:
    """Confirm ``action`` where it asks for it, then make the change in a worker of ``node``."""
    ask = action.confirm
    if ask is None:
        _start(node, action, None)
        return
    from gpuconsole.ui.screens.confirm import ConfirmScreen

    def answered(answer: str | None) -> None:
        if answer is None:
            if ask.cancelled:
                node.app.notify(ask.cancelled)
            return
        _start(node, action, answer)

    node.app.push_screen(ConfirmScreen(ask.title, ask.prompt, ask.details, typed=ask.typed, targets=ask.targets,
                                       total=ask.total), answered)


def _start(node: DOMNode, action: Action, answer: str | None) -> None:
    node.run_worker(lambda: _change(node, action, answer), thread=True, group=action.group, exit_on_error=False,
                    description=action.what)


def _change(node: DOMNode, action: Action, answer: str | None) -> None:
    """In the worker: the MFA code first where the core wants one, then the call."""
    app: Any = node.app
    if action.kind is not None and _ask_mfa_then(app, action.kind, action.what,
                                                 lambda: _start(node, action, answer), action.params):
        return
    say = action.say
    try:
        result = action.call(answer)
    except action.refused as exc:
        words = f"{action.what}: {exc}" if action.prefix else str(exc)
        app.call_from_thread(say or (lambda text: app.notify(text, severity="error")), words)
        return
    message = result if isinstance(result, str) else result.message
    if not isinstance(result, ActionResult) or result.ok:
        message += _last_answer_note(app, getattr(node, "kind", None))
    app.call_from_thread(say or app.notify, message)
    if action.refresh:
        app.core.refresh()


def _last_answer_note(app: Any, kind: object) -> str:
    """Words to add when the pane's source is not live: the change was made, but the table
    shows the source's last answer (a deleted row stays until the source answers again)."""
    snapshot = getattr(app, "snapshot", None)
    if not isinstance(kind, SourceKind) or snapshot is None:
        return ""
    status = snapshot.source(kind)
    if status is None or status.state in (SourceState.LIVE, SourceState.UNCONFIGURED):
        return ""
    return (f" · the {kind.value} source is {status.describe(time.time())}: the table shows its last answer "
            "until it answers again")


def _ask_mfa_then(app: Any, kind: ActionKind, purpose: str, run: Callable[[], object],
                  params: tuple[tuple[str, str], ...] = ()) -> bool:
    """From a worker thread: when ``kind`` (with the request's ``params``) needs a fresh MFA
    code, ask for it on screen and call ``run`` (again) once a code is accepted. Returns True
    when it asked (the caller stops)."""
    guard = app.core.services.guard
    if not guard.mfa_pending(kind, params) or not (guard.aws_checks_mfa(kind) or guard.mfa.enrolled(guard.user)):
        return False  # no code needed, or none can be given: the core decides and says why

    def answered(ok: bool | None) -> None:
        if ok:
            run()
        else:
            app.notify(f"{purpose}: cancelled (no MFA code)", severity="warning")

    from gpuconsole.ui.screens.mfa_prompt import MfaPrompt

    app.call_from_thread(app.push_screen, MfaPrompt(kind, purpose), answered)
    return True
