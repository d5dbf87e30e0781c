"""Going somewhere from the palette or the ``:`` line: a pane filtered to words, a pane's view,
a command run. Each waits for a pane that is still mounting (hidden panes mount after the
first frame) rather than doing nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuconsole.ui.command_line import CommandError, parse


def when_shown(app: Any, pane_id: str, then: Callable[[Any], object]) -> None:
    """Show ``pane_id``, then call ``then(pane)`` once it is mounted and still on screen."""
    app.action_show_pane(pane_id)

    def apply() -> None:
        if app.active_pane == pane_id and (pane := app.current_pane) is not None:
            then(pane)

    if app.current_pane is not None:
        apply()
    else:
        app.call_after_refresh(apply)


def find_in_pane(app: Any, pane_id: str, words: str) -> None:
    """Show a pane filtered to ``words`` (from the command palette)."""

    def narrow(pane: Any) -> None:
        pane.set_filter(words)
        pane.focus_body()

    when_shown(app, pane_id, narrow)


def open_view(app: Any, pane_id: str, view: str) -> None:
    """Show a pane on one of its views (``:cronjobs``, ``:nodes``)."""
    when_shown(app, pane_id, lambda pane: pane.open_view(view))


def toggle_job_tables(app: Any) -> None:
    """Show the Jobs pane and move between its jobs and CronJobs tables."""
    when_shown(app, "jobs", lambda pane: pane.action_toggle_table())


def run_command(app: Any, line: str) -> None:
    """Run a ``:`` line; one that is not a command is one line on screen."""
    from gpuconsole.ui.themes import theme_names

    try:
        command = parse(line)
    except CommandError as exc:
        app.notify(str(exc), severity="warning", timeout=6)
        return
    if command is None:
        return
    if command.verb == "show":
        if command.view:
            open_view(app, command.pane, command.view)
        else:
            app.action_show_pane(command.pane)
    elif command.verb in ("q", "quit"):
        app.exit()
    elif command.verb == "help":
        app.action_help()
    elif command.verb == "ns":
        def namespace(pane: Any) -> None:  # k9s's :ns: the job queue of one namespace (none: all)
            pane.open_view("jobs")
            pane.set_filter(command.arg)
            pane.focus_body()

        when_shown(app, "jobs", namespace)
    elif command.verb == "ctx":
        app.switch_context(command.arg)
    elif command.verb == "theme":
        if command.arg not in theme_names():
            app.notify(f"no theme {command.arg[:40]}; there are {', '.join(theme_names())}", severity="warning")
            return
        app.set_theme(command.arg)


def switch_context(app: Any, name: str) -> None:
    """Watch kubeconfig context ``name``'s jobs, switched in a worker; a failure is one line."""
    from gpuconsole.core.ops.actions import ActionError

    def switch() -> None:
        try:
            app.core.switch_context(name)
        except ActionError as exc:
            app.call_from_thread(app.notify, str(exc), severity="error")
            return
        app.call_from_thread(app.notify, f"Kubernetes context: {name}")

    app.run_worker(switch, thread=True, exclusive=True, group="kube-context", exit_on_error=False,
                   description="switch context")
