"""Command palette providers, one per domain: console actions, GPUs, jobs, services, instances, budgets.

``discover`` lists the console's actions when the palette opens empty, so every action is one
``ctrl+p`` away; the domain providers search the live snapshot (open a GPU, find a job).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from gpuconsole.ui.format import inert, short_model
from gpuconsole.ui.navigation import find_in_pane, toggle_job_tables
from gpuconsole.ui.registry import PANES
from gpuconsole.ui.protocols import ConsoleApp
from gpuconsole.ui.themes import theme_names


class PaletteApp(ConsoleApp, Protocol):
    """What the palette's commands call on the app (:class:`gpuconsole.ui.app.GpuConsoleApp`)."""

    def action_show_pane(self, pane_id: str) -> None: ...

    def action_filter(self) -> None: ...

    def action_refresh(self) -> None: ...

    def set_theme(self, short: str) -> None: ...

    def action_demo(self) -> None: ...

    def action_cost_calculator(self) -> None: ...

    def action_help(self) -> None: ...

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...

    def open_gpu(self, uuid: str) -> None: ...

    def switch_context(self, name: str) -> Any: ...


class _ConsoleProvider(Provider):
    @property
    def console_app(self) -> PaletteApp:
        return cast("PaletteApp", self.app)

    def commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        yield from ()

    async def discover(self) -> Hits:
        for name, callback, help_text in self.commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self.commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


class _SearchedProvider(_ConsoleProvider):
    """Many entries (every GPU, job, instance): found by typing, not listed on an empty palette."""

    async def discover(self) -> Hits:
        return
        yield


class ConsoleCommands(_ConsoleProvider):
    """Panes, filter, refresh, themes, demo, help."""

    def commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.console_app
        for spec in PANES:
            yield f"Show {spec.title}", partial(app.action_show_pane, spec.id), f"key {spec.key}"
        yield "Filter the current table", app.action_filter, "key /"
        yield "Jobs: move between jobs and CronJobs", partial(toggle_job_tables, app), "key c in the Jobs pane"
        yield "Refresh: poll every source now", app.action_refresh, "key r"
        for short in theme_names():
            yield f"Theme: {short}", partial(app.set_theme, short), "colour theme from themes/"
        if not app.core.services.demo:
            yield "Switch to the demo (simulated GPU cloud)", app.action_demo, "key d"
        yield "Cost comparison calculator", app.action_cost_calculator, "own server vs cloud on-demand vs spot · key $"
        yield "Key bindings", app.action_help, "key ?"
        yield "Quit gpuconsole", app.exit, "key q"


class GpuCommands(_SearchedProvider):
    """Open any GPU's detail view by node, index, model or UUID."""

    def commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.console_app
        for gpu in app.snapshot.gpus:
            yield (
                f"GPU {gpu.node.split('.', 1)[0]} #{gpu.index} {short_model(gpu.name)}",
                partial(app.open_gpu, gpu.uuid),
                gpu.uuid,
            )


class JobCommands(_SearchedProvider):
    """Submit a GPU job; find a job or CronJob: shows the Jobs pane filtered to it."""

    def submit_command(self) -> tuple[str, Callable[[], object], str]:
        from gpuconsole.ui.wizards.submit import open_submit_wizard

        return "Submit a GPU job…", partial(open_submit_wizard, self.console_app), "key N in the Jobs pane"

    async def discover(self) -> Hits:
        name, callback, help_text = self.submit_command()
        yield DiscoveryHit(name, callback, help=help_text)

    def commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.console_app
        yield self.submit_command()
        for job in app.snapshot.jobs:
            yield f"Job {job.namespace}/{job.name}", partial(find_in_pane, app, "jobs", job.name), job.state.value
        for cron in app.snapshot.cronjobs:
            yield f"CronJob {cron.namespace}/{cron.name}", partial(find_in_pane, app, "jobs", cron.name), cron.schedule


class ServiceCommands(_SearchedProvider):
    """Open an inference service's view by namespace, name, kind or metric family."""

    def commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.console_app
        for service in app.snapshot.services:
            yield (f"Service {inert(service.key)}", partial(open_service, app, service.key),
                   inert(f"{service.kind.value} · {service.metrics_source or 'no serving metrics'}"))


def open_service(app: PaletteApp, key: str) -> None:
    """The Services pane, then the view of the service ``key``."""
    from gpuconsole.ui.panes.service_view import ServiceScreen

    app.action_show_pane("services")
    app.push_screen(ServiceScreen(key))


class InstanceCommands(_SearchedProvider):
    """Launch a GPU instance; find an instance by id, type or name."""

    def launch_command(self) -> tuple[str, Callable[[], object], str]:
        from gpuconsole.ui.wizards import open_provision_wizard

        return "Launch a GPU instance…", partial(open_provision_wizard, self.console_app), "key n in the Instances pane"

    def session_commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        from gpuconsole.ui.access import aws_session_needed, open_aws_session

        if aws_session_needed(self.console_app):
            yield ("Open the AWS admin session (MFA code)…", partial(open_aws_session, self.console_app),
                   "AWS checks the code; [aws.roles] in the configuration")

    async def discover(self) -> Hits:
        for name, callback, help_text in (self.launch_command(), *self.session_commands()):
            yield DiscoveryHit(name, callback, help=help_text)

    def commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.console_app
        yield self.launch_command()
        yield from self.session_commands()
        for inst in app.snapshot.instances:
            label = f"Instance {inst.instance_id} {inst.instance_type} {inst.name}".rstrip()
            yield label, partial(find_in_pane, app, "instances", inst.instance_id), f"{inst.market.value}, {inst.state.value}"


class BudgetCommands(_SearchedProvider):
    """Show a budget."""

    def commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.console_app
        for status in app.snapshot.budgets:
            yield f"Budget {status.budget.name}", partial(find_in_pane, app, "budgets", status.budget.name), status.budget.scope



class ContextCommands(Provider):
    """``Kubernetes context: NAME`` for each context of the kubeconfig (like k9s ``:ctx``).

    The kubeconfig is read off the event loop when the palette opens; nothing is listed when
    the jobs source is not a Kubernetes cluster.
    """

    async def _contexts(self) -> tuple[tuple[str, ...], str | None]:
        import asyncio

        from gpuconsole.core.ops.actions import ActionError

        app = cast("PaletteApp", self.app)
        try:
            return await asyncio.to_thread(app.core.kube_contexts)
        except ActionError:
            return (), None

    def _entries(self, names: tuple[str, ...], current: str | None) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = cast("PaletteApp", self.app)
        for name in names:
            if name != current:
                yield f"Kubernetes context: {name}", partial(app.switch_context, name), f"now {current or 'default'}"

    async def discover(self) -> Hits:
        names, current = await self._contexts()
        for title, callback, help_text in self._entries(names, current):
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        names, current = await self._contexts()
        matcher = self.matcher(query)
        for title, callback, help_text in self._entries(names, current):
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
