"""Budget notifications delivered: the budget's ``notify_command`` and its ``webhook``.

:func:`notify` tells one :class:`~gpuconsole.core.money.budget_evaluation.Crossing` through both hooks
the budget has, each with a timeout, as one ``notify`` request through the action path (so it is
recorded and audited). A budget without hooks notifies through the banner and the bell only:
nothing leaves the console and nothing is recorded. These calls block: :class:`BudgetOps` makes
them on its background thread, or on the caller's for ``budget check --enforce``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from gpuconsole.backends.base import BackendError, one_line
from gpuconsole.core.money import budgets as rules
from gpuconsole.core.money.budget_evaluation import Crossing
from gpuconsole.core.ops.actions import (
    ActionDenied,
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    ActionResult,
    run_action,
)

NOTIFY_TIMEOUT_S = 10.0


def notify(crossing: Crossing, record: ActionLog, clock: Callable[[], float],
           timeout: float = NOTIFY_TIMEOUT_S) -> ActionResult:
    """Run the budget's ``notify_command`` and POST its ``webhook`` for ``crossing``.

    Never raises: a refused or failed notification comes back with ``ok`` False and the message
    ``notify failed: …`` (one line; a webhook is named by its host only).
    """
    b = crossing.budget
    request = ActionRequest(ActionKind.NOTIFY, b.name, params=(("threshold", rules.threshold_key(crossing.threshold)),
                                                               ("message", crossing.message())))

    def do() -> str:
        done: list[str] = []
        problems: list[str] = []
        for hook, run in ((b.notify_command, run_notify_command), (b.webhook, post_webhook)):
            if not hook:
                continue
            try:
                done.append(run(hook, crossing, timeout))
            except BackendError as exc:
                problems.append(one_line(exc))
        if problems:
            raise BackendError(f"budget {b.name}: " + "; ".join(problems))
        return crossing.message() + (f" ({', '.join(done)})" if done else "")

    if not (b.notify_command or b.webhook):
        # The banner and the bell only: nothing leaves the console, nothing to record.
        return ActionResult(request, True, crossing.message(), clock())
    try:
        return run_action(request, do, record, clock)
    except ActionDenied as exc:
        # Read-only, or an auditor's console: the banner and the bell only (the refusal is audited).
        return ActionResult(request, True, f"{crossing.message()} (hooks not run: {exc})", clock())
    except ActionError as exc:
        return ActionResult(request, False, f"notify failed: {exc}", clock())


def run_notify_command(command: str, crossing: Crossing, timeout: float = NOTIFY_TIMEOUT_S) -> str:
    """Run ``command`` in a shell with the crossing in its environment.

    The command runs in its own process group, so on a timeout everything it started is killed.

    Raises:
        BackendError: it failed, or did not finish within ``timeout`` seconds (one line).
    """
    import signal
    import subprocess

    env = {**os.environ, **crossing.environment()}
    try:
        # The user's own command, from their budget: a shell is what they wrote it for.
        proc = subprocess.Popen(command, shell=True, env=env, stdin=subprocess.DEVNULL,  # noqa: S602
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as exc:
        raise BackendError(f"notify command could not start: {exc.strerror or exc}") from exc
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.communicate()
        raise BackendError(f"notify command did not finish in {timeout:g} s and was killed") from None
    if proc.returncode != 0:
        last = next((line.strip() for line in reversed(err.splitlines()) if line.strip()), "")
        raise BackendError(f"notify command exited with status {proc.returncode}" + (f": {last[:200]}" if last else ""))
    return "notify command ran"


def post_webhook(url: str, crossing: Crossing, timeout: float = NOTIFY_TIMEOUT_S) -> str:
    """POST the crossing as JSON to ``url`` (TLS certificates verified, at the TLS floor of
    ``[tls] min_version``).

    A redirect is never followed: an ``http://localhost`` hook that answers 302 would otherwise
    send the crossing to whatever host it names, past the check that kept plain http local.
    Messages name only the host: a webhook's path often holds its secret.

    Raises:
        BackendError: no answer within ``timeout``, or an answer other than 2xx (one line).
    """
    import urllib.error  # imported here: most sessions never post a webhook
    import urllib.parse

    from gpuconsole.backends.tls import client_context

    host = urllib.parse.urlsplit(url).hostname or "the webhook"
    body = json.dumps(crossing.payload()).encode()
    try:
        # https, or http to localhost only (checked when the budget was saved).
        opener = opener_without_redirects(client_context(f"webhook {host}"))
        request = _post_request(url, body)
        with opener.open(request, timeout=timeout) as answer:
            answer.read(65536)
            status = answer.status
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            raise BackendError(f"webhook {host} answered HTTP {exc.code}: redirects are not followed") from None
        raise BackendError(f"webhook {host} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        text = one_line(reason) if isinstance(reason, BaseException) else str(reason)
        raise BackendError(f"webhook {host} failed: {text}") from None
    return f"webhook {host} answered HTTP {status}"


def _post_request(url: str, body: bytes) -> Any:
    import urllib.request

    return urllib.request.Request(url, data=body, method="POST",
                                  headers={"Content-Type": "application/json", "User-Agent": "gpuconsole"})


def opener_without_redirects(context: Any) -> Any:
    """A urllib opener over ``context`` whose redirect handler follows nothing: a 3xx answer
    comes back as the ``HTTPError`` it is."""
    import urllib.request

    class RefuseRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), RefuseRedirects())
